"""Variant: one asyncio.Runner for the whole container, never closed, and one session on its loop.

The runner's loop outlives every invocation, so the session on it never
belongs to a dead loop, and warm invocations reuse its keep-alive
connections. Neither is ever closed: the container keeps them until it is
shut down, one loop and one session however many invocations it serves.
Since the loop outlives the invocation, an invocation must leave no task
running on it.
"""
import asyncio
import logging

import aiohttp

log = logging.getLogger(__name__)

TIMEOUT = aiohttp.ClientTimeout(total=10)

_runner: asyncio.Runner | None = None        # one runner, and its loop, for the life of the container
_session: aiohttp.ClientSession | None = None


def get_session() -> aiohttp.ClientSession:
    """Only ever called on the runner's loop, so one session is enough."""
    global _session
    if _session is None or _session.closed:
        _session = aiohttp.ClientSession(timeout=TIMEOUT)
    return _session


async def classify(tool_url: str, text: str) -> str:
    session = get_session()
    async with session.post(f"{tool_url}/classify", json={"text": text}) as resp:
        resp.raise_for_status()
        body = await resp.json()
    return body["category"]


async def classify_receipt(tool_url: str, items: list[str]) -> list[str]:
    # The loop outlives the invocation: when one request fails, the others are
    # cancelled and waited for before the error goes up.
    tasks = [asyncio.ensure_future(classify(tool_url, item)) for item in items]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def handler(event: dict, context=None) -> dict:
    global _runner
    if _runner is None:
        _runner = asyncio.Runner()
    categories = _runner.run(classify_receipt(event["tool_url"], event["items"]))
    return {"categories": categories}
