"""LG04: an event loop held by one callback longer than the threshold, caught while it is held.

Each selector loop's `select()` is wrapped to count the loop's turns; one
monitor thread looks at every running loop a few times per threshold. A loop
outside `select()` whose turn has not changed since the monitor first saw it
busy, a threshold ago or more, is blocked now: its thread's stack is sampled
then, so the finding shows the line that holds the loop, not the line after.

Time the loop's thread spent waiting for a CPU does not count (Linux's
schedstat of that thread): on a busy machine a short callback can take long on
the clock without holding the loop any longer than it would on an idle one, and
the verdict must not depend on the machine's load. Time on a CPU and time
asleep in a blocking call both count.

A loop's thread asleep in a call may be waiting for another thread of the
process (`Thread.start` waits for the new thread to run its first lines, as
anyio's `to_thread` does on a library's loop); on a busy machine that thread
can wait for a CPU far longer than it then runs. So while the loop's thread is
asleep, the longest wait for a CPU of any other thread of the process during
the turn does not count either (threads started in the turn: all their waits).
A genuinely blocking call is still found, once it has held the loop for the
threshold beyond those waits.
"""
from __future__ import annotations

import math
import os
import sys
import threading
import time
import weakref

from . import sites
from .findings import Collector, Finding


class Beat:
    __slots__ = ("busy_since", "finding", "in_select", "native", "seen_busy", "seen_cpu", "seen_others",
                 "seen_turn", "seen_waited", "thread", "turn")

    def __init__(self) -> None:
        self.turn, self.in_select, self.thread, self.native = 0, True, None, None
        self.busy_since = 0.0
        self.finding = None  # the finding of the block in progress
        # the monitor's own first sight of this turn busy: when, and how long the thread had waited for a CPU
        self.seen_busy, self.seen_turn, self.seen_waited, self.seen_cpu = None, -1, 0.0, 0.0
        self.seen_others: dict[int, float] = {}  # every other thread's wait for a CPU then


def waited_for_cpu(native_id: int | None) -> float:
    """Seconds the thread has spent runnable but waiting for a CPU since it started (0 where Linux's
    schedstat cannot be read: then the clock alone decides)."""
    return _schedstat(native_id)[1]


def on_cpu(native_id: int | None) -> float:
    """Seconds the thread has run on a CPU since it started (0 where schedstat cannot be read)."""
    return _schedstat(native_id)[0]


def _schedstat(native_id: int | None) -> tuple[float, float]:
    try:
        with open(f"/proc/self/task/{native_id}/schedstat", "rb") as f:
            ran, waited = f.read().split()[:2]
        return int(ran) / 1e9, int(waited) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0, 0.0


class Threads:
    """The process's threads as the monitor last saw them: for each, its schedstat and when the monitor
    last saw it get a CPU (its counters move only when it does)."""

    def __init__(self) -> None:
        self.seen: dict[int, tuple[float, float, float]] = {}  # native id: (ran, waited, when they last moved)

    def look(self, now: float) -> None:
        try:
            ids = [int(n) for n in os.listdir("/proc/self/task")]
        except (OSError, ValueError):
            ids = []
        seen = {}
        for tid in ids:
            ran, waited = _schedstat(tid)
            before = self.seen.get(tid)
            seen[tid] = before if before is not None and before[:2] == (ran, waited) else (ran, waited, now)
        self.seen = seen

    def waits(self) -> dict[int, float]:
        return {tid: waited for tid, (_ran, waited, _moved) in self.seen.items()}

    def longest_wait_since(self, before: dict[int, float], now: float, *, besides: set) -> float:
        """The longest time any thread but `besides` waited for a CPU since `before` was read: its counted
        waits, and, if it is runnable with counters that have not moved for a look, the wait it is in
        now (at most the time since they last moved)."""
        longest = 0.0
        for tid, (ran, waited, moved) in self.seen.items():
            if tid in besides:
                continue
            wait = waited - before.get(tid, 0.0)
            if runnable(tid):
                if tid not in before and ran == 0:
                    wait = math.inf  # started in the turn and has not run yet: the loop may be waiting for it
                elif now > moved:
                    wait += now - moved
            longest = max(longest, wait)
        return longest


def runnable(native_id: int | None) -> bool:
    """Whether the thread is running or waiting for a CPU now (state R). Linux adds a wait for a CPU
    to schedstat only once it is over, so while a thread waits, the wait so far is not in it yet."""
    try:
        with open(f"/proc/self/task/{native_id}/stat", "rb") as f:
            stat = f.read()
        return stat[stat.rfind(b")") + 2:][:1] == b"R"
    except OSError:
        return False


