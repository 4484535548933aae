"""Clocks a hidden test controls, so that a verdict about time never depends on the machine's load.

- SteppingClock stands in for a module's `time`: its clocks move a fixed step at each reading,
  so a request timed from two readings took exactly that step, as its log line must say.
- VirtualClockLoop is an event loop whose clock jumps to its next timer at once (and, if asked,
  wakes a given amount late): a 15-minute deadline takes a moment, and which timer comes first
  is decided by the arithmetic alone.
"""
from __future__ import annotations

import asyncio
import contextlib
import selectors
import time

CLOCKS = ("perf_counter", "monotonic")  # the clocks a duration is measured with (and their _ns forms)


class SteppingClock:
    """`time`, but each reading of one of `clocks` (and its _ns form) is STEP seconds after the last;
    every other name is time's own."""

    STEP = 1.5

    def __init__(self, clocks: tuple[str, ...] = CLOCKS, start: float = 1000.0) -> None:
        self._stepped = set(clocks) | {f"{name}_ns" for name in clocks}
        self._start = start
        self._readings = 0

    def _next(self) -> float:
        self._readings += 1
        return self._start + self.STEP * self._readings

    def __getattr__(self, name):
        if name in self._stepped:
            return (lambda: round(self._next() * 1e9)) if name.endswith("_ns") else self._next
        return getattr(time, name)


class JumpsToTheNextTimer(selectors.DefaultSelector):
    """A selector whose clock jumps: when the loop has nothing ready and would sleep until its next
    timer, the clock moves on by that sleep at once (and by the next of `late` more, so that the loop
    wakes exactly that much late). A 15-minute wait takes a moment, and which timer comes first is
    decided by the arithmetic alone, never by how busy the machine is. `at_jump`: {n: f} calls f()
    as the n-th jump is made (the kernel counting a throttled period, say)."""

    def __init__(self, late=(), at_jump: dict | None = None) -> None:
        super().__init__()
        self.now, self.late, self.at_jump, self.jumps = 0.0, list(late), dict(at_jump or {}), 0

    def select(self, timeout=None):
        ready = super().select(0)
        if not ready and timeout:
            self.jumps += 1
            if self.jumps in self.at_jump:
                self.at_jump.pop(self.jumps)()
            self.now += timeout + (self.late.pop(0) if self.late else 0.0)
        elif not ready and timeout is None:  # no timer at all: wait for I/O, as a real loop does
            ready = super().select(None)
        return ready


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose time is a JumpsToTheNextTimer's clock."""

    def __init__(self, late=(), at_jump: dict | None = None) -> None:
        self._clock = JumpsToTheNextTimer(late, at_jump)
        super().__init__(self._clock)

    def time(self) -> float:
        return self._clock.now


@contextlib.contextmanager
def on_a_virtual_clock():
    """Every event loop asyncio.run makes meanwhile is a VirtualClockLoop."""

    class Policy(asyncio.DefaultEventLoopPolicy):
        def new_event_loop(self):
            return VirtualClockLoop()

    before = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(Policy())
    try:
        yield
    finally:
        asyncio.set_event_loop_policy(before)
