"""Token refresh, one lock per account, kept by the refresher that one invocation makes."""
import asyncio
from collections import defaultdict


class Refresher:
    def __init__(self, fetch):
        self._fetch = fetch
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)

    async def refresh(self, account: str) -> str:
        async with self._locks[account]:
            return await self._fetch(account)


async def handle(accounts: list[str], fetch) -> list[str]:
    refresher = Refresher(fetch)
    return [await refresher.refresh(a) for a in accounts]
