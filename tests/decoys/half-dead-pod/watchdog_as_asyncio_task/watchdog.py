"""The worker's event-loop watchdog: ends the worker once its loop has been frozen past the limit."""
import asyncio
import logging
import os
import time

log = logging.getLogger("exports.watchdog")


def start(limit: float) -> asyncio.Task:
    """Watch the running event loop; end this process once it has been held for `limit` seconds."""
    return asyncio.get_running_loop().create_task(_watch(limit), name="loop watchdog")


async def _watch(limit: float) -> None:
    tick = limit / 4
    while True:
        before = time.monotonic()
        await asyncio.sleep(tick)
        held = time.monotonic() - before - tick
        if held > limit:
            log.critical("the event loop was held for %.1f s (limit %.1f s): exiting", held, limit)
            os._exit(70)
