"""Each batch is one asyncio.run, with a session of its own, closed before its loop ends."""
import asyncio

import aiohttp


async def push(url: str, rows: list) -> int:
    async with aiohttp.ClientSession() as session:
        async with session.post(url, json=rows) as response:
            return response.status


def run(url: str, batches: list[list]) -> list[int]:
    return [asyncio.run(push(url, rows)) for rows in batches]
