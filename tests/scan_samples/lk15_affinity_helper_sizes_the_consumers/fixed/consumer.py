"""Kafka consumers, one per CPU the process may use."""
import asyncio
import math
import os
from pathlib import Path


def available_cpus() -> int:
    """The CPUs this process may use: its affinity, capped by its cgroup's CPU quota (cpu.max)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        return cpus
    return cpus if quota == "max" else max(1, min(cpus, math.ceil(int(quota) / int(period))))


class Consumers:
    def __init__(self, topic: str):
        self.topic = topic
        self.consumer_count = available_cpus()
        self.max_workers = self.consumer_count

    async def run(self, handle) -> None:
        await asyncio.gather(*(handle(self.topic, n) for n in range(self.max_workers)))
