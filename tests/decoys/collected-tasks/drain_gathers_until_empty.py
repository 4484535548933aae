"""Decoy: a drain that gathers until the set is empty, which spins forever on Python 3.12 and later.

Everything else is the reference fix: a set of running writes, a done
callback that discards, logging inside the write. The drain lists the writes
of this loop and gathers them, again and again, until the set is empty. But
the set only empties when the loop runs the done callbacks, and since Python
3.12, awaiting gather() of tasks that have all finished returns at once,
without giving the loop a turn. When the drain finds only finished writes
whose discard is still queued, it lists them again, gather returns again, and
so on forever: the event loop thread runs at full speed and the invocation
never returns. Up to 3.11 gather always yields, the callbacks run, and this
drain ends, so the same code passes there. Never re-check state that a
callback updates without giving the loop a turn: asyncio.wait always yields.

wrong_on_python = ">=3.12"
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
        while writes := [t for t in self._writes if t.get_loop() is loop]:
            await asyncio.gather(*writes, return_exceptions=True)

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
