"""LG12: an asyncio.Queue made without a maxsize that grows without bound (kata 16).

An unbounded queue (`maxsize=0`, the default) never makes its producer wait: a
feed read faster than downstream takes it piles up in memory until the
container's limit, and the OOM killer ends the process with SIGKILL. A test
sees the start of it: the queue holding far more items than any consumer keeps
up with. The finding is a queue without a maxsize that holds more than
`LIMIT` items at once: 100,000 records of even 1 KiB are some 100 MiB, beyond
what a test's queue of jobs or messages holds (tens, thousands at most), while
a producer that outruns its consumer passes it within a second. Each queue is
reported once, with the line that made it and the line whose put passed the limit.
"""
from __future__ import annotations

import asyncio

from . import sites
from .findings import Collector, Finding
from .patches import Patches

LIMIT = 100_000


class QueueGrowth:
    def __init__(self, collector: Collector, patches: Patches):
        self.collector, self.patches = collector, patches

    def install(self) -> None:
        self.patches.replace(asyncio.Queue, "put_nowait", self._checked)

    def _checked(self, original):
        collector = self.collector

        def put_nowait(queue, item):
            original(queue, item)
            if len(queue._queue) > LIMIT and queue._maxsize <= 0 and not queue.__dict__.get("_loopkata_grew"):
                queue.__dict__["_loopkata_grew"] = True
                collector.safely(describe, queue)

        def describe(queue):
            made = queue.__dict__.get("_loopkata_site") or []
            collector.add(Finding(
                "LG12", f"an asyncio.Queue made without a maxsize{' at ' + made[0] if made else ''} held more than "
                        f"{LIMIT:,} items: nothing makes its producer wait, so it grows until the process's memory "
                        "limit and the OOM killer (give it a maxsize, so that put() waits for the consumer)",
                where=made + [f"put past {LIMIT:,} at {w}" for w in sites.made_at(3)[:1]]))
        return put_nowait
