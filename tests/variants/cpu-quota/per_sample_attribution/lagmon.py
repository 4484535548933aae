"""The loop-lag monitor: how late the event loop runs its callbacks, and why, sample by sample."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from .runtime import cpu_cgroup

INTERVAL = 0.01  # seconds between two samples
LAG_BUDGET = 0.025  # seconds: a p99 lag above this is worth a look


@dataclass(frozen=True)
class LagReport:
    seconds: float
    samples: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    cause: str
    throttled_samples: int = 0  # samples during which the cgroup's nr_throttled grew

    def __str__(self) -> str:
        return (f"lag p50 {self.p50_ms:.1f} ms, p99 {self.p99_ms:.1f} ms, max {self.max_ms:.1f} ms over "
                f"{self.samples} samples ({self.throttled_samples} in throttled periods): {self.cause}")


def _throttled(stat: Path | None) -> int | None:
    if stat is None:
        return None
    try:
        for line in stat.read_text().splitlines():
            if line.startswith("nr_throttled "):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


async def watch(seconds: float, root: Path = Path("/")) -> LagReport:
    loop = asyncio.get_running_loop()
    found = cpu_cgroup(root)
    stat = found[0] / "cpu.stat" if found else None
    lags: list[float] = []
    in_throttled: list[float] = []
    last = _throttled(stat)
    end = loop.time() + seconds
    while loop.time() < end:
        asked = loop.time()
        await asyncio.sleep(INTERVAL)
        lag = max(0.0, loop.time() - asked - INTERVAL)
        lags.append(lag)
        now = _throttled(stat)
        if now is not None and last is not None and now > last:
            in_throttled.append(lag)
        last = now
    ordered = sorted(lags) or [0.0]
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    if in_throttled:
        cause = f"throttled by the cgroup's CPU quota during {len(in_throttled)} of {len(lags)} samples"
    elif p99 > LAG_BUDGET:
        cause = "loop held by code in this process (blocking call, or a thread holding the GIL)"
    else:
        cause = "none"
    return LagReport(seconds, len(lags), ordered[len(ordered) // 2] * 1000, p99 * 1000, ordered[-1] * 1000,
                     cause, len(in_throttled))
