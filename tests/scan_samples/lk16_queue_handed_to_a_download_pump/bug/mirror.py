"""Mirror a large object: download it in chunks and upload them as they come."""
import asyncio

import aiohttp


async def pump(response: aiohttp.ClientResponse, chunks: asyncio.Queue) -> None:
    async for chunk in response.content.iter_chunked(1 << 20):
        await chunks.put(chunk)
    await chunks.put(b"")


async def upload(chunks: asyncio.Queue, sink) -> None:
    while chunk := await chunks.get():
        await sink.write(chunk)


async def mirror(url: str, sink, names: list[str]) -> None:
    pending = asyncio.Queue()
    for name in names:  # a handful of names known in advance
        pending.put_nowait(name)
    queue = asyncio.Queue()  # expect: LK16
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        await asyncio.gather(pump(response, queue), upload(queue, sink))
    while not pending.empty():
        await pending.get()
