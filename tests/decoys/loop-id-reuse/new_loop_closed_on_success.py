"""Decoy: each invocation on its own asyncio.new_event_loop(), the session closed in a `finally`, but the loop closed only when the invocation succeeds.

The session is closed however the invocation ends, so no socket to the tool
server stays open. The loop is closed after run_until_complete returns, not
in a `finally`: when the tool server answers 503, the error jumps over
loop.close(), and that loop keeps its epoll descriptor and its self-pipe (two
Unix sockets) until the garbage collector finds it. Every failed invocation
leaves three descriptors behind.
"""
import asyncio
import logging

import aiohttp

log = logging.getLogger(__name__)

TIMEOUT = aiohttp.ClientTimeout(total=10)


async def classify(session: aiohttp.ClientSession, tool_url: str, text: str) -> str:
    """Ask the tool server for one line item's category."""
    async with session.post(f"{tool_url}/classify", json={"text": text}) as resp:
        resp.raise_for_status()
        body = await resp.json()
    return body["category"]


async def classify_receipt(tool_url: str, items: list[str]) -> list[str]:
    """Classify every line item of one receipt at the same time, on a session of this invocation."""
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        return list(await asyncio.gather(*(classify(session, tool_url, item) for item in items)))


def handler(event: dict, context=None) -> dict:
    """Entry point: event = {"tool_url": "http://host:port", "items": ["coffee", ...]}."""
    loop = asyncio.new_event_loop()
    categories = loop.run_until_complete(classify_receipt(event["tool_url"], event["items"]))
    loop.close()
    log.info("classified %d line items", len(categories))
    return {"categories": categories}
