"""Decoy: one loop and one session, a write sent again under its key for as long as the connection fails.

The key makes every attempt safe: the service applies the write once, however
many times it arrives. But a service that is down is met with a request on
every turn, and the invocation does not end until the platform's timeout
kills it, with nothing logged. A write goes out again a bounded number of
times (once is enough for a connection that died idle), and then the error
reaches the caller.
"""
import asyncio
import uuid

import aiohttp

TIMEOUT = aiohttp.ClientTimeout(total=10)

LOOP = asyncio.new_event_loop()
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
    body = {"order": order, "sku": sku, "qty": qty}
    headers = {"Idempotency-Key": str(uuid.uuid4())}
    while True:
        try:
            async with session.post(f"{api}/reservations", json=body, headers=headers) as resp:
                resp.raise_for_status()
                return await resp.json()
        except aiohttp.ClientConnectionError:
            continue


async def invocation(event: dict) -> dict:
    session = await get_session()
    if event["action"] == "lookup":
        return await lookup(session, event["api"], event["sku"])
    return await reserve(session, event["api"], event["order"], event["sku"], event["qty"])


def handler(event: dict, context=None) -> dict:
    return LOOP.run_until_complete(invocation(event))
