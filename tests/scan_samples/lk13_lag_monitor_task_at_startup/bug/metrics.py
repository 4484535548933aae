"""Exports the event loop's scheduling lag as a Prometheus histogram."""
import asyncio
import logging

from prometheus_client import Histogram

log = logging.getLogger(__name__)
LAG = Histogram("event_loop_lag_seconds", "how late a 0.5 s sleep came back")


async def sample_lag(every: float = 0.5) -> None:
    loop = asyncio.get_running_loop()
    while True:
        before = loop.time()
        await asyncio.sleep(every)
        lag = loop.time() - before - every
        LAG.observe(lag)
        if lag > 1.0:
            log.warning("event loop lag %.2f s", lag)


def start() -> asyncio.Task:
    return asyncio.ensure_future(sample_lag())
