"""A connection pool per database for the running loop, the loop held weakly and compared with `is`."""
import asyncio
import weakref

_loop: weakref.ref | None = None
_pools: dict = {}


async def pool_for(dsn: str, connect):
    global _loop
    loop = asyncio.get_running_loop()
    if _loop is None or _loop() is not loop:
        _loop = weakref.ref(loop)
        _pools.clear()  # the pools of a finished loop go with it
    if dsn not in _pools:
        _pools[dsn] = await connect(dsn)
    return _pools[dsn]
