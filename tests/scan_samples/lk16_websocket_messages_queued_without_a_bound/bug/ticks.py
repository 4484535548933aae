"""Market ticks from the exchange's websocket, written to the store one by one."""
import asyncio

import aiohttp


async def store(queue: asyncio.Queue, db) -> None:
    while True:
        tick = await queue.get()
        await db.insert("ticks", tick)


async def follow(url: str, db) -> None:
    ticks = asyncio.Queue()  # expect: LK16
    done = asyncio.Queue()
    writer = asyncio.create_task(store(ticks, db))
    async with aiohttp.ClientSession() as session, session.ws_connect(url) as ws:
        async for message in ws:
            ticks.put_nowait(message.json())
    done.put_nowait("closed")
    await done.get()
    writer.cancel()
