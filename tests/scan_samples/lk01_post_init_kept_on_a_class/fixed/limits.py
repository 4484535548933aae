"""Outbound call limits: the throttle is made by the invocation that uses it."""
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
    webhook_slots = 8


async def deliver(jobs) -> list:
    throttle = Throttle(slots=Settings.webhook_slots)
    return [await throttle.run(job) for job in jobs]
