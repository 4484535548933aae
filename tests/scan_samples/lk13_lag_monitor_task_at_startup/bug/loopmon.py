"""Event-loop monitor for the API: complains when the loop lags."""
import asyncio
import logging
import time

log = logging.getLogger("api.loopmon")


def install(app, limit: float = 5.0):
    @app.on_event("startup")
    async def _start():
        app.state.loopmon = asyncio.create_task(monitor(limit))


async def monitor(limit: float):
    while True:
        started = time.monotonic()
        await asyncio.sleep(1.0)  # expect: LK13
        lag = time.monotonic() - started - 1.0
        if lag > limit:
            log.error("event loop lagged %.1f s", lag)
