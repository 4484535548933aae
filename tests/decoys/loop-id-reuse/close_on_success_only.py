"""Decoy: loop compared by identity, session closed at the end of the invocation, but not in a finally.

Every good invocation cleans up after itself. An invocation that fails (the
tool answers 503) jumps over the close: that session is dropped unclosed,
with its sockets still open, and the next loop builds a new one.
"""
import asyncio
import logging
import weakref

import aiohttp

log = logging.getLogger(__name__)

TIMEOUT = aiohttp.ClientTimeout(total=10)

_session: aiohttp.ClientSession | None = None
_session_loop: weakref.ref | None = None


def get_session() -> aiohttp.ClientSession:
    global _session, _session_loop
    loop = asyncio.get_running_loop()
    if _session is None or _session.closed or _session_loop is None or _session_loop() is not loop:
        _session = aiohttp.ClientSession(timeout=TIMEOUT)
        _session_loop = weakref.ref(loop)
    return _session


async def classify(tool_url: str, text: str) -> str:
    session = get_session()
    async with session.post(f"{tool_url}/classify", json={"text": text}) as resp:
        resp.raise_for_status()
        body = await resp.json()
    return body["category"]


async def invocation(event: dict) -> list[str]:
    global _session
    categories = list(await asyncio.gather(*(classify(event["tool_url"], i) for i in event["items"])))
    if _session is not None:
        await _session.close()
        _session = None
    return categories


def handler(event: dict, context=None) -> dict:
    return {"categories": asyncio.run(invocation(event))}
