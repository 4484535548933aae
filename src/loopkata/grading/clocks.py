"""A stand-in for a module's `time` whose clocks move on a fixed step at each reading.

A test that checks how long a request "took", as a log line says it, cannot wait a known time on
a machine of any load; it can hand the module a clock that moves STEP seconds between two
readings, so that a request timed from two readings took exactly STEP seconds.
"""
from __future__ import annotations

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
