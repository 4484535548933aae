"""The worker's event-loop watchdog: says so when the loop was held too long."""
import asyncio
import logging
import time

log = logging.getLogger("exports.watchdog")


def start(limit: float) -> asyncio.Task:
    """Watch the running event loop; `limit`: how many seconds it may be held. Call it on the loop."""
    return asyncio.get_running_loop().create_task(_watch(limit), name="loop watchdog")


async def _watch(limit: float) -> None:
    tick = limit / 4
    while True:
        before = time.monotonic()
        await asyncio.sleep(tick)
        held = time.monotonic() - before - tick
        if held > limit:
            log.error("the event loop was held for %.1f s (limit %.1f s)", held, limit)
