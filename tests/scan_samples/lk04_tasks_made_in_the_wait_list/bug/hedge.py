"""A hedged read: ask the primary and the replica, take whichever answers first."""
import asyncio


async def hedged_read(primary, replica, key: str):
    done, _ = await asyncio.wait(  # expect: LK04
        [asyncio.create_task(primary(key)), asyncio.create_task(replica(key))],
        return_when=asyncio.FIRST_COMPLETED,
    )
    return done.pop().result()
