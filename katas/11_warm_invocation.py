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

The runtime passes each call a `context`, whose get_remaining_time_in_millis()
says how long the invocation has left before the platform ends it.

A warm container calls `handler` again and again in the same process, and the
platform freezes the process between invocations (nothing of it runs, not
even a timer), for seconds or minutes. The stock service keeps an idle
connection open only for a few seconds, and counts on the clock while the
container is frozen.

Each invocation here is one `asyncio.run(...)` with a fresh aiohttp session:
it works, and pays for a new event loop, a new session and a new TCP
connection every time; the stock service sees one connection per invocation.

Your task: a warm container keeps one connection to the stock service across
its invocations; an invocation after a freeze longer than the service's
keep-alive timeout still succeeds; a reservation is applied exactly once,
even when the connection dies after the service applied it, and however the
connection died (closed or reset by the service, or forgotten by a load
balancer so that the write itself is reset, frozen or not); a reservation
the service applied is returned to the caller even when its connection died
before the answer or part-way through its body, on a kept connection or on
a cold start's new one; an Idempotency-Key is never used twice, in this
container or the one that replaces it; a write the service will not take
(its connection closed, a 503, nothing listening) is given up after a few
attempts of its own (a limit for each write, not for the container), and
`handler` raises; an invocation that fails leaves the container serving;
each invocation goes to the `api` its event names; an invocation still
waiting for an answer when its time runs out (what its context's
get_remaining_time_in_millis() says is left) gives the write up, and
`handler` raises; nothing of an invocation is left to run once `handler` has
returned; and nothing changes for the other clients of the process, not even
after they run asyncio.run().
Run `loopkata check warm-invocation` to grade your fix.
"""
import asyncio

import aiohttp

TIMEOUT = aiohttp.ClientTimeout(total=10)


async def lookup(session: aiohttp.ClientSession, api: str, sku: str) -> dict:
    """Units of `sku` left: a read."""
    async with session.get(f"{api}/stock/{sku}") as resp:
        resp.raise_for_status()
        return await resp.json()


async def reserve(session: aiohttp.ClientSession, api: str, order: str, sku: str, qty: int) -> dict:
    """Reserve `qty` units of `sku` for `order`: a write."""
    async with session.post(f"{api}/reservations", json={"order": order, "sku": sku, "qty": qty}) as resp:
        resp.raise_for_status()
        return await resp.json()


async def invocation(event: dict) -> dict:
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        if event["action"] == "lookup":
            return await lookup(session, event["api"], event["sku"])
        return await reserve(session, event["api"], event["order"], event["sku"], event["qty"])


def handler(event: dict, context=None) -> dict:
    """Entry point: one invocation."""
    return asyncio.run(invocation(event))
