"""LG11: a pool sized above the CPUs this process may use (kata 15).

`os.cpu_count()` is the host's count. In a container with a CPU limit (a CFS
quota: `cpu.max` in cgroup v2, `cpu.cfs_quota_us` in v1) or with an affinity
mask, the process may use fewer: workers beyond those share the quota, and once
it is spent the kernel stops every thread of the cgroup, the event loop's too,
until the next period. The CPUs allowed are the affinity's count, lowered to the
quota (rounded up) where there is one; they are read once, when the guard starts.

A process pool is for CPU-bound work: more workers than the CPUs allowed is the
finding, whether its size was given or taken from `os.cpu_count()`. A thread pool
is mostly for waiting (files, blocking clients), and a size a team gives it is its
own judgement; the finding is the default size (`min(32, os.cpu_count() + 4)`,
the loop's own executor's too) counted from more CPUs than those allowed.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

from . import sites
from .findings import Collector, Finding
from .patches import Patches

_CGROUP = Path("/sys/fs/cgroup")


def _quota() -> float | None:
    """The cgroup's CPU quota in CPUs (2.0 for `200000 100000`), or None where there is none."""
    own = "/"
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            parts = line.split(":", 2)
            if len(parts) == 3 and (parts[0] == "0" or "cpu" in parts[1].split(",")):
                own = parts[2] or "/"
                break
    except OSError:
        pass
    for folder in (_CGROUP / own.lstrip("/"), _CGROUP):  # v2: a unified hierarchy
        try:
            quota, period = (folder / "cpu.max").read_text().split()[:2]
            return None if quota == "max" else int(quota) / int(period)
        except (OSError, ValueError):
            continue
    for base in (_CGROUP / "cpu", _CGROUP / "cpu,cpuacct"):  # v1
        for folder in (base / own.lstrip("/"), base):
            try:
                quota = int((folder / "cpu.cfs_quota_us").read_text())
                period = int((folder / "cpu.cfs_period_us").read_text())
                return None if quota <= 0 else quota / period
            except (OSError, ValueError):
                continue
    return None


def cpus_allowed() -> tuple[int, str]:
    """The CPUs this process may use, and where the count comes from."""
    try:
        n, why = len(os.sched_getaffinity(0)), "the affinity"
    except (AttributeError, OSError):
        n, why = os.cpu_count() or 1, "os.cpu_count()"
    quota = _quota()
    if quota is not None and math.ceil(quota) < n:
        n, why = max(1, math.ceil(quota)), f"the cgroup's CPU quota ({quota:g} CPUs)"
    return n, why


class Pools:
    def __init__(self, collector: Collector, patches: Patches):
        self.collector, self.patches = collector, patches
        self.allowed, self.why = 0, ""

    def install(self) -> None:
        import concurrent.futures
        import multiprocessing.pool

        self.allowed, self.why = cpus_allowed()
        host = os.cpu_count() or 1
        self.patches.replace(concurrent.futures.ThreadPoolExecutor, "__init__",
                             lambda o: self._checked(o, "a ThreadPoolExecutor", "_max_workers", "threads", host))
        self.patches.replace(concurrent.futures.ProcessPoolExecutor, "__init__",
                             lambda o: self._checked(o, "a ProcessPoolExecutor", "_max_workers", "processes", host))
        self.patches.replace(multiprocessing.pool.Pool, "__init__",
                             lambda o: self._checked(o, "a multiprocessing Pool", "_processes", "processes", host))

    def _checked(self, original, what: str, size_attr: str, unit: str, host: int):
        collector, allowed, why = self.collector, self.allowed, self.why

        def __init__(pool, *args, **kwargs):
            original(pool, *args, **kwargs)
            if size_attr in pool.__dict__:
                collector.safely(describe, pool, args, kwargs)

        def describe(pool, args, kwargs):
            import multiprocessing.pool

            size = pool.__dict__[size_attr]
            given = (args[0] if args else kwargs.get("max_workers", kwargs.get("processes"))) is not None
            threads = unit == "threads" or isinstance(pool, multiprocessing.pool.ThreadPool)
            name = "a multiprocessing ThreadPool" if isinstance(pool, multiprocessing.pool.ThreadPool) else what
            if threads:
                if given or host <= allowed or size <= min(32, allowed + 4):
                    return
                message = (f"{name} sized by default from os.cpu_count() = {host}, the host's CPUs: {size} threads, "
                           f"where this process may use {allowed} CPU{'s' if allowed != 1 else ''} ({why}); "
                           f"count the CPUs allowed (os.sched_getaffinity and the cgroup's cpu.max) and size from them")
            else:
                if size <= allowed:
                    return
                source = "given" if given else f"from os.cpu_count() = {host}"
                message = (f"{name} with {size} worker processes ({source}), where this process may use {allowed} "
                           f"CPU{'s' if allowed != 1 else ''} ({why}): the workers beyond those share the quota, and "
                           "the kernel stops them all, and the event loop, once it is spent; size the pool from the "
                           "CPUs allowed")
            collector.add(Finding("LG11", message, where=sites.made_at(3)))
        return __init__
