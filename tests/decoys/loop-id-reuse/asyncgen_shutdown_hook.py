"""Decoy: each session closed by an async generator that asyncio.run's clean-up finalises, every generator kept in a module list.

asyncio.run closes every unfinished async generator (loop.shutdown_asyncgens)
while its loop still runs, so each session is closed in time. But the list
that keeps the generators keeps them for good, and a generator, even a
finished one, keeps the finalizer asyncio gave it: a method of its loop. A
warm container keeps the event loop of every invocation it has served.
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
        holder = _hold_session()
        # start the generator: asyncio.run() closes every unfinished async
        # generator (loop.shutdown_asyncgens) while the loop still runs,
        # so the session gets closed at the end of every asyncio.run
        loop.create_task(holder.__anext__())
        _session = aiohttp.ClientSession(timeout=TIMEOUT)
        _session_loop_id = id(loop)
        _holders.append(holder)
    return _session


_holders: list = []


async def _hold_session():
    try:
        yield
        yield
    finally:
        if _session is not None:
            await _session.close()


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


def handler(event: dict, context=None) -> dict:
    """Entry point: event = {"tool_url": "http://host:port", "items": ["coffee", ...]}."""
    categories = asyncio.run(classify_receipt(event["tool_url"], event["items"]))
    log.info("classified %d line items", len(categories))
    return {"categories": categories}
