"""The container's memory: its cgroup's limit and usage (cgroup v2, then v1)."""
from pathlib import Path

V2, V1 = Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/memory")


def _number(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() and int(text) < 2**60 else None  # "max", or v1's huge "no limit"


def memory_limit() -> int | None:
    return _number(V2 / "memory.max") or _number(V1 / "memory.limit_in_bytes")


def memory_used() -> int | None:
    return _number(V2 / "memory.current") or _number(V1 / "memory.usage_in_bytes")
