"""Upload slots shared by every request of the process."""
import asyncio
from functools import lru_cache


@lru_cache(maxsize=None)
def upload_slots() -> asyncio.Semaphore:
    return asyncio.Semaphore(3)  # expect: LK01


async def upload(send, chunk: bytes):
    async with upload_slots():
        return await send(chunk)
