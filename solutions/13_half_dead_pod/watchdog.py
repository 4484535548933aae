"""The worker's event-loop watchdog: ends the worker once its loop has been frozen past the limit.

The loop stamps a heartbeat every quarter of the limit; a thread of the worker,
which a frozen loop does not stop, reads how old the last stamp is. Past the
limit it logs and exits the process at once: uvicorn's supervisor sees a dead
worker within half a second and starts a fresh one. Nothing on the frozen loop
can help: a graceful shutdown, a signal handler's exception or an asyncio task
would all wait for the loop that is frozen.
"""
import asyncio
import logging
import os
import threading
import time

log = logging.getLogger("exports.watchdog")
EXIT_STATUS = 70  # not 3: uvicorn's supervisor reads status 3 as a failed start-up and stops the whole pod
BEATS_PER_LIMIT = 4  # pragma: no mutate (any count of 2 or more keeps a loop busy under half the limit alive: 4 is a choice, not the lesson)


class Watchdog:
    def __init__(self, loop: asyncio.AbstractEventLoop, limit: float):
        self.loop, self.limit, self.tick = loop, limit, limit / BEATS_PER_LIMIT
        self.last_beat = time.monotonic()
        self.thread = threading.Thread(target=self._watch, name="loop watchdog", daemon=True)

    def _beat(self) -> None:
        self.last_beat = time.monotonic()
        self.loop.call_later(self.tick, self._beat)

    def _watch(self) -> None:
        while not self.loop.is_closed():
            time.sleep(self.tick)
            frozen = time.monotonic() - self.last_beat
            if frozen > self.limit and not self.loop.is_closed():
                log.critical("event loop frozen for %.1f s (limit %.1f s): exiting so that the worker is replaced",
                             frozen, self.limit)
                logging.shutdown()
                os._exit(EXIT_STATUS)  # now, from this thread: sys.exit here would end only the thread


def start(limit: float) -> Watchdog:
    """Watch the running event loop; end this process once it has been frozen for `limit` seconds."""
    dog = Watchdog(asyncio.get_running_loop(), limit)
    dog._beat()
    dog.thread.start()
    return dog
