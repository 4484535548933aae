"""Decoy: keep comparing id(loop), and also rebuild when the session's loop is closed.

The extra check does catch the forced id collision: the old loop is closed,
so a new session is built. But the old session is simply dropped, never
closed, and by now it cannot be: its loop is closed. Every warm invocation
leaves its sockets open and aiohttp warns "Unclosed client session".
"""
import asyncio
import logging

import aiohttp

log = logging.getLogger(__name__)

TIMEOUT = aiohttp.ClientTimeout(total=10)

_session: aiohttp.ClientSession | None = None
_session_loop: asyncio.AbstractEventLoop | None = None
_session_loop_id: int | None = None


def get_session() -> aiohttp.ClientSession:
    """The shared HTTP client, rebuilt whenever the event loop changes or has closed."""
    global _session, _session_loop, _session_loop_id
    loop = asyncio.get_running_loop()
    if (
        _session is None
        or _session_loop_id != id(loop)
        or _session_loop is None
        or _session_loop.is_closed()
    ):
        _session = aiohttp.ClientSession(timeout=TIMEOUT)
        _session_loop, _session_loop_id = loop, id(loop)
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
