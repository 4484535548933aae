"""Decoy: one event loop for the whole container (run_until_complete) and its session checked by identity, nothing cancelled when a request fails.

The loop outlives every invocation, so the session never belongs to a dead
loop and its connections are reused. But when one line item's request fails,
gather raises at once and handler returns while the invocation's other
requests are still pending on that loop: nothing cancels them or waits for
them. They stay open, waiting for their answers, and run on during whichever
invocation runs the loop next.
"""
import asyncio
import logging

import aiohttp

log = logging.getLogger(__name__)

TIMEOUT = aiohttp.ClientTimeout(total=10)

_session: aiohttp.ClientSession | None = None
_session_loop_id: int | None = None


def get_session() -> aiohttp.ClientSession:
    """The shared HTTP client, rebuilt whenever the event loop changes."""
    global _session, _session_loop_id
    loop = asyncio.get_running_loop()
    if _session is None or _session.closed or _session._loop is not loop:
        _session = aiohttp.ClientSession(timeout=TIMEOUT)
        _session_loop_id = id(loop)
    return _session


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


_loop: asyncio.AbstractEventLoop | None = None   # one loop for the life of the container


def handler(event: dict, context=None) -> dict:
    """Entry point: event = {"tool_url": "http://host:port", "items": ["coffee", ...]}."""
    global _loop
    if _loop is None or _loop.is_closed():
        _loop = asyncio.new_event_loop()
    categories = _loop.run_until_complete(classify_receipt(event["tool_url"], event["items"]))
    log.info("classified %d line items", len(categories))
    return {"categories": categories}
