"""Decoy: one loop and one session, and a GET sent before every POST so that the write gets a live connection (no retry).

After a freeze the GET meets the dead connection, and aiohttp sends it again
on a new one by itself; the POST then goes out on that live connection, so
the write after a freeze succeeds. But the freeze is not the only way a
connection dies: when it dies after the service applied the write, nothing
sends the write again, and the caller is told a reservation failed that was
made. The extra GET also costs a request per write.
"""
import asyncio

import aiohttp

LOOP = asyncio.new_event_loop()
_session = None

async def invocation(event):
    global _session
    if _session is None:
        _session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10))
    api = event["api"]
    if event["action"] == "lookup":
        async with _session.get(f"{api}/stock/{event['sku']}") as resp:
            resp.raise_for_status()
            return await resp.json()
    # a GET first: aiohttp replaces a dead pooled connection for a GET, so the POST gets a live one
    async with _session.get(f"{api}/stock/{event['sku']}") as resp:
        await resp.read()
    body = {"order": event["order"], "sku": event["sku"], "qty": event["qty"]}
    async with _session.post(f"{api}/reservations", json=body) as resp:
        resp.raise_for_status()
        return await resp.json()

def handler(event, context=None):
    return LOOP.run_until_complete(invocation(event))
