"""Variant: each invocation on its own asyncio.new_event_loop(), closed in a `finally` as asyncio.run would.

The session belongs to the invocation (`async with`), so it is closed while
its loop runs, and the loop is closed however the invocation ends: what is
left on it is cancelled and waited for first, then its async generators and
its default executor are shut down.
"""
import asyncio
import logging

import aiohttp

log = logging.getLogger(__name__)

TIMEOUT = aiohttp.ClientTimeout(total=10)


async def classify(session: aiohttp.ClientSession, tool_url: str, text: str) -> str:
    async with session.post(f"{tool_url}/classify", json={"text": text}) as resp:
        resp.raise_for_status()
        body = await resp.json()
    return body["category"]


async def classify_receipt(tool_url: str, items: list[str]) -> list[str]:
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        return list(await asyncio.gather(*(classify(session, tool_url, item) for item in items)))


async def cancel_the_rest() -> None:
    """Cancel every other task still on the running loop, and wait for them."""
    left = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in left:
        task.cancel()
    await asyncio.gather(*left, return_exceptions=True)


def handler(event: dict, context=None) -> dict:
    loop = asyncio.new_event_loop()
    try:
        categories = loop.run_until_complete(classify_receipt(event["tool_url"], event["items"]))
    finally:
        try:
            loop.run_until_complete(cancel_the_rest())
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            loop.close()
    return {"categories": categories}
