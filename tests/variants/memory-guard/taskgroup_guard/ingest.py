"""Variant: producer, consumer and guard in one asyncio.TaskGroup; the guard raises, and run() turns that into EXIT_SHED."""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
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


class Shed(Exception):
    """The container's memory reached the shedding point."""


async def run(options: argparse.Namespace, state: State) -> int:
    root = options.cgroup_root
    limit = limits.memory_limit(root)
    # two records in flight besides the queue: the one being read and the one being handled
    baseline = (limits.memory_usage(root) or 0) + 2 * RECORD_BYTES
    queue: asyncio.Queue = asyncio.Queue(limits.queue_bound(limit, item_bytes=RECORD_BYTES, baseline=baseline))
    threshold = limits.shed_at(limit)
    finished = asyncio.Event()

    async def guard() -> None:
        while threshold and not finished.is_set():
            if (limits.memory_usage(root) or 0) >= threshold:
                raise Shed()
            await asyncio.sleep(0.01)

    async def consume_then_finish() -> None:
        await consume(queue, state, options.handle_seconds)
        finished.set()

    try:
        async with asyncio.TaskGroup() as group:
            group.create_task(produce(options.feed, queue))
            group.create_task(consume_then_finish())
            group.create_task(guard())
    except* Shed:
        state.stopped = "shed"  # a return is not allowed in an except* block
    if state.stopped:
        return EXIT_SHED
    state.stopped = "the feed ended"
    return EXIT_DONE


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
