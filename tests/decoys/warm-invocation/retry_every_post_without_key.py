"""Decoy: one loop and one session, and every failed POST sent again, with no Idempotency-Key.

The write after a freeze now succeeds: the first attempt met a connection the
service had already closed and never reached it. But when a connection dies
after the service applied the write, the second attempt is, for the service,
a second reservation: without a key it cannot tell the two apart, and the
order reserves its units twice.
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


async def post_json(session: aiohttp.ClientSession, url: str, body: dict) -> dict:
    async with session.post(url, json=body) as resp:
        resp.raise_for_status()
        return await resp.json()


async def invocation(event: dict) -> dict:
    session = await get_session()
    api = event["api"]
    if event["action"] == "lookup":
        async with session.get(f"{api}/stock/{event['sku']}") as resp:
            resp.raise_for_status()
            return await resp.json()
    body = {"order": event["order"], "sku": event["sku"], "qty": event["qty"]}
    try:
        return await post_json(session, f"{api}/reservations", body)
    except aiohttp.ClientConnectionError:
        return await post_json(session, f"{api}/reservations", body)  # stale connection: try again


def handler(event: dict, context=None) -> dict:
    return LOOP.run_until_complete(invocation(event))
