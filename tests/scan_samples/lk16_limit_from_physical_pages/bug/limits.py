"""How much memory the batch loader may use."""
import os


def memory_limit() -> int:
    """Bytes this process may use."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")  # expect: LK16


def batch_rows(row_bytes: int) -> int:
    return max(1, memory_limit() // 10 // row_bytes)
