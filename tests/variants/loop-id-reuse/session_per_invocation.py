"""Variant: one session per invocation, opened and closed by `async with`, passed down.

No module global at all: the session lives exactly as long as the
invocation's work, and `async with` closes it on success and on error,
while its loop still runs.
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


def handler(event: dict, context=None) -> dict:
    categories = asyncio.run(classify_receipt(event["tool_url"], event["items"]))
    return {"categories": categories}
