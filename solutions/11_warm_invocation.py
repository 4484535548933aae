"""Stock reservations, run as a Lambda-style function.

The function sits between the shop's checkout and the stock service, an
HTTP API upstream. `handler(event)` is its entry point, called once per
invocation:

- {"action": "lookup", "api": URL, "sku": "kettle"}: how many units are left
  (`GET /stock/{sku}`), a read;
- {"action": "reserve", "api": URL, "order": "o-17", "sku": "kettle", "qty": 2}:
  reserve units for an order (`POST /reservations`), a write. The stock
  service applies a write once per `Idempotency-Key` header: the same key
  again gets the first answer back and changes nothing. A write without the
  header is applied every time it arrives.

A warm container calls `handler` again and again in the same process, and the
platform freezes the process between invocations (nothing of it runs, not
even a timer), for seconds or minutes. The stock service keeps an idle
connection open only for a few seconds, and counts on the clock while the
container is frozen.

One event loop lives as long as the container, and one session on it, so
every invocation reuses the pooled connection. A connection the service
closed during a freeze is found dead only when a request is sent on it: a
read is sent again by aiohttp itself; a write is sent again once here, under
the same Idempotency-Key, so the service applies it exactly once. So is a write
whose connection died after the service applied it, new or kept, whether the
answer never came or was cut off part-way through its body: the second attempt
gets the first answer back. An invocation whose time runs out (the context's
get_remaining_time_in_millis()) is cancelled, its write with it, and raises.
"""
import asyncio
import uuid
from datetime import timedelta

import aiohttp

TIMEOUT = aiohttp.ClientTimeout(total=10)  # pragma: no mutate (a demo constant: no lesson is about the client's timeout)

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
    headers = {"Idempotency-Key": str(uuid.uuid4())}  # made once: both attempts carry it
    try:
        return await post_json(session, f"{api}/reservations", body, headers)
    except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError):
        # The pooled connection was closed while the container was frozen, or it died after
        # the service applied the write, before its answer or part-way through its body (a
        # ClientPayloadError): same key again, applied once either way.
        return await post_json(session, f"{api}/reservations", body, headers)


async def invocation(event: dict) -> dict:
    session = await get_session()
    if event["action"] == "lookup":
        return await lookup(session, event["api"], event["sku"])
    return await reserve(session, event["api"], event["order"], event["sku"], event["qty"])


def handler(event: dict, context=None) -> dict:
    """Entry point: one invocation, run to its end on the container's loop, or cancelled (TimeoutError)
    when the time its context says it has left runs out, so that nothing of it goes on afterwards."""
    left = None if context is None else timedelta(milliseconds=context.get_remaining_time_in_millis()).total_seconds()
    return LOOP.run_until_complete(asyncio.wait_for(invocation(event), left))
