"""How long code was kept waiting for a CPU: what a check's deadlines allow a busy machine.

A check's deadlines are wall-clock times. On a machine whose CPUs are taken by other work,
the code under test runs late through no fault of its own, and a right fix could run out of
time. Linux counts, for every thread, the time it spent ready to run but waiting for a CPU
(the second field of /proc/<pid>/task/<tid>/schedstat). The grader pushes its deadlines back
by that time, so a verdict depends on what the code did, not on how busy the machine was:

- a deadlocked thread sleeps and waits for no CPU, so a hang is seen as soon as on a quiet
  machine;
- code that wants a CPU and cannot have one is given the time it lost.

For each interval the waits of all the threads are added up, never to more than the interval.
Python threads mostly wait in turn, not side by side: one holds the GIL while another, woken to
take it, waits for a CPU, and each one's wait is time the process lost (taking the most any one
thread waited would miss half of it, and a right fix on a loaded machine would time out). Where
they do wait side by side, the interval bounds what is counted: never more than the clock.
No deadline grows past stretch_cap() times its length (6, or LOOPKATA_STRETCH_CAP): something must
end a check that spins.

Standard library only: supervise.py runs alone (`python -I -S`) and loads this file beside it.
"""
from __future__ import annotations

import os
import time

STRETCH_CAP = 6.0  # a deadline grows to at most this many times its length (a load of 12 on 2 CPUs)
SCHEDSTAT = "/proc/{pid}/task/{tid}/schedstat"


def stretch_cap() -> float:
    """How many times its length a deadline may grow: STRETCH_CAP, or LOOPKATA_STRETCH_CAP where a
    facilitator's machine is busier than that (a number of 1 or more; anything else is ignored)."""
    try:
        cap = float(os.environ.get("LOOPKATA_STRETCH_CAP") or STRETCH_CAP)
    except ValueError:
        return STRETCH_CAP
    return cap if 1.0 <= cap < float("inf") else STRETCH_CAP


def waits(pids) -> dict[int, float]:
    """thread id -> seconds it has waited for a CPU, for every thread of `pids` that can be read."""
    found = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(SCHEDSTAT.format(pid=pid, tid=tid), "rb") as f:
                    found[int(tid)] = int(f.read().split()[1]) / 1e9
            except (OSError, ValueError, IndexError):
                continue  # the thread ended, or this kernel keeps no schedstat: nothing is allowed
    return found


class CpuWait:
    """The wall-clock seconds lost waiting for a CPU, since it was made, by the threads of the
    processes it is shown at each look."""

    def __init__(self, pids) -> None:
        self._last = waits(pids)
        self._at = time.monotonic()
        self.seconds = 0.0

    def update(self, pids) -> float:
        """Look again at the threads of `pids`; the seconds lost so far."""
        now = time.monotonic()
        current = waits(pids)
        # A thread seen for the first time waited all of its wait since the last look.
        grew = sum(max(0.0, w - self._last.get(tid, 0.0)) for tid, w in current.items())
        self.seconds += max(0.0, min(grew, now - self._at))
        self._last, self._at = current, now
        return self.seconds


class Deadline:
    """A deadline `seconds` from now, moved back by the time the threads of this process wait for
    a CPU meanwhile (up to stretch_cap() times `seconds` in all): for a test that waits for something
    its own process makes happen (a server on a thread, a scenario), on a machine of any load."""

    LOOK_EVERY = 0.1  # seconds between two reads of the threads' wait

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.started = self._looked = time.monotonic()
        self._cpu = CpuWait([os.getpid()])
        self._most = seconds * (stretch_cap() - 1)
        self.allowed = 0.0

    def left(self) -> float:
        """Seconds left (0 or less once it has passed)."""
        now = time.monotonic()
        if now - self._looked >= self.LOOK_EVERY:
            self._looked = now
            self.allowed = min(self._cpu.update([os.getpid()]), self._most)
        return self.started + self.seconds + self.allowed - now

    def passed(self) -> bool:
        return self.left() <= 0
