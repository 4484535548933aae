"""Outbound call limits: a dataclass that makes its semaphore after init, kept in the settings class."""
import asyncio
from dataclasses import dataclass, field


@dataclass
class Throttle:
    slots: int = 4
    _sem: asyncio.Semaphore = field(init=False)

    def __post_init__(self):
        self._sem = asyncio.Semaphore(self.slots)

    async def run(self, job):
        async with self._sem:
            return await job()


class Settings:
    webhooks = Throttle(slots=8)  # expect: LK01
