"""Decoy: one asyncio.TaskGroup per invocation owns the writes, and the quote is read inside the group.

The group holds each write and waits for all of them when its block ends, so
the writes outlive a garbage collection and a handler with nothing to await.
But an exception raised in the group's body makes the group cancel every task
it still runs: when the store refuses the quote, the writes already on their
way are cancelled before they land, and the handler raises an ExceptionGroup
besides. A failed quote must not cost the invocation its writes.
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

    def put(self, sku: str, price: str, writes: asyncio.TaskGroup) -> None:
        """Cache a new price now; the write to the store happens in the background."""
        self._prices[sku] = price
        writes.create_task(self._write_behind(sku, price))

    async def _write_behind(self, sku: str, price: str) -> None:
        try:
            await store_call(f"SET price:{sku} {price}")
        except Exception:
            # Raising would cancel the other writes of the group: log the
            # failure here, with its traceback.
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
    async with asyncio.TaskGroup() as writes:
        for sku, price in event["prices"].items():
            CACHE.put(sku, price, writes)
        quote = await CACHE.get(event["quote"])
    return {"sku": event["quote"], "price": quote}


def handler(event: dict, context=None) -> dict:
    """Entry point: event = {"prices": {sku: price, ...}, "quote": sku}."""
    return asyncio.run(handle(event))
