"""How many CPUs the service may use, and what it sizes from that number at start-up."""
from __future__ import annotations

import asyncio
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("search.runtime")


@dataclass(frozen=True)
class Sizing:
    cpus: int  # the CPUs the service may use
    workers: int  # worker processes the launcher starts: one per CPU


def effective_cpus(root: Path = Path("/")) -> int:
    """The number of CPUs this process may use (files are read under `root`)."""
    return os.cpu_count() or 1


def sizing(root: Path = Path("/")) -> Sizing:
    """What the launcher starts: one worker process per CPU."""
    cpus = effective_cpus(root)
    return Sizing(cpus=cpus, workers=cpus)


def install(loop: asyncio.AbstractEventLoop, root: Path = Path("/")) -> Sizing:
    """Give `loop` its default executor; every worker calls this before it serves."""
    plan = sizing(root)
    # Python's own size for a thread pool: min(32, CPUs + 4), enough for blocking I/O.
    loop.set_default_executor(ThreadPoolExecutor(thread_name_prefix="blocking"))
    log.info("sized for %d CPUs: %d workers", plan.cpus, plan.workers)
    return plan
