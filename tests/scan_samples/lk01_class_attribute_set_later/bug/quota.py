"""A per-tenant quota check whose lock is made on first use and kept on the class."""
import asyncio


class QuotaGate:
    _lock = None

    @classmethod
    async def _guard(cls) -> asyncio.Lock:
        if cls._lock is None:
            cls._lock = asyncio.Lock()  # expect: LK01
        return cls._lock

    @classmethod
    async def admit(cls, used: dict, tenant: str, limit: int) -> bool:
        async with await cls._guard():
            if used.get(tenant, 0) >= limit:
                return False
            used[tenant] = used.get(tenant, 0) + 1
            return True
