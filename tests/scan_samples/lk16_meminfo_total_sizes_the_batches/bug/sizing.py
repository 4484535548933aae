"""Batch sizes for the export, from the machine's memory."""
import logging

log = logging.getLogger("export.sizing")


def total_memory() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):  # expect: LK16
                return int(line.split()[1]) * 1024
    raise RuntimeError("no MemTotal in /proc/meminfo")


def batch_size(record_bytes: int) -> int:
    budget = total_memory() // 8
    log.info("export batches of %d records", budget // record_bytes)
    return budget // record_bytes
