"""Variant: the cgroup's limit as the smallest on the way up to the hierarchy's root (a parent's limit binds too)."""
from __future__ import annotations

from pathlib import Path

HEADROOM = 0.75
SHED_AT = 0.8
DEFAULT_QUEUE_BOUND = 32


def _text(path: Path) -> str:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return ""


def _hierarchy(root: Path) -> tuple[Path, Path, str] | None:
    """(the hierarchy's mount, this process's cgroup folder in it, 'v1' or 'v2')."""
    table = {}
    for line in _text(root / "proc/self/cgroup").splitlines():
        fields = line.split(":", 2)
        if len(fields) == 3:
            for name in fields[1].split(",") if fields[1] else [""]:
                table[name] = fields[2]
    base = root / "sys/fs/cgroup"
    if "memory" in table and (base / "memory").is_dir():
        mount, version = base / "memory", "v1"
    elif "" in table and (base / "cgroup.controllers").exists():
        mount, version = base, "v2"
    else:
        return None
    own = mount / table["memory" if version == "v1" else ""].strip("/")
    return mount, (own if own.is_dir() else mount), version


def _limit_in(folder: Path, version: str) -> int | None:
    text = _text(folder / ("memory.max" if version == "v2" else "memory.limit_in_bytes"))
    try:
        value = int(text)
    except ValueError:
        return None  # "max", empty, or not a number
    return value if 0 < value < 1 << 60 else None


def memory_limit(root: Path = Path("/")) -> int | None:
    found = _hierarchy(root)
    if not found:
        return None
    mount, folder, version = found
    limits = []
    while True:
        limit = _limit_in(folder, version)
        if limit is not None:
            limits.append(limit)
        if folder == mount:
            break
        folder = folder.parent
    return min(limits, default=None)


def memory_usage(root: Path = Path("/")) -> int | None:
    found = _hierarchy(root)
    if not found:
        return None
    _, folder, version = found
    text = _text(folder / ("memory.current" if version == "v2" else "memory.usage_in_bytes"))
    return int(text) if text.isdigit() else None


def queue_bound(limit: int | None, *, item_bytes: int, baseline: int) -> int:
    if not limit:
        return DEFAULT_QUEUE_BOUND
    return max(1, round(limit * HEADROOM - baseline) // item_bytes)


def shed_at(limit: int | None) -> int | None:
    return round(limit * SHED_AT) if limit else None


def mib(n: int | None) -> str:
    return "no limit" if n is None else f"{n / 2**20:,.1f} MiB"
