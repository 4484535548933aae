"""Variant: one event loop for the whole container, and one session on it.

Instead of a new loop per invocation (asyncio.run), the container keeps a
single loop and runs each invocation on it with run_until_complete. The
session never outlives its loop, so it is safe to keep: warm invocations
reuse its keep-alive connections instead of opening new ones. Since the loop
outlives every invocation, an invocation must leave no task running on it.
"""
import asyncio
import logging

import aiohttp

log = logging.getLogger(__name__)

TIMEOUT = aiohttp.ClientTimeout(total=10)

_loop: asyncio.AbstractEventLoop | None = None
_session: aiohttp.ClientSession | None = None


def container_loop() -> asyncio.AbstractEventLoop:
    global _loop
    if _loop is None or _loop.is_closed():
        _loop = asyncio.new_event_loop()
    return _loop


def get_session() -> aiohttp.ClientSession:
    """Only ever called on the container's loop, so one session is enough."""
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
    # The loop outlives the invocation, so nothing may be left running on it:
    # when one request fails, the others are cancelled and waited for.
    tasks = [asyncio.ensure_future(classify(tool_url, item)) for item in items]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def handler(event: dict, context=None) -> dict:
    loop = container_loop()
    categories = loop.run_until_complete(classify_receipt(event["tool_url"], event["items"]))
    return {"categories": categories}
