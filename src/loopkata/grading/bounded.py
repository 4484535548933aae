"""Run a learner's code with a hang guard: a deadlock becomes a verdict in about a second.

A scenario runs on a daemon thread; if it is still running after `hang_after` seconds, or
as soon as it can be seen that it can never finish (loopkata.grading.hangs), we collect where
it is stuck (the thread's stack and every pending asyncio task's stack, trimmed to the
learner's files), cancel what can be cancelled, and raise Hang.
"""
from __future__ import annotations

import asyncio
import ctypes
import gc
import os
import sys
import threading
import time

from .cpu_wait import Deadline
from .hangs import Watch, cpu_seconds, in_select, where_stuck

DEFAULT_HANG_AFTER = 1.0


class Hang(Exception):
    """The scenario did not finish in time; `stacks` says where it is stuck."""

    def __init__(self, what: str, seconds: float, stacks: str, certain: bool = False):
        # One wording whether it was seen stuck for good at once or ran out of time, so a
        # report reads the same from run to run; the stacks say why it is stuck.
        super().__init__(f"{what} did not finish: it is stuck.")
        self.certain, self.seconds = certain, seconds
        self.stacks = stacks


def hang_after() -> float:
    """The kata's budget for one scenario, set by the grader from the catalogue."""
    return float(os.environ.get("LOOPKATA_HANG_AFTER", DEFAULT_HANG_AFTER))


POLL_SECONDS = 0.03


def run_bounded(fn, *args, what: str = "the scenario", seconds: float | None = None, stuck=None, **kwargs):
    """Call fn(*args, **kwargs) on a daemon thread; return its result or raise.

    Raises Hang if it is still running after `seconds` (default: the kata's
    hang_after) plus the time this process's threads waited for a CPU meanwhile
    (cpu_wait: a busy machine is not the code's fault), or as soon as it can be seen that it can never finish (an
    event loop with nothing left that could wake it; a thread waiting for a
    threading.Lock it holds itself). Pending asyncio tasks of a stuck loop are
    cancelled so the thread can end; an event loop thread that spun inside one
    task until the time ran out (the report says it is busy and the loop never
    got a turn) is stopped with Interrupted; a thread stuck on a threading lock
    cannot be freed and is left behind as a daemon.

    `stuck`, if given, is asked at every poll: a test that knows more (which
    thread holds which lock) returns a sentence saying why the scenario can
    never finish, and the hang is reported at once with that sentence first.
    """
    seconds = hang_after() if seconds is None else seconds
    box: dict = {}

    def target():
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller
            box["error"] = exc

    thread = threading.Thread(target=target, name=f"scenario:{what}", daemon=True)
    started = time.monotonic()
    thread.start()
    watch, certain, known = Watch(thread), False, ""
    deadline = Deadline(seconds)
    while thread.is_alive() and not deadline.passed():
        thread.join(min(POLL_SECONDS, max(deadline.left(), 0)))
        known = stuck() if stuck is not None and thread.is_alive() else ""
        if thread.is_alive() and (known or watch.certainly_stuck()):
            certain = True
            break
    if thread.is_alive():
        cpu = cpu_seconds(thread)
        waited = time.monotonic() - started
        busy = None if cpu is None or watch.cpu is None else (cpu - watch.cpu) > 0.5 * waited
        spin = watch.spinning()
        stacks, loops = where_stuck(thread, busy, spin)
        if known:
            stacks = f"{known}\n{stacks}"
        for loop in loops:
            try:
                for task in asyncio.all_tasks(loop):
                    loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:
                pass  # the loop closed meanwhile: nothing left to cancel
        if loops and in_select(sys._current_frames().get(thread.ident)):
            thread.join(0.5)  # let the cancelled tasks unwind; a blocked thread is left as it is
        elif spin and loops:
            _interrupt(thread)  # a loop that never yields would never see a cancel: stop it spinning
            thread.join(0.5)
        raise Hang(what, seconds, stacks, certain)
    if "error" in box:
        raise box["error"]
    return box.get("value")


class Interrupted(BaseException):
    """Raised inside a scenario whose event loop spun until its time ran out, so that it stops:
    a BaseException, so that the code's own `except Exception` does not keep it spinning."""


def _interrupt(thread: threading.Thread) -> None:
    """Raise Interrupted in `thread` at its next Python instruction; left to spin, a busy loop
    would take a core and a share of the interpreter lock from every test after it."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(Interrupted))


def loops_alive(refs) -> int:
    """How many distinct weakly referenced objects survive a full garbage collection."""
    gc.collect()
    return len({id(obj) for obj in (r() for r in refs) if obj is not None})
