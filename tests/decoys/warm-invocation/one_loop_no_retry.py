"""Decoy: one event loop and one session for the container, and no retry.

The stock service now sees one connection for every warm invocation. But
after a freeze longer than its keep-alive timeout, the pooled connection is
closed at the service's end, and the frozen process could not notice: the
first write after the freeze is sent on it and fails with ClientOSError
(aiohttp sends a GET again by itself, never a POST). A connection that dies
after the service applied a write fails the invocation the same way.
"""
import asyncio

import aiohttp

TIMEOUT = aiohttp.ClientTimeout(total=10)

LOOP = asyncio.new_event_loop()
_session: aiohttp.ClientSession | None = None


async def get_session() -> aiohttp.ClientSession:
    global _session
    if _session is None:
        _session = aiohttp.ClientSession(timeout=TIMEOUT)
    return _session


async def invocation(event: dict) -> dict:
    session = await get_session()
    api = event["api"]
    if event["action"] == "lookup":
        async with session.get(f"{api}/stock/{event['sku']}") as resp:
            resp.raise_for_status()
            return await resp.json()
    body = {"order": event["order"], "sku": event["sku"], "qty": event["qty"]}
    async with session.post(f"{api}/reservations", json=body) as resp:
        resp.raise_for_status()
        return await resp.json()


def handler(event: dict, context=None) -> dict:
    return LOOP.run_until_complete(invocation(event))
