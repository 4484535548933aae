"""Decoy: one asyncio.Runner for the container, replaced by a new one after a failed invocation, the old one never closed.

Keeping one runner, and so one loop, for the container is fine, and a session
per invocation (`async with`) closes its sockets whichever way the invocation
ends. Starting afresh after a failure looks careful too: whatever the failed
invocation left on the loop is left behind with it. But the old runner is
dropped without close(), so its loop is never closed: it keeps its epoll
descriptor and its self-pipe (two Unix sockets), and the tasks left on it,
until the garbage collector finds it. Every 503 leaves one more loop open.
"""
import asyncio
import logging

import aiohttp

log = logging.getLogger(__name__)

TIMEOUT = aiohttp.ClientTimeout(total=10)

_runner: asyncio.Runner | None = None   # one runner, and its loop, for the life of the container


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
    global _runner
    if _runner is None:
        _runner = asyncio.Runner()
    try:
        categories = _runner.run(classify_receipt(event["tool_url"], event["items"]))
    except Exception:
        _runner = asyncio.Runner()  # start the next invocation on a clean loop
        raise
    log.info("classified %d line items", len(categories))
    return {"categories": categories}
