"""Decoy: name the task, give it a done callback, and wait for asyncio.all_tasks() before returning.

Assigning the task to a local silences the linter, but the local dies when
put() returns; the done callback is stored on the task itself, so it holds
nothing. Waiting for asyncio.all_tasks() lands the writes when nothing else
happens, yet all_tasks() is a weak view: a write that the garbage collector
destroys while it waits for the store is no longer in it, and never lands.
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


def _report_failure(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("write-behind failed", exc_info=task.exception())


class PriceCache:
    """Prices this container has seen, kept between warm invocations."""

    def __init__(self):
        self._prices: dict[str, str] = {}

    def put(self, sku: str, price: str) -> None:
        """Cache a new price now; the write to the store happens in the background."""
        self._prices[sku] = price
        task = asyncio.create_task(self._write_behind(sku, price))
        task.add_done_callback(_report_failure)

    async def _write_behind(self, sku: str, price: str) -> None:
        await store_call(f"SET price:{sku} {price}")

    async def drain(self) -> None:
        """Wait for every other task of this loop (the writes)."""
        others = asyncio.all_tasks() - {asyncio.current_task()}
        if others:
            await asyncio.wait(others)

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
