"""An in-process LRU cache of rendered pages, allowed a quarter of the memory."""
import logging
from collections import OrderedDict

import psutil
from memory import memory_limit

log = logging.getLogger("cache")
CACHE_BUDGET = (memory_limit() or 512 * 2**20) // 4
log.info("host memory: %d MiB", psutil.virtual_memory().total // 2**20)


class PageCache:
    def __init__(self, budget: int = CACHE_BUDGET):
        self.budget, self.used, self.pages = budget, 0, OrderedDict()

    def put(self, key: str, page: bytes) -> None:
        self.pages[key] = page
        self.used += len(page)
        while self.used > self.budget:
            _, old = self.pages.popitem(last=False)
            self.used -= len(old)
