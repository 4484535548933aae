"""Batch sizes for the export, from the container's memory limit."""
import logging

from memory import memory_limit

log = logging.getLogger("export.sizing")


def batch_size(record_bytes: int) -> int:
    budget = (memory_limit() or 256 * 2**20) // 8
    log.info("export batches of %d records", budget // record_bytes)
    return budget // record_bytes
