"""Decoy: the textbook strong reference (a set, and a done callback that discards), no drain.

The garbage collector can no longer destroy a waiting write. But the handler
still returns as soon as its quote is ready, and asyncio.run then cancels
every write still pending: with a cached quote none of them lands, and nothing
is logged. A set keeps a task from being collected; it does not keep the
invocation open until the task is done.
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
        # Strong references, so the garbage collector cannot take a running write.
        self._writes: set[asyncio.Task] = set()

    def put(self, sku: str, price: str) -> None:
        """Cache a new price now; the write to the store happens in the background."""
        self._prices[sku] = price
        task = asyncio.create_task(self._write_behind(sku, price))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _write_behind(self, sku: str, price: str) -> None:
        try:
            await store_call(f"SET price:{sku} {price}")
        except Exception:
            log.exception("write-behind of price:%s failed", sku)

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
