"""The worker's event-loop watchdog: a thread asks the loop to answer, and gives it the whole limit."""
import asyncio
import logging
import os
import threading
import time

log = logging.getLogger("exports.watchdog")


def start(limit: float) -> threading.Thread:
    """Watch the running event loop from a thread; end this process once the loop stays silent for `limit` s."""
    loop = asyncio.get_running_loop()

    def watch() -> None:
        while True:
            answered = threading.Event()
            try:
                loop.call_soon_threadsafe(answered.set)
            except RuntimeError:
                return  # the loop has closed: the worker is shutting down
            if not answered.wait(limit):
                log.critical("event loop silent for %.1f s: exiting so that the worker is replaced", limit)
                os._exit(1)
            time.sleep(limit / 4)

    thread = threading.Thread(target=watch, name="loop watchdog", daemon=True)
    thread.start()
    return thread
