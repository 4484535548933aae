"""Decoy: a write sent again once on a connection error, with a new Idempotency-Key for each attempt.

Every write carries a key, and the retry rescues the write after a freeze.
But the key is made inside the attempt: when a connection dies after the
service applied the write, the second attempt carries a key the service has
never seen, so it applies the reservation a second time. A key protects a
write only if every attempt of it carries the same one.
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


async def post_json(session: aiohttp.ClientSession, url: str, body: dict) -> dict:
    headers = {"Idempotency-Key": str(uuid.uuid4())}
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
    for attempt in (1, 2):
        try:
            return await post_json(session, f"{api}/reservations", body)
        except aiohttp.ClientConnectionError:
            if attempt == 2:
                raise


def handler(event: dict, context=None) -> dict:
    return LOOP.run_until_complete(invocation(event))
