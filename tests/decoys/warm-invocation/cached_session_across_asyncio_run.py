"""Decoy: asyncio.run kept for every invocation, and the session cached in a module global (retry and key as the reference).

The session is made once, on invocation 1's loop, and asyncio.run closes
that loop when the invocation returns. Invocation 2 runs on a new loop and
is handed a session (and a pooled connection) that belong to the closed
one: it fails at its first request. It is kata 02's bug: the loop must live
as long as what is kept on it.
"""
import asyncio
import uuid

import aiohttp

TIMEOUT = aiohttp.ClientTimeout(total=10)

_session: aiohttp.ClientSession | None = None


async def get_session() -> aiohttp.ClientSession:
    global _session
    if _session is None:
        _session = aiohttp.ClientSession(timeout=TIMEOUT)
    return _session


async def post_json(session: aiohttp.ClientSession, url: str, body: dict, headers: dict) -> dict:
    async with session.post(url, json=body, headers=headers) as resp:
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
    headers = {"Idempotency-Key": str(uuid.uuid4())}
    try:
        return await post_json(session, f"{api}/reservations", body, headers)
    except aiohttp.ClientConnectionError:
        return await post_json(session, f"{api}/reservations", body, headers)


def handler(event: dict, context=None) -> dict:
    return asyncio.run(invocation(event))
