"""Variant: httpx instead of aiohttp: one AsyncClient on a module-level loop, a write sent again once under one key.

httpx checks a pooled connection before it reuses it and drops one the
server has closed, so the write after a freeze goes out on a new connection
by itself. A connection that dies after the service applied the write still
needs the second attempt, under the same Idempotency-Key.
"""
import asyncio
import uuid

import httpx

LOOP = asyncio.new_event_loop()
_client: httpx.AsyncClient | None = None


async def get_client() -> httpx.AsyncClient:
    global _client
    if _client is None:
        _client = httpx.AsyncClient(timeout=10)
    return _client


async def invocation(event: dict) -> dict:
    client = await get_client()
    api = event["api"]
    if event["action"] == "lookup":
        resp = await client.get(f"{api}/stock/{event['sku']}")
        resp.raise_for_status()
        return resp.json()
    body = {"order": event["order"], "sku": event["sku"], "qty": event["qty"]}
    headers = {"Idempotency-Key": uuid.uuid4().hex}
    try:
        resp = await client.post(f"{api}/reservations", json=body, headers=headers)
    except httpx.TransportError:
        resp = await client.post(f"{api}/reservations", json=body, headers=headers)
    resp.raise_for_status()
    return resp.json()


def handler(event: dict, context=None) -> dict:
    return LOOP.run_until_complete(invocation(event))
