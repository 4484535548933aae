"""Variant: one asyncio.Runner kept open for the container, and a key made from the reservation itself.

The runner's loop lives as long as the module, and so do the session and its
connection. The Idempotency-Key is the order, sku and quantity: the same for
both attempts of a write (and for the caller's own retry of the whole
invocation), different for every other reservation.
"""
import asyncio

import aiohttp

TIMEOUT = aiohttp.ClientTimeout(total=10)
ATTEMPTS = 2

RUNNER = asyncio.Runner()  # never closed: the container's life is the loop's
_session: aiohttp.ClientSession | None = None


async def get_session() -> aiohttp.ClientSession:
    global _session
    if _session is None:
        _session = aiohttp.ClientSession(timeout=TIMEOUT)
    return _session


async def lookup(session: aiohttp.ClientSession, api: str, sku: str) -> dict:
    async with session.get(f"{api}/stock/{sku}") as resp:
        resp.raise_for_status()
        return await resp.json()


async def reserve(session: aiohttp.ClientSession, api: str, order: str, sku: str, qty: int) -> dict:
    key = f"reserve/{order}/{sku}/{qty}"
    for attempt in range(1, ATTEMPTS + 1):
        try:
            async with session.post(f"{api}/reservations", json={"order": order, "sku": sku, "qty": qty},
                                    headers={"Idempotency-Key": key}) as resp:
                resp.raise_for_status()
                return await resp.json()
        except aiohttp.ClientConnectionError:
            if attempt == ATTEMPTS:
                raise
    raise RuntimeError("no attempt was made")


async def invocation(event: dict) -> dict:
    session = await get_session()
    if event["action"] == "lookup":
        return await lookup(session, event["api"], event["sku"])
    return await reserve(session, event["api"], event["order"], event["sku"], event["qty"])


def handler(event: dict, context=None) -> dict:
    return RUNNER.run(invocation(event))
