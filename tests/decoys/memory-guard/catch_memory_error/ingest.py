"""Decoy: no bound and no guard; the producer catches MemoryError and sheds then.

Why it is wrong: under a cgroup's memory limit no allocation fails. The kernel lets the
cgroup take pages until it reaches its limit, then its OOM killer ends the process with
SIGKILL: no MemoryError is ever raised, no except block runs, nor any finally. MemoryError
comes from an address-space limit (ulimit -v), which is not what a container sets.
"""
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
    """Memory ran out: stop taking work."""


async def guarded_produce(feed: tuple[str, int], queue: asyncio.Queue) -> None:
    try:
        await produce(feed, queue)
    except MemoryError:
        raise Shed() from None


async def run(options: argparse.Namespace, state: State) -> int:
    queue: asyncio.Queue = asyncio.Queue()
    try:
        await asyncio.gather(guarded_produce(options.feed, queue), consume(queue, state, options.handle_seconds))
    except Shed:
        state.stopped = "out of memory: shed"
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
