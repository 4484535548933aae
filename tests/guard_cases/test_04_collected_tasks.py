"""The price-update function (kata 04), tested as its team would: invocations against a stand-in price store.

The store speaks the kata's line protocol (AUTH, then SET or GET) on 127.0.0.1;
each test points the module at it and calls `handler` as Lambda does.
"""
import socketserver
import threading

import pytest

# The bug: PriceCache.put starts each write-behind with a bare asyncio.create_task that nothing holds
# or waits for; asyncio.run cancels the writes still pending when the handler returns.
BUG = [("04_collected_tasks.py", "put")]


class Store(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Connection)
        self.data = {}


class Connection(socketserver.StreamRequestHandler):
    def handle(self):
        for raw in self.rfile:
            verb, _, rest = raw.decode().strip().partition(" ")
            if verb == "AUTH":
                reply = "+OK" if rest == "dev" else "-WRONGPASS"
            elif verb == "SET":
                key, _, value = rest.partition(" ")
                self.server.data[key] = value
                reply = "+OK"
            elif verb == "GET":
                reply = f"+{self.server.data[rest]}" if rest in self.server.data else "_"
            else:
                reply = f"-ERR unknown command {verb}"
            self.wfile.write(reply.encode() + b"\n")


@pytest.fixture
def store(kata, monkeypatch):
    server = Store()
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    monkeypatch.setattr(kata, "STORE_ADDRESS", f"127.0.0.1:{server.server_address[1]}")
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


def test_every_price_of_a_batch_lands_in_the_store(kata, store):
    """A batch of three prices, quoting one of them: the quote comes from the cache, and all three are stored."""
    answer = kata.handler({"prices": {"A1": "9.99", "B2": "4.50", "C3": "12.00"}, "quote": "B2"})
    assert answer == {"sku": "B2", "price": "4.50"}
    assert store.data == {"price:A1": "9.99", "price:B2": "4.50", "price:C3": "12.00"}


def test_a_quote_it_never_saw_is_read_through_from_the_store(kata, store):
    """Quoting a price another container stored, in an invocation with no prices of its own: read from the store.

    (No write races the read here: whether a write-behind would finish before the read's reply is up to the
    scheduler, and this test's verdict must not be.)"""
    store.data["price:Z9"] = "3.10"
    assert kata.handler({"prices": {}, "quote": "Z9"}) == {"sku": "Z9", "price": "3.10"}
