"""LG04: an event loop held by one callback longer than the threshold, caught while it is held.

Each selector loop's `select()` is wrapped to count the loop's turns; one
monitor thread looks at every running loop a few times per threshold. A loop
outside `select()` whose turn has not changed since the monitor first saw it
busy, a threshold ago or more, is blocked now: its thread's stack is sampled
then, so the finding shows the line that holds the loop, not the line after.
"""
from __future__ import annotations

import sys
import threading
import time
import weakref

from . import sites
from .findings import Collector, Finding


class Beat:
    __slots__ = ("busy_since", "finding", "in_select", "seen_busy", "seen_turn", "thread", "turn")

    def __init__(self) -> None:
        self.turn, self.in_select, self.thread = 0, True, None
        self.busy_since = 0.0
        self.finding = None  # the finding of the block in progress
        self.seen_busy, self.seen_turn = None, -1  # the monitor's own first sight of this turn busy


class BlockedLoops:
    def __init__(self, collector: Collector, threshold: float, describe):
        self.collector, self.threshold, self.describe = collector, threshold, describe
        self.beats: dict[int, tuple[weakref.ref, Beat]] = {}
        self._stop = threading.Event()
        self._thread = None

    def watch(self, loop, info) -> None:
        selector = getattr(loop, "_selector", None)
        if selector is None or not hasattr(selector, "select"):
            return
        beat, original = Beat(), selector.select
        finished, collector = self._finished, self.collector

        def select(timeout=None):
            beat.thread = threading.get_ident()
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
        held = time.monotonic() - beat.busy_since
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
        while not self._stop.wait(period):
            now = time.monotonic()
            for ref, beat in list(self.beats.values()):
                loop = ref()
                if loop is None or getattr(loop, "_thread_id", None) is None or beat.in_select or beat.thread is None:
                    beat.seen_turn = -1
                    continue
                if beat.seen_turn != beat.turn:  # a new turn: start counting from now, by this thread's clock
                    beat.seen_turn, beat.seen_busy = beat.turn, now
                    continue
                if beat.finding is None and now - beat.seen_busy >= self.threshold and not beat.in_select \
                        and beat.seen_turn == beat.turn:
                    self.collector.safely(self._report, loop, beat, now)
                del loop

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
