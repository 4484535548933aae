"""Price-update function with a write-behind cache, run as a Lambda-style function.

Each invocation receives a batch of new prices from the catalogue feed and a
product to quote. The function keeps the prices it has seen in an in-process
cache (a warm container reuses it), and writes each new price *behind* to the
shared price store, so the other containers see it too. Writing behind means
the invocation does not wait for the store: each write runs as its own task.

The price store speaks a small line protocol over TCP, like Redis: a client
connects, authenticates with `AUTH <token>`, then sends `SET key value` or
`GET key`. Replies start with `+` (ok), `-` (an error) or `_` (no value).

`handler(event)` is the function entry point. Each call runs one
`asyncio.run(...)`: one invocation. A warm container calls it again and
again in the same process, so module globals outlive every event loop.

Your task: every price of every invocation must land in the store, even when
the garbage collector runs while the writes wait for the store, and even when
the handler has nothing left to await. A write that fails must be logged with
its traceback on this module's logger before the invocation returns, and a
warm container must not keep finished writes around forever.
Run `loopkata check collected-tasks` to grade your fix.
"""
import asyncio
import logging
import os

log = logging.getLogger(__name__)

STORE_ADDRESS = os.environ.get("PRICE_STORE", "127.0.0.1:6480")
STORE_TOKEN = os.environ.get("PRICE_STORE_TOKEN", "dev")


class StoreError(Exception):
    """The price store answered a command with an error."""


async def store_call(command: str) -> str | None:
    """One short connection to the store: authenticate, send one command, return its value."""
    host, port = STORE_ADDRESS.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        for line in (f"AUTH {STORE_TOKEN}", command):
            writer.write(line.encode() + b"\n")
            reply = (await reader.readline()).decode().rstrip("\n")
            if not reply:
                raise StoreError(f"the store closed the connection after {line.split()[0]}")
            if reply.startswith("-"):
                raise StoreError(reply[1:])
        return None if reply == "_" else reply[1:]
    finally:
        writer.close()


class PriceCache:
    """Prices this container has seen, kept between warm invocations."""

    def __init__(self):
        self._prices: dict[str, str] = {}

    def put(self, sku: str, price: str) -> None:
        """Cache a new price now; the write to the store happens in the background."""
        self._prices[sku] = price
        asyncio.create_task(self._write_behind(sku, price))

    async def _write_behind(self, sku: str, price: str) -> None:
        await store_call(f"SET price:{sku} {price}")

    async def get(self, sku: str) -> str | None:
        """The cached price, or the store's (read through)."""
        if sku not in self._prices:
            price = await store_call(f"GET price:{sku}")
            if price is None:
                return None
            self._prices[sku] = price
        return self._prices[sku]


CACHE = PriceCache()


async def handle(event: dict) -> dict:
    for sku, price in event["prices"].items():
        CACHE.put(sku, price)
    return {"sku": event["quote"], "price": await CACHE.get(event["quote"])}


def handler(event: dict, context=None) -> dict:
    """Entry point: event = {"prices": {sku: price, ...}, "quote": sku}."""
    return asyncio.run(handle(event))
