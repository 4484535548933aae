"""Where a stuck scenario is stuck, and whether it can ever finish.

A scenario thread is sampled while it runs (`Watch`): an event loop with nothing left that
could wake it, or a thread waiting for a lock it can never get, is stuck for good before any
deadline; a loop thread that stays inside one callback and uses the CPU is spinning.
`where_stuck` turns what it saw into the report a learner reads: a blocked or busy event-loop
thread, or tasks that all wait on each other.
"""
from __future__ import annotations

import asyncio
import gc
import inspect
import os
import sys
import threading
import time

from ..model.paths import display_path
from .frames import describe_frames, frames_of, is_learner_file, task_frames
from .locks import held_by_own_stack, held_by_suspended_task


def _loops_on(thread_id: int) -> list[asyncio.AbstractEventLoop]:
    # A deadlocked loop sits idle in its selector; finding it through the
    # garbage collector lets us list (and cancel) its tasks from outside.
    return [
        o for o in gc.get_objects()
        if isinstance(o, asyncio.AbstractEventLoop)
        and getattr(o, "_thread_id", None) == thread_id
        and o.is_running()
    ]


def _loop_of(frame) -> asyncio.AbstractEventLoop | None:
    """The event loop this thread is running, found on its own stack (cheap, unlike gc)."""
    while frame is not None:
        candidate = frame.f_locals.get("self") if frame.f_code.co_name in ("run_forever", "_run_once") else None
        if isinstance(candidate, asyncio.AbstractEventLoop):
            return candidate
        frame = frame.f_back
    return None


def in_select(frame) -> bool:
    """Is the innermost frame the loop's selector, waiting for I/O?"""
    return frame is not None and frame.f_code.co_name in ("select", "poll") and "selectors" in frame.f_code.co_filename


