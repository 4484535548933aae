"""The worker's event-loop watchdog: ends the worker once its loop has been frozen past the limit.

The loop stamps a heartbeat every quarter of the limit; a thread of the worker,
which a frozen loop does not stop, reads how old the last stamp is. Past the
limit it logs and exits the process at once: uvicorn's supervisor sees a dead
worker within half a second and starts a fresh one. Nothing on the frozen loop
can help: a graceful shutdown, a signal handler's exception or an asyncio task
would all wait for the loop that is frozen.

Frozen means the loop's thread ran or slept all that time. A thread that waits
for a CPU (a busy node, a CPU limit's throttling) is not frozen, and ending its
worker only adds a restart to the load: the kernel counts how long each thread
has waited for a CPU (/proc/thread-self/schedstat), so the beats and the looks
are on the loop's own clock, which stands still while its thread waits, and no
verdict is given while the loop's thread is waiting for one right now (a wait is
counted only once it ends).
"""
import asyncio
import logging
import os
import threading
import time

log = logging.getLogger("exports.watchdog")
EXIT_STATUS = 70  # not 3: uvicorn's supervisor reads status 3 as a failed start-up and stops the whole pod
BEATS_PER_LIMIT = 4  # pragma: no mutate (any count of 2 or more keeps a loop busy under half the limit alive: 4 is a choice, not the lesson)


def cpu_of(tid: int) -> tuple[float, float, bool]:
    """Thread `tid` of this process: the seconds it has run and waited for a CPU, and whether it is runnable now
    (running, or waiting for a CPU). (0.0, 0.0, False) where the kernel does not say: every still second counts."""
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as f:
            ran, waited = (int(n) / 1e9 for n in f.read().split()[:2])
        with open(f"/proc/self/task/{tid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, ValueError, IndexError):
        return 0.0, 0.0, False
    return ran, waited, state == "R"


class Watchdog:
    def __init__(self, loop: asyncio.AbstractEventLoop, limit: float):
        self.loop, self.limit, self.tick = loop, limit, limit / BEATS_PER_LIMIT
        self.loop_thread = threading.get_native_id()  # made on the loop's thread, by start()
        self.last_beat = self.loop_clock()
        self.thread = threading.Thread(target=self._watch, name="loop watchdog", daemon=True)

    def loop_clock(self) -> float:
        """time.monotonic() less the seconds the loop's thread has waited for a CPU: stands still while it waits."""
        return time.monotonic() - cpu_of(self.loop_thread)[1]

    def _beat(self) -> None:
        self.last_beat = self.loop_clock()
        self.loop.call_later(self.tick, self._beat)

    def _watch(self) -> None:
        ran_before = None
        while not self.loop.is_closed():
            time.sleep(self.tick)
            ran, _, runnable = cpu_of(self.loop_thread)
            waiting_now = runnable and ran == ran_before  # runnable, and no CPU since the last look: it waits for one
            ran_before = ran
            frozen = self.loop_clock() - self.last_beat  # on the loop's clock: its waits for a CPU do not count
            if frozen > self.limit and not waiting_now and not self.loop.is_closed():
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
