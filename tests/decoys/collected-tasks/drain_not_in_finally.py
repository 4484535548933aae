"""Decoy: a set of writes and a drain, but the drain runs after the quote instead of in a finally.

Everything else is the reference fix: a set of running writes, a done
callback that discards, logging inside the write, a drain on the running
loop. But the drain runs only when the quote comes back: when the store
refuses the quote's read, the handler raises straight past it, and
asyncio.run cancels every write still waiting for its reply. The writes of
the feed are lost because an unrelated read failed, and nothing logs them:
CancelledError is not an Exception, so the write's own except never sees it.
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
        # The event loop holds tasks only weakly. A write parked on the store's
        # reply (a stream read: the protocol holds its reader weakly too) is
        # reachable from nothing but itself, so a garbage collection destroys it
        # mid-write. This set is the strong reference that keeps each write alive.
        self._writes: set[asyncio.Task] = set()

    def put(self, sku: str, price: str) -> None:
        """Cache a new price now; the write to the store happens in the background."""
        self._prices[sku] = price
        task = asyncio.create_task(self._write_behind(sku, price))
        self._writes.add(task)
        # Forget the task once it is done, or a warm container keeps every
        # finished write (and the dead event loop it points to) forever.
        task.add_done_callback(self._writes.discard)

    async def _write_behind(self, sku: str, price: str) -> None:
        try:
            await store_call(f"SET price:{sku} {price}")
        except Exception:
            # Nobody awaits this task's result: log the failure here, with its
            # traceback, or it is lost.
            log.exception("write-behind of price:%s failed", sku)

    async def drain(self) -> None:
        """Wait for the writes started on this loop.

        asyncio.run cancels every task still pending when the handler returns
        (and a real Lambda freezes the process), so a write that has not
        finished by then never lands.
        """
        loop = asyncio.get_running_loop()
        while pending := [t for t in self._writes if t.get_loop() is loop]:
            await asyncio.wait(pending)

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
    result = {"sku": event["quote"], "price": await CACHE.get(event["quote"])}
    await CACHE.drain()  # before the invocation ends, every write it started must be done
    return result


def handler(event: dict, context=None) -> dict:
    """Entry point: event = {"prices": {sku: price, ...}, "quote": sku}."""
    return asyncio.run(handle(event))
