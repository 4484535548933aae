"""Each batch is one asyncio.run."""
import asyncio

from .http import session


async def push(url: str, rows: list) -> int:
    async with session().post(url, json=rows) as response:
        return response.status


def run(url: str, batches: list[list]) -> list[int]:
    return [asyncio.run(push(url, rows)) for rows in batches]
