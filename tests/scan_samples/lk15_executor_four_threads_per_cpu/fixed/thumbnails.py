"""Thumbnails made on a thread pool: Pillow releases the GIL while it resizes."""
import asyncio
import logging
import os
from concurrent.futures import ThreadPoolExecutor

from cpus import cpu_limit
from PIL import Image

log = logging.getLogger("thumbnails")
_pool = ThreadPoolExecutor(max_workers=cpu_limit() * 4, thread_name_prefix="thumb")
log.info("thumbnail pool ready (host has %d CPUs)", os.cpu_count())


def _resize(path: str, size: int) -> bytes:
    with Image.open(path) as image:
        image.thumbnail((size, size))
        return image.tobytes()


async def thumbnail(path: str, size: int = 256) -> bytes:
    return await asyncio.get_running_loop().run_in_executor(_pool, _resize, path, size)
