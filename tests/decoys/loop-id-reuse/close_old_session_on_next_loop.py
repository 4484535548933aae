"""Decoy: loop compared by identity, and the old session closed when the next loop asks.

Too late: by then the old session's loop is closed, and closing a transport
needs its loop. session.close() returns without an error and marks the
session closed, so aiohttp does not even warn, but its sockets stay open:
one more set of open file descriptors per warm invocation.
"""
import asyncio
import logging
import weakref

import aiohttp

log = logging.getLogger(__name__)

TIMEOUT = aiohttp.ClientTimeout(total=10)

_session: aiohttp.ClientSession | None = None
_session_loop: weakref.ref | None = None


async def get_session() -> aiohttp.ClientSession:
    global _session, _session_loop
    loop = asyncio.get_running_loop()
    if _session is None or _session_loop is None or _session_loop() is not loop:
        old, _session = _session, aiohttp.ClientSession(timeout=TIMEOUT)
        _session_loop = weakref.ref(loop)
        if old is not None and not old.closed:
            await old.close()
    return _session


async def classify(tool_url: str, text: str) -> str:
    session = await get_session()
    async with session.post(f"{tool_url}/classify", json={"text": text}) as resp:
        resp.raise_for_status()
        body = await resp.json()
    return body["category"]


async def classify_receipt(tool_url: str, items: list[str]) -> list[str]:
    return list(await asyncio.gather(*(classify(tool_url, item) for item in items)))


def handler(event: dict, context=None) -> dict:
    categories = asyncio.run(classify_receipt(event["tool_url"], event["items"]))
    return {"categories": categories}
