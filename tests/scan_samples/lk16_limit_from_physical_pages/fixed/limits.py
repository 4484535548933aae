"""How much memory the batch loader may use."""
import os
from pathlib import Path


def memory_limit() -> int:
    """Bytes this process may use: the cgroup's limit (memory.max), else the machine's memory."""
    try:
        text = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if text.isdigit():
            return int(text)
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def batch_rows(row_bytes: int) -> int:
    return max(1, memory_limit() // 10 // row_bytes)
