"""Upload slots, one set per event loop run: made by the entry point and passed down."""
import asyncio


async def upload(slots: asyncio.Semaphore, send, chunk: bytes):
    async with slots:
        return await send(chunk)


async def upload_all(send, chunks: list[bytes]) -> list:
    slots = asyncio.Semaphore(3)
    return list(await asyncio.gather(*(upload(slots, send, c) for c in chunks)))
