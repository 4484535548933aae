"""How many CPUs the service may use, and what it sizes from that number at start-up."""
from __future__ import annotations

import asyncio
import logging
import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("search.runtime")


@dataclass(frozen=True)
class Sizing:
    cpus: int  # the CPUs the service may use
    workers: int  # worker processes the launcher starts: one per CPU
    threads: int  # threads of each worker's default executor: Python's own rule, from `cpus`


def _under(mount: Path, path: str) -> Path:
    """The folder of cgroup `path` under `mount`. A container that shares the host's cgroup namespace sees
    its full path (/docker/ID/...) but has only its own cgroup mounted: then the longest tail that exists."""
    parts = [p for p in path.split("/") if p]
    for start in range(len(parts) + 1):
        folder = mount.joinpath(*parts[start:])
        if folder.is_dir():
            return folder
    return mount


def cpu_cgroup(root: Path = Path("/")) -> tuple[Path, int] | None:
    """This process's cgroup folder for the cpu controller, and its version (1 or 2); None if none is found."""
    try:
        lines = (root / "proc/self/cgroup").read_text().splitlines()
    except (OSError, UnicodeDecodeError):  # a cgroup's name may hold any byte but "/" and a newline
        return None
    hierarchies = [line.split(":", 2) for line in lines if line.count(":") >= 2]
    mounts = root / "sys/fs/cgroup"
    for _, controllers, path in hierarchies:  # cgroup v1: the cpu controller has a line of its own
        if "cpu" in controllers.split(","):
            for mount in (mounts / "cpu", mounts / controllers):
                if mount.is_dir():
                    return _under(mount, path), 1
    for _, controllers, path in hierarchies:  # cgroup v2: one line, "0::PATH"
        if controllers == "":
            own = _under(mounts, path)
            if (own / "cpu.max").is_file() or (own / "cpu.stat").is_file():
                return own, 2
    return None


def cpu_quota(root: Path = Path("/")) -> float | None:
    """The CPUs the cgroup's quota gives per period (quota / period); None without a quota, or unreadable."""
    found = cpu_cgroup(root)
    if found is None:
        return None
    folder, version = found
    try:
        if version == 2:
            quota, period = (folder / "cpu.max").read_text().split()[:2]
            if quota == "max":
                return None
        else:
            quota = (folder / "cpu.cfs_quota_us").read_text().strip()
            period = (folder / "cpu.cfs_period_us").read_text().strip()
        quota_us, period_us = int(quota), int(period)
    except (OSError, ValueError):
        return None
    if quota_us <= 0 or period_us <= 0:  # -1 on v1: no quota
        return None
    return quota_us / period_us


def _python_cpu_count() -> int | None:
    """PYTHON_CPU_COUNT, as Python 3.13 reads it: a number of CPUs, or no limit ("default", empty, or a word)."""
    value = os.environ.get("PYTHON_CPU_COUNT", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def _affinity() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def effective_cpus(root: Path = Path("/")) -> int:
    """The number of CPUs this process may use (files are read under `root`).

    The smallest of its CPU affinity, its cgroup's quota rounded up, and PYTHON_CPU_COUNT; at least 1."""
    limits = [_affinity()]
    override = _python_cpu_count()
    if override is not None:
        limits.append(override)
    quota = cpu_quota(root)
    if quota is not None:
        limits.append(math.ceil(quota))
    return max(1, min(limits))


def sizing(root: Path = Path("/")) -> Sizing:
    """What the launcher starts: one worker process per CPU, and the threads of each worker's executor."""
    cpus = effective_cpus(root)
    return Sizing(cpus=cpus, workers=cpus, threads=min(32, cpus + 4))


def install(loop: asyncio.AbstractEventLoop, root: Path = Path("/")) -> Sizing:
    """Give `loop` its default executor, sized from the CPUs the service may use; every worker calls this."""
    plan = sizing(root)
    quota = cpu_quota(root) or "none"  # pragma: no mutate (the words of a log line)
    loop.set_default_executor(ThreadPoolExecutor(max_workers=plan.threads, thread_name_prefix="blocking"))
    log.info("sized for %d CPUs (affinity %d, quota %s, os.cpu_count() %s): %d workers, %d executor threads",
             plan.cpus, _affinity(), quota, os.cpu_count(), plan.workers, plan.threads)
    return plan
