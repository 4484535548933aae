"""Decoy: one loop and one session, with keep-alive switched off (TCPConnector(force_close=True)), retry and key as the reference.

No connection is ever idle, so none can be closed by the service during a
freeze, and every invocation works. But a connection is closed after every
request: the stock service sees a new TCP connection (a handshake, and TLS in
production) for every invocation, which is what keeping the loop and the
session was for. Turning keep-alive off hides the freeze by paying its
price on every call.
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
        _session = aiohttp.ClientSession(timeout=TIMEOUT, connector=aiohttp.TCPConnector(force_close=True))
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
    return LOOP.run_until_complete(invocation(event))
