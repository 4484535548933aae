"""Helpers for hidden tests: run a learner's code with a hang guard.

A deadlock must become a verdict in about a second, never a frozen check. So a
scenario runs on a daemon thread; if it is still running after `hang_after`
seconds we collect where it is stuck (the thread's stack and every pending
asyncio task's stack, trimmed to the learner's files), cancel what can be
cancelled, and raise Hang.
"""
from __future__ import annotations

import asyncio
import gc
import linecache
import os
import sys
import threading
import traceback
from pathlib import Path

DEFAULT_HANG_AFTER = 1.0


class Hang(Exception):
    """The scenario did not finish in time; `stacks` says where it is stuck."""

    def __init__(self, what: str, seconds: float, stacks: str):
        super().__init__(f"{what} did not finish within {seconds:g} s: it is stuck.")
        self.stacks = stacks


def hang_after() -> float:
    """The kata's budget for one scenario, set by the grader from the catalogue."""
    return float(os.environ.get("LOOPKATA_HANG_AFTER", DEFAULT_HANG_AFTER))


def impl_root() -> Path | None:
    value = os.environ.get("LOOPKATA_IMPL")
    return Path(value).resolve() if value else None


def is_learner_file(filename: str, root: Path | None = None) -> bool:
    """Is `filename` part of the implementation under test (`root`, default: $LOOPKATA_IMPL)?"""
    root = root or impl_root()
    if root is None:
        return False
    path = Path(filename).resolve()
    return path == root or root in path.parents


def display_path(filename) -> str:
    """A path as a learner reads it: relative to where they are, when it can be."""
    try:
        return os.path.relpath(filename)
    except ValueError:
        return str(filename)


def describe_frames(frames: list[tuple[str, int, str]], fallback: bool = True, root: Path | None = None) -> list[str]:
    """Lines like "katas/x.py:42 in step: async with sem:", learner frames only when any.

    With no learner frame, the innermost frame is shown (or nothing, if not `fallback`).
    """
    mine = [f for f in frames if is_learner_file(f[0], root)]
    chosen = mine or (frames[-1:] if fallback else [])
    return [
        f"{display_path(fn)}:{line} in {func}: {linecache.getline(fn, line).strip()}"
        for fn, line, func in chosen
    ]


def _frames_of(frame) -> list[tuple[str, int, str]]:
    return [(f.filename, f.lineno, f.name) for f in traceback.extract_stack(frame)]


def _task_frames(task: asyncio.Task) -> list[tuple[str, int, str]]:
    """The task's whole await chain, outermost first (Task.get_stack shows only the top)."""
    out, coro = [], task.get_coro()
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:
            break
        out.append((frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name))
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return out


def _loops_on(thread_id: int) -> list[asyncio.AbstractEventLoop]:
    # A deadlocked loop sits idle in its selector; finding it through the
    # garbage collector lets us list (and cancel) its tasks from outside.
    return [
        o for o in gc.get_objects()
        if isinstance(o, asyncio.AbstractEventLoop)
        and getattr(o, "_thread_id", None) == thread_id
        and o.is_running()
    ]


def where_stuck(thread: threading.Thread) -> tuple[str, list]:
    """A readable report of a stuck thread: its loop's pending tasks, grouped by where they wait."""
    loops = _loops_on(thread.ident)
    groups: dict[tuple[str, ...], int] = {}
    for loop in loops:
        for task in asyncio.all_tasks(loop):
            if not task.done():
                chain = tuple(describe_frames(_task_frames(task)))
                groups[chain] = groups.get(chain, 0) + 1
    lines = []
    for chain, count in sorted(groups.items(), key=lambda g: (-len(g[0]), g[0])):
        lines.append(f"{count} task{'s are' if count > 1 else ' is'} waiting at")
        lines += [f"    {f}" for f in chain]
    frame = sys._current_frames().get(thread.ident)
    if frame is not None and not loops:
        lines.append("the thread is stuck at")
        lines += [f"    {f}" for f in describe_frames(_frames_of(frame))]
    return "\n".join(lines), loops


def run_bounded(fn, *args, what: str = "the scenario", seconds: float | None = None, **kwargs):
    """Call fn(*args, **kwargs) on a daemon thread; return its result or raise.

    Raises Hang if it is still running after `seconds` (default: the kata's
    hang_after). Pending asyncio tasks of a stuck loop are cancelled so the
    thread can end; a thread stuck on a threading lock cannot be freed and is
    left behind as a daemon.
    """
    seconds = hang_after() if seconds is None else seconds
    box: dict = {}

    def target():
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller
            box["error"] = exc

    thread = threading.Thread(target=target, name=f"scenario:{what}", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        stacks, loops = where_stuck(thread)
        for loop in loops:
            try:
                for task in asyncio.all_tasks(loop):
                    loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:
                pass  # the loop closed meanwhile: nothing left to cancel
        thread.join(0.5)
        raise Hang(what, seconds, stacks)
    if "error" in box:
        raise box["error"]
    return box.get("value")


def loops_alive(refs) -> int:
    """How many distinct weakly referenced objects survive a full garbage collection."""
    gc.collect()
    return len({id(obj) for obj in (r() for r in refs) if obj is not None})
