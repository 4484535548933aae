"""How much memory the worker has, for its start-up log and its progress lines."""
from __future__ import annotations

import os
import resource
from pathlib import Path


def memory_limit(root: Path = Path("/")) -> int | None:
    """The memory this process may use, in bytes (None: no limit)."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def memory_usage(root: Path = Path("/")) -> int | None:
    """The memory this process uses now, in bytes: the most it has held (ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def mib(n: int | None) -> str:
    return "no limit" if n is None else f"{n / 2**20:,.1f} MiB"
