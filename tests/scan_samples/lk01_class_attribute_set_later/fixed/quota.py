"""A per-tenant quota check whose lock belongs to the gate, made on the loop that runs it."""
import asyncio


class QuotaGate:
    def __init__(self, limit: int):
        self.limit = limit
        self.used: dict[str, int] = {}
        self._lock = asyncio.Lock()

    async def admit(self, tenant: str) -> bool:
        async with self._lock:
            if self.used.get(tenant, 0) >= self.limit:
                return False
            self.used[tenant] = self.used.get(tenant, 0) + 1
            return True


async def handle(tenants: list[str], limit: int) -> list[bool]:
    gate = QuotaGate(limit)  # one gate per invocation, on this invocation's loop
    return [await gate.admit(t) for t in tenants]
