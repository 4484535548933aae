"""Token refresh, one lock per account so that two requests never refresh the same token twice."""
import asyncio
from collections import defaultdict

_refreshing: dict[str, asyncio.Lock] = {}
_writers = defaultdict(asyncio.Lock)  # expect: LK01


async def refresh(account: str, fetch) -> str:
    if account not in _refreshing:
        _refreshing[account] = asyncio.Lock()  # expect: LK01
    async with _refreshing[account]:
        return await fetch(account)


async def write(account: str, store, value) -> None:
    async with _writers[account]:
        await store(account, value)
