"""The loop-lag monitor: how late the event loop runs its callbacks, and why."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

INTERVAL = 0.01  # seconds between two samples
LAG_BUDGET = 0.025  # seconds: a p99 lag above this is worth a look


@dataclass(frozen=True)
class LagReport:
    seconds: float  # how long it watched
    samples: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    cause: str  # in a few words, why the loop was late: "none" when it kept to its budget and was not throttled

    def __str__(self) -> str:
        return (f"loop lag over {self.seconds:.1f} s ({self.samples} samples): p50 {self.p50_ms:.1f} ms, "
                f"p99 {self.p99_ms:.1f} ms, max {self.max_ms:.1f} ms; cause: {self.cause}")


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


async def watch(seconds: float, root: Path = Path("/")) -> LagReport:
    """Sample the running loop's lag for `seconds`: ask to wake after INTERVAL, see how much later it woke."""
    loop = asyncio.get_running_loop()
    lags: list[float] = []
    end = loop.time() + seconds
    while loop.time() < end:
        before = loop.time()
        await asyncio.sleep(INTERVAL)
        lags.append(max(0.0, loop.time() - before - INTERVAL))
    p99 = _percentile(lags, 0.99)
    cause = "none" if p99 <= LAG_BUDGET else "the event loop was blocked: look for a blocking call on the loop"
    return LagReport(seconds=seconds, samples=len(lags), p50_ms=_percentile(lags, 0.5) * 1000,
                     p99_ms=p99 * 1000, max_ms=max(lags, default=0.0) * 1000, cause=cause)
