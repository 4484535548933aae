"""The loop-lag monitor: how late the event loop runs its callbacks, and why."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from .runtime import cpu_cgroup

INTERVAL = 0.01  # seconds between two samples  # pragma: no mutate (a tuning constant)
LAG_BUDGET = 0.025  # seconds: a p99 lag above this is worth a look  # pragma: no mutate (a tuning constant)


@dataclass(frozen=True)
class LagReport:
    seconds: float  # how long it watched
    samples: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    cause: str  # in a few words, why the loop was late: "none" when it kept to its budget and was not throttled
    periods: int = 0  # CFS periods that went by (cpu.stat's nr_periods), 0 without a quota
    throttled_periods: int = 0  # of which the quota ran out (nr_throttled)
    throttled_ms: float = 0.0  # how long the cgroup's threads were stopped for it

    def __str__(self) -> str:
        return (f"loop lag over {self.seconds:.1f} s ({self.samples} samples): p50 {self.p50_ms:.1f} ms, "
                f"p99 {self.p99_ms:.1f} ms, max {self.max_ms:.1f} ms; throttled in {self.throttled_periods} of "
                f"{self.periods} periods ({self.throttled_ms:.0f} ms); cause: {self.cause}")


def cpu_stat(root: Path = Path("/")) -> dict[str, int]:
    """This process's own cgroup's CPU counters (cpu.stat), throttled time in microseconds; {} if unreadable."""
    found = cpu_cgroup(root)
    if found is None:
        return {}
    counters = {}
    try:
        for line in (found[0] / "cpu.stat").read_text().splitlines():
            name, _, value = line.partition(" ")
            if value.strip().isdigit():
                counters[name] = int(value)
    except OSError:
        return {}
    if "throttled_time" in counters:  # cgroup v1 counts nanoseconds, v2 microseconds (throttled_usec)
        counters.setdefault("throttled_usec", counters["throttled_time"] // 1000)
    return counters


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


async def watch(seconds: float, root: Path = Path("/")) -> LagReport:
    """Sample the loop's lag for `seconds`; the cause is throttling whenever nr_throttled grew meanwhile, lag or not."""
    loop = asyncio.get_running_loop()
    lags: list[float] = []
    before = cpu_stat(root)
    end = loop.time() + seconds
    while loop.time() < end:
        asked = loop.time()
        await asyncio.sleep(INTERVAL)
        lags.append(max(0.0, loop.time() - asked - INTERVAL))
    after = cpu_stat(root)
    grew = {k: after.get(k, 0) - before.get(k, 0) for k in ("nr_periods", "nr_throttled", "throttled_usec")}
    p99 = _percentile(lags, 0.99)
    if grew["nr_throttled"] > 0:
        cause = (f"CPU throttling: the cgroup used up its CPU quota in {grew['nr_throttled']} of "
                 f"{grew['nr_periods']} periods, and the kernel stopped every thread until the next one")
    elif p99 > LAG_BUDGET:
        cause = ("the event loop was held by this process: a blocking call on the loop, or another thread "
                 "holding the GIL (the cgroup's quota stopped nothing)")
    else:
        cause = "none"
    return LagReport(seconds=seconds, samples=len(lags), p50_ms=_percentile(lags, 0.5) * 1000,
                     p99_ms=p99 * 1000, max_ms=max(lags, default=0.0) * 1000, cause=cause,
                     periods=grew["nr_periods"], throttled_periods=grew["nr_throttled"],
                     throttled_ms=grew["throttled_usec"] / 1000)
