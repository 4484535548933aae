"""Variant: no background tasks at all; the invocation awaits its writes.

Writes and the quote run concurrently under one gather, which holds every
one of them until it is done; the handler returns only when all have
finished. The invocation takes a round trip longer, and nothing can vanish.
return_exceptions=True makes the gather wait for the writes even when the
quote fails (without it, gather raises at once and asyncio.run cancels the
writes still running); the quote's failure is raised after.
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

    async def put(self, sku: str, price: str) -> None:
        """Cache a new price and write it to the store."""
        self._prices[sku] = price
        await self._write_behind(sku, price)

    async def _write_behind(self, sku: str, price: str) -> None:
        try:
            await store_call(f"SET price:{sku} {price}")
        except Exception:
            # A refused write must not fail the quote: log it, with its traceback.
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
    writes = [CACHE.put(sku, price) for sku, price in event["prices"].items()]
    *_, price = await asyncio.gather(*writes, CACHE.get(event["quote"]), return_exceptions=True)
    if isinstance(price, BaseException):
        raise price
    return {"sku": event["quote"], "price": price}


def handler(event: dict, context=None) -> dict:
    """Entry point: event = {"prices": {sku: price, ...}, "quote": sku}."""
    return asyncio.run(handle(event))
