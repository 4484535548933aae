"""Decoy: one loop and a kept session for reads, and a second session with keep-alive off (force_close=True) for writes (no retry).

A write never reuses a connection, so none can have died during a freeze,
and the write after a freeze succeeds. But every write opens a TCP
connection of its own, which the kept session was meant to save; and a
connection that dies after the service applied the write still fails the
invocation, because nothing sends the write again.
"""
import asyncio

import aiohttp

LOOP = asyncio.new_event_loop()
_reads = None
_writes = None

async def sessions():
    global _reads, _writes
    if _reads is None:
        _reads = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10))
        # writes never reuse a connection that may have died while the container was frozen
        _writes = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10),
                                        connector=aiohttp.TCPConnector(force_close=True))
    return _reads, _writes

async def invocation(event):
    reads, writes = await sessions()
    api = event["api"]
    if event["action"] == "lookup":
        async with reads.get(f"{api}/stock/{event['sku']}") as resp:
            resp.raise_for_status()
            return await resp.json()
    body = {"order": event["order"], "sku": event["sku"], "qty": event["qty"]}
    async with writes.post(f"{api}/reservations", json=body) as resp:
        resp.raise_for_status()
        return await resp.json()

def handler(event, context=None):
    return LOOP.run_until_complete(invocation(event))
