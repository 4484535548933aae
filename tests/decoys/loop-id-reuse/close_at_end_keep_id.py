"""Decoy: close the session at the end of every invocation, keep the id(loop) check.

The sockets are closed now, but the cache still holds the closed session and
still trusts id(). When a new loop gets the dead loop's id, get_session()
hands out the closed session and the first request fails with
"RuntimeError: Session is closed".
"""
import asyncio
import logging

import aiohttp

log = logging.getLogger(__name__)

TIMEOUT = aiohttp.ClientTimeout(total=10)

_session: aiohttp.ClientSession | None = None
_session_loop_id: int | None = None


def get_session() -> aiohttp.ClientSession:
    global _session, _session_loop_id
    loop = asyncio.get_running_loop()
    if _session is None or _session_loop_id != id(loop):
        _session = aiohttp.ClientSession(timeout=TIMEOUT)
        _session_loop_id = id(loop)
    return _session


async def classify(tool_url: str, text: str) -> str:
    session = get_session()
    async with session.post(f"{tool_url}/classify", json={"text": text}) as resp:
        resp.raise_for_status()
        body = await resp.json()
    return body["category"]


async def invocation(event: dict) -> list[str]:
    try:
        return list(await asyncio.gather(*(classify(event["tool_url"], i) for i in event["items"])))
    finally:
        if _session is not None:
            await _session.close()


def handler(event: dict, context=None) -> dict:
    return {"categories": asyncio.run(invocation(event))}
