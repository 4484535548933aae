"""Variant: one asyncio.Runner for the container, closed and replaced by a new one after a failed invocation.

Good invocations share the runner's loop. A failed one may leave tasks on
it, so the runner is closed (close() cancels what is left, waits for it, and
closes the loop) and the next invocation starts on a new one. A session per
invocation (`async with`) closes its sockets whichever way it ends.
"""
import asyncio
import logging

import aiohttp

log = logging.getLogger(__name__)

TIMEOUT = aiohttp.ClientTimeout(total=10)

_runner: asyncio.Runner | None = None


async def classify(session: aiohttp.ClientSession, tool_url: str, text: str) -> str:
    async with session.post(f"{tool_url}/classify", json={"text": text}) as resp:
        resp.raise_for_status()
        body = await resp.json()
    return body["category"]


async def classify_receipt(tool_url: str, items: list[str]) -> list[str]:
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        return list(await asyncio.gather(*(classify(session, tool_url, item) for item in items)))


def handler(event: dict, context=None) -> dict:
    global _runner
    if _runner is None:
        _runner = asyncio.Runner()
    try:
        categories = _runner.run(classify_receipt(event["tool_url"], event["items"]))
    except Exception:
        failed, _runner = _runner, None
        failed.close()
        raise
    return {"categories": categories}
