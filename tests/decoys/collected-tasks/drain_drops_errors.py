"""Decoy: a set with discard, and a drain that gathers with return_exceptions=True.

Every write survives and every good price lands. But gather(...,
return_exceptions=True) hands each failure back as a value, and the drain
throws the values away: the store's refusal is never raised, never logged,
and since its exception was retrieved, asyncio does not log it either.
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
        self._writes: set[asyncio.Task] = set()

    def put(self, sku: str, price: str) -> None:
        """Cache a new price now; the write to the store happens in the background."""
        self._prices[sku] = price
        task = asyncio.create_task(self._write_behind(sku, price))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _write_behind(self, sku: str, price: str) -> None:
        await store_call(f"SET price:{sku} {price}")

    async def drain(self) -> None:
        """Wait for the writes; one failed write must not fail the invocation."""
        loop = asyncio.get_running_loop()
        await asyncio.gather(*[t for t in self._writes if t.get_loop() is loop], return_exceptions=True)

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
    try:
        for sku, price in event["prices"].items():
            CACHE.put(sku, price)
        return {"sku": event["quote"], "price": await CACHE.get(event["quote"])}
    finally:
        await CACHE.drain()


def handler(event: dict, context=None) -> dict:
    """Entry point: event = {"prices": {sku: price, ...}, "quote": sku}."""
    return asyncio.run(handle(event))