def cpu_seconds(thread: threading.Thread) -> float | None:
    """CPU time the thread has used so far (Linux), to tell "blocked" from "busy"."""
    try:
        with open(f"/proc/self/task/{thread.native_id}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def _executor_busy(loop) -> bool:
    """Could a worker of the loop's default executor still wake the loop (to_thread, run_in_executor)?"""
    executor = getattr(loop, "_default_executor", None)
    if executor is None:
        return False
    if not executor._work_queue.empty():
        return True
    frames = sys._current_frames()
    for worker in getattr(executor, "_threads", ()):
        frame = frames.get(worker.ident)
        if frame is not None and frame.f_code.co_name != "_worker":
            return True  # running a work item: its result will wake the loop
    return False


def _can_never_wake(loop, frame) -> bool:
    """An asyncio deadlock: the loop waits in select with no timeout (no ready callback, no
    timer), watches no file descriptor but its own wake-up pipe, and no executor worker
    is running: nothing in this process can ever make it run again, except another
    thread calling into it, which the hidden tests do not do."""
    timeout = frame.f_locals.get("timeout", 0) if in_select(frame) else 0
    if not (timeout is None or (isinstance(timeout, (int, float)) and timeout < 0)):
        return False  # not waiting at all, or waiting for a timer
    try:
        watched = set(loop._selector.get_map())
        own = {loop._ssock.fileno()} if getattr(loop, "_ssock", None) is not None else set()
    except (AttributeError, RuntimeError, OSError):
        return False
    return watched <= own and not _executor_busy(loop)


_EVENTS_FILE = asyncio.events.__file__


def _callback_running(frame):
    """The asyncio Handle whose callback (a task's step, say) this loop thread is inside, or None."""
    while frame is not None:
        if frame.f_code.co_name == "_run" and frame.f_code.co_filename == _EVENTS_FILE:
            handle = frame.f_locals.get("self")
            return handle if isinstance(handle, asyncio.Handle) else None
        frame = frame.f_back
    return None


class Watch:
    """Samples a running scenario thread to see that it can never finish, before any timeout,
    and whether its event loop spins: the thread stays out of select, inside one and the same
    callback of the loop (a task's step), and keeps using the CPU."""

    KEEP = 200  # samples of the current run inside one callback, the latest

    def __init__(self, thread: threading.Thread):
        self.thread, self.seen, self.cpu = thread, 0, cpu_seconds(thread)
        self.started = time.monotonic()
        self.handle, self.since, self.since_cpu, self.samples = None, None, None, []

    def _sample(self, frame) -> None:
        handle = _callback_running(frame) if frame is not None and not in_select(frame) else None
        if handle is None or handle is not self.handle:
            self.handle, self.samples = handle, []
            self.since = time.monotonic() if handle is not None else None
            self.since_cpu = cpu_seconds(self.thread) if handle is not None else None
        if handle is None:
            return
        position = (frame.f_code, frame.f_lasti)  # the innermost instruction
        chain = []
        while frame is not None:
            code = frame.f_code
            chain.append((code.co_filename, code.co_firstlineno, code.co_name, frame.f_lineno))
            frame = frame.f_back
        self.samples.append((chain[::-1], position))
        del self.samples[:-self.KEEP]

    def spinning(self) -> list | None:
        """The stacks (outermost first) sampled while the loop thread ran inside one callback, out
        of select and using the CPU, for at least the second half of the time so far; else None."""
        now = time.monotonic()
        if self.since is None or len(self.samples) < 3 or now - self.since < 0.5 * (now - self.started):
            return None
        cpu = cpu_seconds(self.thread)
        # A thread blocked in a call uses no CPU. A spinning one uses a share of a core even on a
        # loaded machine, and where the CPU time cannot be read, its innermost instruction moves.
        used = None if cpu is None or self.since_cpu is None else cpu - self.since_cpu
        moved = len({position for _, position in self.samples}) > 1
        if not (moved if used is None else used > 0.1 * (now - self.since)):
            return None
        return [chain for chain, _ in self.samples]

    def certainly_stuck(self) -> bool:
        frame = sys._current_frames().get(self.thread.ident)
        self._sample(frame)
        stuck = False
        if frame is not None:
            loop = _loop_of(frame)
            stuck = bool(
                (loop is not None and (_can_never_wake(loop, frame) or held_by_suspended_task(loop, frame)))
                or held_by_own_stack(frame)
            )
        # the same state twice in a row, a poll apart: not a moment caught mid-step
        self.seen = self.seen + 1 if stuck else 0
        return self.seen >= 2


def _blocked_loop_lines(frame, busy: bool | None) -> list[str]:
    """The loop thread is not waiting for I/O: it is inside one callback that does not return."""
    frames = frames_of(frame)
    mine = [f for f in frames if is_learner_file(f[0])] or frames[-1:]
    file, line, func = mine[-1]
    where = f"{display_path(file)}:{line} in {func}"
    if busy:
        head = (f"the event loop thread is busy at {where}: it keeps running and never gives the loop a turn "
                "(a loop that never awaits anything unfinished, or CPU-bound work inside async code)")
    else:
        held = held_by_own_stack(frame)
        loop = _loop_of(frame)
        by_task = held_by_suspended_task(loop, frame) if loop is not None and not held else ""
        if held:
            why = f"it waits for a threading lock that this same thread took at {held}"
        elif by_task:
            why = (f"it waits for a threading lock or semaphore that a task of this same loop holds across an await, "
                   f"taken at {by_task}: that task can only release it when the loop runs again")
        else:
            why = "a blocking call inside async code"
        head = f"the event loop thread is blocked at {where} ({why})"
    return [head] + [f"    {f}" for f in describe_frames(mine)]


def _spinning_loop_lines(samples: list) -> list[str]:
    """The loop thread kept running inside one callback: name the innermost function of the
    learner's that every sample was in, at the first of its lines the samples saw (a loop's head)."""
    mine: dict[str, bool] = {}
    for chain in samples:
        for filename, *_ in chain:
            if filename not in mine:
                mine[filename] = is_learner_file(filename)
    chains = [[f for f in chain if mine[f[0]]] or chain for chain in samples]
    depth = 0
    while all(len(c) > depth and c[depth][:3] == chains[0][depth][:3] for c in chains):
        depth += 1
    if not depth:
        return []
    file, _, func, _ = chains[-1][depth - 1]
    seen = sorted({c[depth - 1][3] for c in chains if c[depth - 1][3]})
    if not seen:
        return []
    first = seen[0]
    head = (f"the event loop thread is busy at {display_path(file)}:{first} in {func}: it kept running there "
            f"until the time ran out, never going back to the loop, so the event loop never got "
            f"a turn (a loop that awaits only finished things never yields, and neither does CPU-bound work: "
            f"callbacks, timers and every other task wait for it)")
    shown = chains[-1][:depth - 1] + [(file, 0, func, first)]
    return [head] + [f"    {f}" for f in describe_frames([(f[0], f[3], f[2]) for f in shown])]


def _on_stack(frame) -> list:
    out = []
    while frame is not None:
        out.append(frame)
        frame = frame.f_back
    return out


def where_stuck(thread: threading.Thread, busy: bool | None = None, spin: list | None = None) -> tuple[str, list]:
    """A readable report of a stuck thread: a blocked or busy event-loop thread, or tasks that all wait.

    `spin`: the stacks sampled while the loop thread ran inside one callback (see Watch.spinning)."""
    loops = _loops_on(thread.ident)
    frame = sys._current_frames().get(thread.ident)
    lines: list[str] = []
    blocked = [loop for loop in loops if frame is not None and not in_select(frame)]
    if blocked:
        spinning = _spinning_loop_lines(spin) if spin else []
        busy = busy or bool(spinning)
        lines += spinning or _blocked_loop_lines(frame, busy)
    running = _on_stack(frame) if blocked else []  # the task on the thread's stack is the one that blocks it
    waiting = [
        task for loop in loops for task in asyncio.all_tasks(loop)
        if not task.done() and not any(getattr(task.get_coro(), "cr_frame", None) is f for f in running)
    ]
    groups: dict[tuple[str, ...], int] = {}
    others = 0
    not_started: dict[str, int] = {}  # by coroutine name: their only frame is the `def` line, which says nothing
    for task in waiting:
        coro = task.get_coro()
        if inspect.iscoroutine(coro) and inspect.getcoroutinestate(coro) == inspect.CORO_CREATED:
            not_started[coro.__qualname__] = not_started.get(coro.__qualname__, 0) + 1
            continue
        chain = tuple(describe_frames(task_frames(task), fallback=False))
        if not chain:
            others += 1  # a task with no line of the learner's (asyncio.sleep, say)
            continue
        groups[chain] = groups.get(chain, 0) + 1
    if others and not groups:
        for task in waiting:  # nothing of the learner's: show asyncio's own lines after all
            chain = tuple(describe_frames(task_frames(task)))
            groups[chain] = groups.get(chain, 0) + 1
        others = 0
    if groups and not blocked:
        lines.append("every task is waiting, and none can wake another: a deadlock between tasks")
    for chain, count in sorted(groups.items(), key=lambda g: (-len(g[0]), g[0])):
        if blocked:
            lines.append(f"{count} task{'s' if count > 1 else ''} cannot run while it is {'busy' if busy else 'blocked'}, at")
        else:
            lines.append(f"{count} task{'s are' if count > 1 else ' is'} waiting at")
        lines += [f"    {f}" for f in chain]
    if not_started:
        count = sum(not_started.values())
        names = ", ".join(f"{name} x{n}" if n > 1 else name for name, n in sorted(not_started.items()))
        lines.append(f"{count} task{'s have' if count > 1 else ' has'} not started yet ({names}): "
                     "the loop never got to run them")
    if others:
        lines.append(f"(and {others} more task{'s' if others > 1 else ''} with no line of your code)")
    if frame is not None and not loops:
        held = held_by_own_stack(frame)
        lines.append("the thread is stuck at" + (f" (it waits for a threading lock it already took at {held})" if held else ""))
        lines += [f"    {f}" for f in describe_frames(frames_of(frame))]
    return "\n".join(lines), loops
