"""Kills the worker when its event loop stops answering, so that systemd restarts it."""
import asyncio
import logging
import sys
import threading
import time
from threading import Thread

log = logging.getLogger(__name__)


def watch(loop: asyncio.AbstractEventLoop, limit: float) -> None:
    while True:
        answered = threading.Event()
        loop.call_soon_threadsafe(answered.set)
        if not answered.wait(limit):
            log.critical("event loop stuck for %.0f s", limit)
            sys.exit(1)  # expect: LK13
        time.sleep(limit)


def guard(loop: asyncio.AbstractEventLoop, limit: float = 30.0) -> Thread:
    thread = Thread(target=watch, args=(loop, limit), daemon=True)
    thread.start()
    return thread


class Pinger:
    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            time.sleep(5)
            if self.loop.is_closed():
                raise SystemExit("loop closed")  # expect: LK13
