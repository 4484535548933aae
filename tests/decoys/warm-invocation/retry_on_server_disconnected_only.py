"""Decoy: one loop and one session, a write sent again once under the same key, but only on ServerDisconnectedError.

That is the error a connection that dies on the way back raises, and there
the retry works: the service answers the second attempt from its key. A
connection the service closed while the container was frozen fails with
ServerDisconnectedError too on Python 3.12 and later, but on 3.11 aiohttp
finds it closed while it writes the request and raises ClientOSError ("Can
not write request body"); and a connection reset while the container was
frozen, as a load balancer drops an idle flow, raises ClientOSError
("Connection reset by peer") on every Python. This retry lets both through.
All of them are aiohttp.ClientConnectionError, the family to catch.
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
    except aiohttp.ServerDisconnectedError:
        return await post_json(session, f"{api}/reservations", body, headers)


def handler(event: dict, context=None) -> dict:
    return LOOP.run_until_complete(invocation(event))
