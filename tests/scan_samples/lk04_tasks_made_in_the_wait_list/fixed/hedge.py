"""A hedged read: ask the primary and the replica, take whichever answers first, cancel the other."""
import asyncio


async def hedged_read(primary, replica, key: str):
    tasks = [asyncio.create_task(primary(key)), asyncio.create_task(replica(key))]
    done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    return done.pop().result()
