"""Variant: the queue bounded in bytes (a budget the producer takes from and the consumer gives back); the guard a thread."""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from . import limits
from .feed import read_records

log = logging.getLogger("ingest")

EXIT_DONE = 0  # the feed ended and every record read was handled
EXIT_SHED = 75  # stopped on purpose to stay under the memory limit; the platform restarts the worker, which resumes
RECORD_BYTES = 256 * 1024  # about how big one record of the feed is


@dataclass
class State:
    handled: int = 0  # records handed downstream: where the next start resumes
    stopped: str = ""


async def handle(record: bytearray, seconds: float) -> None:
    """Hand one record downstream (the store takes `seconds` per record)."""
    await asyncio.sleep(seconds)


async def produce(feed: tuple[str, int], queue: asyncio.Queue) -> None:
    async for record in read_records(*feed):
        await queue.put(record)
    await queue.put(None)  # the end of the feed


async def consume(queue: asyncio.Queue, state: State, seconds: float) -> None:
    while (record := await queue.get()) is not None:
        await handle(record, seconds)
        state.handled += 1


class ByteBudget:
    """At most `capacity` bytes of records between the producer and the consumer."""

    def __init__(self, capacity: int):
        self.capacity, self.held = capacity, 0
        self.changed = asyncio.Condition()

    async def take(self, n: int) -> None:
        async with self.changed:
            await self.changed.wait_for(lambda: self.held == 0 or self.held + n <= self.capacity)
            self.held += n

    async def give(self, n: int) -> None:
        async with self.changed:
            self.held -= n
            self.changed.notify_all()


def watch(root: Path, threshold: int, loop: asyncio.AbstractEventLoop, shed: asyncio.Event, done: threading.Event) -> None:
    """On a thread: once the cgroup's usage reaches `threshold`, set `shed` on the loop."""
    while not done.wait(0.02):
        used = limits.memory_usage(root)
        if used is not None and used >= threshold:
            log.warning("memory at %s: shedding", limits.mib(used))
            loop.call_soon_threadsafe(shed.set)
            return


async def run(options: argparse.Namespace, state: State) -> int:
    root = options.cgroup_root
    limit = limits.memory_limit(root)
    budget = ByteBudget(limits.queue_bound(limit, item_bytes=RECORD_BYTES, baseline=limits.memory_usage(root) or 0)
                        * RECORD_BYTES)
    queue: asyncio.Queue = asyncio.Queue()

    async def produce_within_budget() -> None:
        async for record in read_records(*options.feed):
            await budget.take(len(record))
            queue.put_nowait(record)
        queue.put_nowait(None)

    async def consume_within_budget() -> None:
        while (record := await queue.get()) is not None:
            await handle(record, options.handle_seconds)
            state.handled += 1
            await budget.give(len(record))

    shed, done = asyncio.Event(), threading.Event()
    threshold = limits.shed_at(limit)
    if threshold:
        threading.Thread(target=watch, args=(root, threshold, asyncio.get_running_loop(), shed, done),
                         name="memory guard", daemon=True).start()
    work = [asyncio.create_task(produce_within_budget()), asyncio.create_task(consume_within_budget())]
    shedding = asyncio.create_task(shed.wait())
    try:
        finished, _ = await asyncio.wait([work[1], shedding], return_when=asyncio.FIRST_COMPLETED)
        if shedding in finished:
            state.stopped = "shed"
            return EXIT_SHED
        work[1].result()
        state.stopped = "the feed ended"
        return EXIT_DONE
    finally:
        done.set()
        for task in (*work, shedding):
            task.cancel()
        await asyncio.gather(*work, shedding, return_exceptions=True)


def save_checkpoint(path: Path, state: State) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"handled": state.handled, "stopped": state.stopped}))
    os.replace(tmp, path)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ingest")
    parser.add_argument("--feed", required=True, type=lambda s: (s.rsplit(":", 1)[0], int(s.rsplit(":", 1)[1])),
                        help="HOST:PORT of the feed")
    parser.add_argument("--checkpoint", required=True, type=Path)
    parser.add_argument("--handle-seconds", type=float, default=0.001)
    parser.add_argument("--cgroup-root", type=Path, default=Path("/"), help="where the file system starts")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    state = State()
    log.info("starting; memory: %s", limits.mib(limits.memory_limit(options.cgroup_root)))
    try:
        return asyncio.run(run(options, state))
    finally:
        save_checkpoint(options.checkpoint, state)  # where the next start resumes
        log.info("stopped after %d records (%s)", state.handled, state.stopped or "interrupted")
