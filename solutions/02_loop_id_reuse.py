"""Receipt line-item classifier, run as a Lambda-style function.

The line items of one receipt ("coffee", "taxi", ...) are sent to a tool
server at the same time, one `POST /classify` each. The HTTP client, an
aiohttp `ClientSession`, is kept in a module global so every call of one
invocation shares one connection pool.

`handler(event)` is the function entry point. Each call runs one
`asyncio.run(...)`: one invocation, on a new event loop. A warm container
calls it again and again in the same process, so module globals outlive
every event loop.
"""
import asyncio
import logging
import weakref

import aiohttp

log = logging.getLogger(__name__)

TIMEOUT = aiohttp.ClientTimeout(total=10)  # pragma: no mutate (a demo constant: no lesson is about the client's timeout)

# The session and the loop it belongs to. The loop is held weakly (the cache
# must not keep a dead loop alive) and compared with `is`: id() is unique only
# among objects alive at the same time, so a new loop can get a dead loop's id.
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
    """Close the session while its loop still runs, and forget it.

    A session whose loop has ended can no longer be closed: its sockets would
    stay open until the garbage collector found it. So this runs inside the
    invocation, never from the next one.
    """
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
    """One invocation's work; the session is closed before asyncio.run ends the loop."""
    try:
        return await classify_receipt(event["tool_url"], event["items"])
    finally:
        await close_session()


def handler(event: dict, context=None) -> dict:
    """Entry point: event = {"tool_url": "http://host:port", "items": ["coffee", ...]}."""
    categories = asyncio.run(invocation(event))
    log.info("classified %d line items", len(categories))
    return {"categories": categories}
