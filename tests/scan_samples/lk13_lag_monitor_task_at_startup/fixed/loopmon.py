"""Event-loop monitor for the API: complains when the loop lags."""
import asyncio
import logging
import os
import threading
import time

log = logging.getLogger("api.loopmon")


def install(app, limit: float = 5.0):
    @app.on_event("startup")
    async def _start():
        loop = asyncio.get_running_loop()
        beat = {"at": time.monotonic()}

        def stamp():
            beat["at"] = time.monotonic()
            loop.call_later(limit / 4, stamp)

        def watch():
            while not loop.is_closed():
                time.sleep(limit / 4)
                if time.monotonic() - beat["at"] > limit:
                    log.critical("event loop frozen for more than %.1f s: exiting", limit)
                    os._exit(70)

        stamp()
        threading.Thread(target=watch, name="loop watchdog", daemon=True).start()
