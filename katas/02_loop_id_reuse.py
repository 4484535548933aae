"""Receipt line-item classifier, run as a Lambda-style function.

The line items of one receipt ("coffee", "taxi", ...) are sent to a tool
server at the same time, one `POST /classify` each. The HTTP client, an
aiohttp `ClientSession`, is kept in a module global so every call shares one
connection pool. A session belongs to the event loop it was created on, so
`get_session()` rebuilds it "whenever the event loop changes".

`handler(event)` is the function entry point. Each call runs one
`asyncio.run(...)`: one invocation, on a new event loop. A warm container
calls it again and again in the same process, so module globals outlive
every event loop.

Your task: every invocation, cold or warm, must get its answers from the tool
server, even when a new loop is handed the id() of a dead one, and a warm
container must not pile up sessions or open sockets from earlier invocations.
Run `loopkata check loop-id-reuse` to grade your fix.
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
    if _session is None or _session_loop_id != id(loop):
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


def handler(event: dict, context=None) -> dict:
    """Entry point: event = {"tool_url": "http://host:port", "items": ["coffee", ...]}."""
    categories = asyncio.run(classify_receipt(event["tool_url"], event["items"]))
    log.info("classified %d line items", len(categories))
    return {"categories": categories}
