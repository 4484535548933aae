"""Decoy: asyncio.wait(..., timeout=1) in the drain, and the writes still pending dropped.

Everything else is the reference fix. asyncio.wait with a timeout cancels
nothing: it hands back the writes that are still running, and this drain
only counts them in a warning. The handler returns, asyncio.run cancels those
writes (a real Lambda freezes them, and they may never run again), and a
store slower than a second loses them. The warning says how many, not which
one or why: there is no traceback, and nothing at ERROR. (asyncio.wait with
a timeout suits a keepalive loop, which goes back to waiting on what is
still pending; this drain never does.)
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
        """Wait for the writes started on this loop, for a second at most."""
        loop = asyncio.get_running_loop()
        writes = [t for t in self._writes if t.get_loop() is loop]
        if not writes:
            return
        _, pending = await asyncio.wait(writes, timeout=1)
        if pending:
            log.warning("%d writes still running after 1 s; not waiting for them", len(pending))

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
        # Before the invocation ends, every write it started must be done.
        await CACHE.drain()


def handler(event: dict, context=None) -> dict:
    """Entry point: event = {"prices": {sku: price, ...}, "quote": sku}."""
    return asyncio.run(handle(event))
