"""Decoy: a module-level loop, but a new session for every invocation, closed at its end (retry and key as the reference).

Every invocation is right, and a freeze cannot hurt it: no connection
outlives the invocation that opened it. That is the cost: closing the session
closes its pool, so the stock service sees a new TCP connection (a handshake,
and TLS in production) for every invocation, as with asyncio.run. The loop
was kept for nothing: the connection lives in the session.
"""
import asyncio
import uuid

import aiohttp

TIMEOUT = aiohttp.ClientTimeout(total=10)

LOOP = asyncio.new_event_loop()


async def post_json(session: aiohttp.ClientSession, url: str, body: dict, headers: dict) -> dict:
    async with session.post(url, json=body, headers=headers) as resp:
        resp.raise_for_status()
        return await resp.json()


async def invocation(event: dict) -> dict:
    api = event["api"]
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
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
