"""How much memory the worker has: its cgroup's limit and usage, and the sizes that follow from them.

A container's memory limit is not something Python's own calls see: os.sysconf and
psutil report the host's memory. The kernel keeps the limit, and what counts
against it, in the cgroup file system: cgroup v2 has one tree (memory.max, "max"
for none; memory.current), cgroup v1 one per controller (memory.limit_in_bytes,
a huge number for none; memory.usage_in_bytes). /proc/self/cgroup names this
process's cgroup in each.
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
    v1 = v2 = None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if "memory" in controllers.split(","):
            v1 = path
        elif controllers == "" and parts[0] == "0":
            v2 = path
    if v1 is not None and (fs / "memory").is_dir():
        mount = fs / "memory"
        own = mount / v1.lstrip("/")
        # Without a cgroup namespace, a container sees its own cgroup mounted as the root of the
        # hierarchy while /proc/self/cgroup still names the host's path to it.
        return (own if own.is_dir() else mount), 1
    if v2 is not None and (fs / "cgroup.controllers").is_file():
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
    return "no limit" if n is None else f"{n / 2**20:,.1f} MiB"  # pragma: no mutate (the starter's, unchanged: how a log line writes a size)
