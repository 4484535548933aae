"""Decoy: the reference fix's session handling, each invocation run on asyncio.new_event_loop() with run_until_complete, the loop never closed.

Every session is closed in a `finally` while its loop runs, so no socket to
the tool server stays open. But the loop itself is never closed: each one
keeps its epoll descriptor and its self-pipe (two Unix sockets) until the
garbage collector happens to find it. A warm container piles up three
descriptors per invocation between two collections.
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
    """The HTTP client of the running loop, built when a new loop asks."""
    global _session, _session_loop
    loop = asyncio.get_running_loop()
    if _session is None or _session.closed or _session_loop is None or _session_loop() is not loop:
        _session = aiohttp.ClientSession(timeout=TIMEOUT)
        _session_loop = weakref.ref(loop)
    return _session


async def close_session() -> None:
    """Close the session while its loop still runs, and forget it."""
    global _session, _session_loop
    session, _session, _session_loop = _session, None, None
    if session is not None and not session.closed:
        await session.close()


async def classify(tool_url: str, text: str) -> str:
    """Ask the tool server for one line item's category."""
    session = get_session()
    async with session.post(f"{tool_url}/classify", json={"text": text}) as resp:
        resp.raise_for_status()
        body = await resp.json()
    return body["category"]


async def classify_receipt(tool_url: str, items: list[str]) -> list[str]:
    """Classify every line item of one receipt at the same time."""
    return list(await asyncio.gather(*(classify(tool_url, item) for item in items)))


async def invocation(event: dict) -> list[str]:
    """One invocation's work; the session is closed before the invocation ends."""
    try:
        return await classify_receipt(event["tool_url"], event["items"])
    finally:
        await close_session()


def handler(event: dict, context=None) -> dict:
    """Entry point: event = {"tool_url": "http://host:port", "items": ["coffee", ...]}."""
    # a fresh loop per invocation, so nothing from an earlier one can be on it
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    categories = loop.run_until_complete(invocation(event))
    log.info("classified %d line items", len(categories))
    return {"categories": categories}