class BlockedLoops:
    def __init__(self, collector: Collector, threshold: float, describe):
        self.collector, self.threshold, self.describe = collector, threshold, describe
        self.beats: dict[int, tuple[weakref.ref, Beat]] = {}
        self._stop = threading.Event()
        self._thread = None
        self.threads = Threads()

    def watch(self, loop, info) -> None:
        selector = getattr(loop, "_selector", None)
        if selector is None or not hasattr(selector, "select"):
            return
        beat, original = Beat(), selector.select
        finished, collector = self._finished, self.collector

        def select(timeout=None):
            if beat.thread != (ident := threading.get_ident()):
                beat.thread, beat.native = ident, threading.get_native_id()
            if beat.finding is not None:
                collector.safely(finished, beat)
            beat.in_select = True
            try:
                return original(timeout)
            finally:
                beat.in_select = False
                beat.turn += 1
                beat.busy_since = time.monotonic()

        selector.select = select
        self.beats[info.number] = (weakref.ref(loop, lambda _r, n=info.number: self.beats.pop(n, None)), beat)

    def _finished(self, beat: Beat) -> None:
        held = time.monotonic() - beat.busy_since - (waited_for_cpu(beat.native) - beat.seen_waited)
        f, beat.finding = beat.finding, None
        f.message = f.message.replace("for more than", f"for {held * 1000:.0f} ms, more than", 1)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="loopkata guard: loop monitor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(1)

    def _run(self) -> None:
        period = max(self.threshold / 4, 0.005)
        monitor = threading.get_native_id()
        while not self._stop.wait(period):
            now = time.monotonic()
            if any(not beat.in_select for _ref, beat in list(self.beats.values())):
                self.threads.look(now)  # every look while a loop is busy: a wait is seen as it grows
            for ref, beat in list(self.beats.values()):
                loop = ref()
                if loop is None or getattr(loop, "_thread_id", None) is None or beat.in_select or beat.thread is None:
                    beat.seen_turn = -1
                    continue
                if beat.seen_turn != beat.turn:  # a new turn: start counting from now, by this thread's clock
                    # The wait first, the clock after: if this monitor is itself kept off the CPU between
                    # the two, the loop's wait then is left out of the start and counted later, so held
                    # time can only come out short, never long.
                    beat.seen_turn = beat.turn
                    beat.seen_others = self.threads.waits()
                    beat.seen_cpu, beat.seen_waited = _schedstat(beat.native)
                    beat.seen_busy = time.monotonic()
                    continue
                if beat.finding is None and now - beat.seen_busy >= self.threshold and not beat.in_select \
                        and beat.seen_turn == beat.turn and self._held(beat, now, besides={beat.native, monitor}):
                    self.collector.safely(self._report, loop, beat, now)
                del loop

    def _held(self, beat: Beat, now: float, *, besides: set) -> bool:
        """Whether the loop's thread has held this turn for the threshold, by its own clock: the time
        on the clock less its waits for a CPU. A thread that is runnable now may be in a wait not yet
        counted, so then only its time on a CPU counts: short callbacks on a busy CPU never add up
        to a held loop, a long computation does. A thread asleep may be waiting for another thread,
        so then the longest wait for a CPU of any other thread in the turn does not count either."""
        ran, waited = _schedstat(beat.native)
        own = now - beat.seen_busy - (waited - beat.seen_waited)
        if own < self.threshold:
            return False
        if runnable(beat.native):
            return ran - beat.seen_cpu >= self.threshold
        return own - self.threads.longest_wait_since(beat.seen_others, now, besides=besides) >= self.threshold

    def _report(self, loop, beat: Beat, now: float) -> None:
        frame = sys._current_frames().get(beat.thread)
        stack = sites.frames_of(frame)
        del frame
        if beat.in_select or beat.seen_turn != beat.turn:
            return  # it moved on while we looked
        ours = sites.ours(stack, limit=8)
        f = Finding("LG04", f"{self.describe(loop)} was held by one callback for more than "
                            f"{self.threshold * 1000:.0f} ms; sampled while it was held, it was at {sites.show(ours[0])}"
                    if ours else f"{self.describe(loop)} was held by one callback for more than "
                                 f"{self.threshold * 1000:.0f} ms",
                    where=[sites.show(f) for f in ours[:2]],
                    details=["the code's own lines of the stack sampled while the loop was held, innermost first:"]
                    + [f"  {sites.show(f)}" for f in ours])
        beat.finding = f
        self.collector.add(f)
