"""Decoy: one loop and one session, a write sent again once under a key made from id() of its body.

The key is made once per write, before the first attempt, and both attempts
carry it, so a retry is safe. But id() is unique only among objects alive at
the same time: once an invocation's body is freed, a later write's body can
get the same address, and its key. The service then takes a new reservation
for a retry of an old one, answers it with the old one's answer, and never
reserves its units.
"""
import asyncio

import aiohttp

TIMEOUT = aiohttp.ClientTimeout(total=10)

# One event loop for the container's whole life: the session and its pooled
# connection belong to it, so they outlive each invocation.
LOOP = asyncio.new_event_loop()
_session: aiohttp.ClientSession | None = None


async def get_session() -> aiohttp.ClientSession:
    """The container's HTTP client, made once, on LOOP."""
    global _session
    if _session is None:
        _session = aiohttp.ClientSession(timeout=TIMEOUT)
    return _session


async def lookup(session: aiohttp.ClientSession, api: str, sku: str) -> dict:
    """Units of `sku` left: a read."""
    async with session.get(f"{api}/stock/{sku}") as resp:
        resp.raise_for_status()
        return await resp.json()


async def post_json(session: aiohttp.ClientSession, url: str, body: dict, headers: dict) -> dict:
    async with session.post(url, json=body, headers=headers) as resp:
        resp.raise_for_status()
        return await resp.json()


async def reserve(session: aiohttp.ClientSession, api: str, order: str, sku: str, qty: int) -> dict:
    """Reserve `qty` units of `sku` for `order`: a write, sent at most twice under one key."""
    body = {"order": order, "sku": sku, "qty": qty}
    headers = {"Idempotency-Key": str(id(body))}
    try:
        return await post_json(session, f"{api}/reservations", body, headers)
    except aiohttp.ClientConnectionError:
        # The pooled connection was closed while the container was frozen, or it died
        # after the service applied the write: same key again, applied once either way.
        return await post_json(session, f"{api}/reservations", body, headers)


async def invocation(event: dict) -> dict:
    session = await get_session()
    if event["action"] == "lookup":
        return await lookup(session, event["api"], event["sku"])
    return await reserve(session, event["api"], event["order"], event["sku"], event["qty"])


def handler(event: dict, context=None) -> dict:
    """Entry point: one invocation, run to its end on the container's loop."""
    return LOOP.run_until_complete(invocation(event))
