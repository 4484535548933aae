"""A connection pool per database and per event loop, found again by a key."""
import asyncio

_pools: dict = {}


async def pool_for(dsn: str, connect):
    key = (id(asyncio.get_running_loop()), dsn)  # expect: LK02
    if key not in _pools:
        _pools[key] = await connect(dsn)
    return _pools[key]
