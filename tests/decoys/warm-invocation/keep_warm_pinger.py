"""Decoy: one loop and one session, retry and key as the reference, and a background task that pings the service every 0.1 s to keep the connection warm.

The ping is a task on the container's loop, and that loop runs only while an
invocation runs: between invocations the task is pending and frozen with the
process, so it keeps nothing warm. It is left on the loop when handler
returns, and runs, if ever, inside a later invocation: work of one
invocation leaking into the next.
"""
import asyncio
import uuid

import aiohttp

TIMEOUT = aiohttp.ClientTimeout(total=10)

LOOP = asyncio.new_event_loop()
_session: aiohttp.ClientSession | None = None
_pinger: asyncio.Task | None = None


async def keep_warm(session: aiohttp.ClientSession, api: str) -> None:
    while True:
        await asyncio.sleep(0.1)
        try:
            async with session.get(f"{api}/stock/kettle") as resp:
                await resp.read()
        except aiohttp.ClientError:
            pass


async def get_session(api: str) -> aiohttp.ClientSession:
    global _session, _pinger
    if _session is None:
        _session = aiohttp.ClientSession(timeout=TIMEOUT)
        _pinger = asyncio.create_task(keep_warm(_session, api))
    return _session


async def post_json(session: aiohttp.ClientSession, url: str, body: dict, headers: dict) -> dict:
    async with session.post(url, json=body, headers=headers) as resp:
        resp.raise_for_status()
        return await resp.json()


async def invocation(event: dict) -> dict:
    api = event["api"]
    session = await get_session(api)
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
