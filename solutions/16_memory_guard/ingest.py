"""The ingest worker: the feed's records into a queue, and downstream one at a time."""
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
RECORD_BYTES = 256 * 1024  # about how big one record of the feed is  # pragma: no mutate (a demo constant)


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


GUARD_EVERY = 0.02  # seconds between two looks at the cgroup's usage


async def guard(root: Path, threshold: int) -> int:
    """Returns the usage, in bytes, once the cgroup's usage has reached `threshold`."""
    while True:
        used = limits.memory_usage(root)
        if used is not None and used >= threshold:
            return used
        await asyncio.sleep(GUARD_EVERY)


async def run(options: argparse.Namespace, state: State) -> int:
    root = options.cgroup_root
    limit = limits.memory_limit(root)
    baseline = limits.memory_usage(root) or 0
    bound = limits.queue_bound(limit, item_bytes=RECORD_BYTES, baseline=baseline)
    threshold = limits.shed_at(limit)
    log.info("queue bound %d records; shedding at %s", bound, limits.mib(threshold))
    # A full queue makes the producer wait, and the feed with it: its records stay with the feed.
    queue: asyncio.Queue = asyncio.Queue(maxsize=bound)
    producer = asyncio.create_task(produce(options.feed, queue), name="producer")
    consumer = asyncio.create_task(consume(queue, state, options.handle_seconds), name="consumer")
    watcher = asyncio.create_task(guard(root, threshold), name="memory guard") if threshold else None
    pending = {t for t in (producer, consumer, watcher) if t is not None}
    try:
        while not consumer.done():
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            if watcher in done:
                state.stopped = f"shed at {limits.mib(watcher.result())} of {limits.mib(limit)}"
                log.warning("memory at %s of %s: no more work taken", limits.mib(watcher.result()), limits.mib(limit))
                return EXIT_SHED
            for task in done:
                task.result()  # the feed's or downstream's own error
        state.stopped = "the feed ended"
        return EXIT_DONE
    finally:
        for task in (producer, consumer, watcher):
            if task is not None:
                task.cancel()
        await asyncio.gather(*(t for t in (producer, consumer, watcher) if t is not None), return_exceptions=True)


def save_checkpoint(path: Path, state: State) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"handled": state.handled, "stopped": state.stopped}))
    os.replace(tmp, path)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ingest")
    parser.add_argument("--feed", required=True,  # pragma: no mutate (the given command line, always passed whole)
                        type=lambda s: (s.rsplit(":", 1)[0], int(s.rsplit(":", 1)[1])), help="HOST:PORT of the feed")
    parser.add_argument("--checkpoint", required=True, type=Path)  # pragma: no mutate (as --feed)
    parser.add_argument("--handle-seconds", type=float, default=0.001)  # pragma: no mutate (the starter's; every run passes it)
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
        why = state.stopped or "interrupted"  # pragma: no mutate (the words of a log line)
        log.info("stopped after %d records (%s)", state.handled, why)
