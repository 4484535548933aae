"""Decoy: no cache at all, a new ClientSession for every request, never closed.

No session can outlive its loop's usefulness, so nothing fails with "Event
loop is closed". But nothing closes the sessions either: each request leaves
a session and its socket behind, and aiohttp warns "Unclosed client session"
when each one is dropped.
"""
import asyncio
import logging

import aiohttp

log = logging.getLogger(__name__)

TIMEOUT = aiohttp.ClientTimeout(total=10)


async def classify(tool_url: str, text: str) -> str:
    session = aiohttp.ClientSession(timeout=TIMEOUT)
    async with session.post(f"{tool_url}/classify", json={"text": text}) as resp:
        resp.raise_for_status()
        body = await resp.json()
    return body["category"]


async def classify_receipt(tool_url: str, items: list[str]) -> list[str]:
    return list(await asyncio.gather(*(classify(tool_url, item) for item in items)))


def handler(event: dict, context=None) -> dict:
    categories = asyncio.run(classify_receipt(event["tool_url"], event["items"]))
    return {"categories": categories}
