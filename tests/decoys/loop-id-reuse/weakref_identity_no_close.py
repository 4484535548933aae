"""Decoy: the incident's first fix, loop held weakly and compared with `is`, nothing closed.

It cures the id collision: a new loop always gets a new session. But the
session of the previous invocation is dropped without being closed, so its
sockets stay open until the garbage collector finds them, and aiohttp warns
"Unclosed client session" each time.
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
    if _session is None or _session_loop is None or _session_loop() is not loop:
        _session = aiohttp.ClientSession(timeout=TIMEOUT)
        _session_loop = weakref.ref(loop)
    return _session


async def classify(tool_url: str, text: str) -> str:
    session = get_session()
    async with session.post(f"{tool_url}/classify", json={"text": text}) as resp:
        resp.raise_for_status()
        body = await resp.json()
    return body["category"]


async def classify_receipt(tool_url: str, items: list[str]) -> list[str]:
    return list(await asyncio.gather(*(classify(tool_url, item) for item in items)))


def handler(event: dict, context=None) -> dict:
    categories = asyncio.run(classify_receipt(event["tool_url"], event["items"]))
    return {"categories": categories}
