"""Kafka consumers, one per CPU the process may run on."""
import asyncio
import os


def available_cpus() -> int:
    """The CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))  # expect: LK15
    return os.cpu_count() or 1  # expect: LK15


class Consumers:
    def __init__(self, topic: str):
        self.topic = topic
        self.consumer_count = available_cpus()
        self.max_workers = self.consumer_count

    async def run(self, handle) -> None:
        await asyncio.gather(*(handle(self.topic, n) for n in range(self.max_workers)))
