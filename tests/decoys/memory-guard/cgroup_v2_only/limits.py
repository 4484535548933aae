"""Decoy: reads the limit the cgroup v2 way only: the '0::PATH' line of /proc/self/cgroup, then memory.max.

Why it is wrong: it was written on a cgroup v2 laptop. On a cgroup v1 host (older
kernels and distributions, many CI runners and build hosts) /proc/self/cgroup
still has a '0::/' line, for an empty unified hierarchy, but no memory.max is there:
the limit is memory.limit_in_bytes in the memory hierarchy, and this finds no limit at all.
"""
from __future__ import annotations

from pathlib import Path

HEADROOM = 0.7  # the share of the limit that baseline + a full queue may take
SHED_AT = 0.8  # the share of the limit at which the worker stops taking work
NO_LIMIT_V1 = 2**60  # v1 writes "no limit" as a huge number (9223372036854771712 on 4 KiB pages)
DEFAULT_QUEUE_BOUND = 64  # items, when there is no limit to size the queue from


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _memory_dir(root: Path) -> tuple[Path, int] | None:
    """This process's memory cgroup folder and the cgroup version, or None."""
    fs = root / "sys" / "fs" / "cgroup"
    lines = (_read(root / "proc" / "self" / "cgroup") or "").splitlines()
    v2 = None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3 and parts[:2] == ["0", ""]:
            v2 = parts[2]
    if v2 is not None:
        own = fs / v2.lstrip("/")
        return (own if own.is_dir() else fs), 2
    return None


def _number(text: str | None) -> int | None:
    if text is None or not text.isdigit():
        return None
    return int(text)


def memory_limit(root: Path = Path("/")) -> int | None:
    """The memory limit of this process's cgroup, in bytes; None when there is none (or it cannot be read)."""
    found = _memory_dir(root)
    if found is None:
        return None
    folder, version = found
    value = _number(_read(folder / ("memory.max" if version == 2 else "memory.limit_in_bytes")))
    if value is None or value >= NO_LIMIT_V1:
        return None
    return value


def memory_usage(root: Path = Path("/")) -> int | None:
    """Bytes the cgroup uses now (every process in it, and its page cache), or None."""
    found = _memory_dir(root)
    if found is None:
        return None
    folder, version = found
    return _number(_read(folder / ("memory.current" if version == 2 else "memory.usage_in_bytes")))


def queue_bound(limit: int | None, *, item_bytes: int, baseline: int) -> int:
    """How many items of `item_bytes` a queue may hold: baseline + a full queue stays within HEADROOM of the limit."""
    if limit is None:
        return DEFAULT_QUEUE_BOUND
    return max(1, int((limit * HEADROOM - baseline) // item_bytes))


def shed_at(limit: int | None) -> int | None:
    """The usage at which the worker stops taking work: SHED_AT of the limit; None with no limit."""
    return None if limit is None else int(limit * SHED_AT)


def mib(n: int | None) -> str:
    return "no limit" if n is None else f"{n / 2**20:,.1f} MiB"
