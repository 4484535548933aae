"""Helpers for hidden tests: run a learner's code with a hang guard.

A deadlock must become a verdict in about a second, never a frozen check. So a
scenario runs on a daemon thread; if it is still running after `hang_after`
seconds we collect where it is stuck (the thread's stack and every pending
asyncio task's stack, trimmed to the learner's files), cancel what can be
cancelled, and raise Hang.
"""
from __future__ import annotations

import asyncio
import ctypes
import gc
import inspect
import linecache
import os
import sys
import sysconfig
import threading
import time
import traceback
from pathlib import Path

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


def _source_line(filename: str, lineno: int | None) -> str:
    # A frame caught between two instructions by another thread can have no line number yet.
    return linecache.getline(filename, lineno).strip() if lineno else ""


_COMPREHENSIONS = ("<listcomp>", "<setcomp>", "<dictcomp>")


def _without_comprehensions(frames: list[tuple[str, int, str]]) -> list[tuple[str, int, str]]:
    """Frames with a list, set or dict comprehension's own frame folded into the function around
    it: Python 3.12 runs comprehensions inline (PEP 709), so every version then names the same
    function for the same line."""
    out = []
    for frame in frames:
        if frame[2] in _COMPREHENSIONS and out and out[-1][0] == frame[0]:
            out[-1] = (frame[0], frame[1], out[-1][2])
        else:
            out.append(frame)
    return out


def describe_frames(frames: list[tuple[str, int, str]], fallback: bool = True, root: Path | None = None) -> list[str]:
    """Lines like "katas/x.py:42 in step: async with sem:", learner frames only when any.

    With no learner frame, the innermost frame is shown (or nothing, if not `fallback`).
    """
    frames = _without_comprehensions(frames)
    mine = [f for f in frames if is_learner_file(f[0], root)]
    chosen = mine or (frames[-1:] if fallback else [])
    return [
        f"{display_path(fn)}:{line} in {func}: {_source_line(fn, line)}"
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


def _loop_of(frame) -> asyncio.AbstractEventLoop | None:
    """The event loop this thread is running, found on its own stack (cheap, unlike gc)."""
    while frame is not None:
        candidate = frame.f_locals.get("self") if frame.f_code.co_name in ("run_forever", "_run_once") else None
        if isinstance(candidate, asyncio.AbstractEventLoop):
            return candidate
        frame = frame.f_back
    return None


def _in_select(frame) -> bool:
    """Is the innermost frame the loop's selector, waiting for I/O?"""
    return frame is not None and frame.f_code.co_name in ("select", "poll") and "selectors" in frame.f_code.co_filename


def _cpu_seconds(thread: threading.Thread) -> float | None:
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
    timeout = frame.f_locals.get("timeout", 0) if _in_select(frame) else 0
    if not (timeout is None or (isinstance(timeout, (int, float)) and timeout < 0)):
        return False  # not waiting at all, or waiting for a timer
    try:
        watched = set(loop._selector.get_map())
        own = {loop._ssock.fileno()} if getattr(loop, "_ssock", None) is not None else set()
    except (AttributeError, RuntimeError, OSError):
        return False
    return watched <= own and not _executor_busy(loop)


def _waiting_frame(frame):
    """The outermost frame of a blocking acquire: past threading's own frames (Semaphore.acquire
    is Python code that waits inside a Condition) to the line that asked for the lock."""
    while frame is not None and frame.f_code.co_filename == threading.__file__:
        frame = frame.f_back
    return frame


def _held_by_own_stack(frame) -> str:
    """If the thread waits for a threading lock that an outer frame of the same thread
    holds, the line that took it: a non-reentrant lock taken twice can never be freed."""
    frame = _waiting_frame(frame)
    waiting = _lock_on_line(frame) if frame is not None else None
    if waiting is None:
        return ""
    current = frame
    while current is not None:
        if current is not frame and _lock_on_line(current) is waiting:
            return f"{display_path(current.f_code.co_filename)}:{current.f_lineno}"
        held = _enclosing_with(current, waiting)
        if held:
            return held
        current = current.f_back
    return ""


def _held_by_suspended_task(loop, frame) -> str:
    """If the loop thread waits for a threading lock that a task of the same loop holds
    across an await, the line where the task took it: that task can only give it back
    when the loop runs again, and the loop is the thread that waits."""
    inner, frame = frame, _waiting_frame(frame)
    waiting = _lock_on_line(frame) if frame is not None else None
    line = ""
    if waiting is None and frame is not None and frame is not inner:
        # `with await limiter.semaphore(key):` names no variable; threading's own acquire frame
        # holds the semaphore, and a task suspended inside the same `with` line holds a slot of it.
        acquiring = inner
        while acquiring is not None and acquiring.f_back is not frame:
            acquiring = acquiring.f_back
        candidate = acquiring.f_locals.get("self") if acquiring is not None else None
        if isinstance(candidate, _LOCK_TYPES) and _unavailable(candidate):
            waiting = candidate
            line = _source_line(frame.f_code.co_filename, frame.f_lineno)
    if waiting is None:
        return ""
    # The `with` statements the waiting thread is entering (`async with limiter.get():` whose
    # __aenter__ blocks): a task suspended inside the same statement holds what it waits for.
    entering = {line} - {""}
    caller = frame
    while caller is not None:
        text = _source_line(caller.f_code.co_filename, caller.f_lineno)
        if text.startswith(("with ", "async with ")) and not _library_file(caller.f_code.co_filename):
            entering.add(text)
        caller = caller.f_back
    for task in list(asyncio.all_tasks(loop)):
        coro = task.get_coro()
        while coro is not None:
            suspended = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
            if suspended is None:
                break
            held = _enclosing_with(suspended, waiting, entering)
            if held and not _held_elsewhere(waiting, loop):
                return held
            coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return ""


def _held_elsewhere(lock, loop) -> bool:
    """Does a thread other than the loop's own run inside a `with` on this lock? (It could release it.)"""
    for ident, frame in sys._current_frames().items():
        if ident == getattr(loop, "_thread_id", None):
            continue
        while frame is not None:
            if _enclosing_with(frame, lock):
                return True
            frame = frame.f_back
    return False


_LIBRARIES = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")})


def _library_file(filename: str) -> bool:
    """Python's own library or an installed package: not the kata's code, nor its tests."""
    return filename.startswith(_LIBRARIES) or filename.startswith("<")


def _enclosing_with(frame, lock, same_lines: set[str] = frozenset()) -> str:
    """The line of a `with LOCK:` (or of a `with` written exactly as one of `same_lines`) that
    encloses the frame's current line, as "file:line", or ''."""
    filename, line = frame.f_code.co_filename, frame.f_lineno
    if not line:
        return ""
    indent = _indent(linecache.getline(filename, line))
    for above in range(line - 1, frame.f_code.co_firstlineno - 1, -1):
        text = linecache.getline(filename, above)
        if text.strip() and _indent(text) < indent:
            indent = _indent(text)
            if _lock_on_line(frame, above) is lock or text.strip() in same_lines:
                return f"{display_path(filename)}:{above}"
    return ""


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())


_LOCK_TYPES = (type(threading.Lock()), threading.Semaphore)


def _unavailable(obj) -> bool:
    if isinstance(obj, threading.Semaphore):
        return getattr(obj, "_value", 1) == 0
    return obj.locked()


def _lock_on_line(frame, lineno: int | None = None):
    """The threading Lock or Semaphore named by `with X:` or `X.acquire(` on a line of the frame,
    if it cannot be taken now."""
    line = _source_line(frame.f_code.co_filename, lineno or frame.f_lineno)
    for prefix, suffix in (("with ", ":"), ("", ".acquire(")):
        if line.startswith(prefix) and suffix in line:
            expr = line[len(prefix):line.index(suffix)].split(" as ")[0].strip()
            obj = _resolve(frame, expr)
            if isinstance(obj, _LOCK_TYPES) and _unavailable(obj):
                return obj
    return None


def _resolve(frame, expr: str):
    """Follow a dotted name (no calls, nothing evaluated) in the frame's scope."""
    parts = expr.split(".")
    if not all(p.isidentifier() for p in parts):
        return None
    scope = {**frame.f_globals, **frame.f_locals}
    obj = scope.get(parts[0])
    for part in parts[1:]:
        try:
            obj = object.__getattribute__(obj, part)
        except AttributeError:
            return None
    return obj


_EVENTS_FILE = asyncio.events.__file__


def _callback_running(frame):
    """The asyncio Handle whose callback (a task's step, say) this loop thread is inside, or None."""
    while frame is not None:
        if frame.f_code.co_name == "_run" and frame.f_code.co_filename == _EVENTS_FILE:
            handle = frame.f_locals.get("self")
            return handle if isinstance(handle, asyncio.Handle) else None
        frame = frame.f_back
    return None


class _Watch:
    """Samples a running scenario thread to see that it can never finish, before any timeout,
    and whether its event loop spins: the thread stays out of select, inside one and the same
    callback of the loop (a task's step), and keeps using the CPU."""

    KEEP = 200  # samples of the current run inside one callback, the latest

    def __init__(self, thread: threading.Thread):
        self.thread, self.seen, self.cpu = thread, 0, _cpu_seconds(thread)
        self.started = time.monotonic()
        self.handle, self.since, self.since_cpu, self.samples = None, None, None, []

    def _sample(self, frame) -> None:
        handle = _callback_running(frame) if frame is not None and not _in_select(frame) else None
        if handle is None or handle is not self.handle:
            self.handle, self.samples = handle, []
            self.since = time.monotonic() if handle is not None else None
            self.since_cpu = _cpu_seconds(self.thread) if handle is not None else None
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
        cpu = _cpu_seconds(self.thread)
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
                (loop is not None and (_can_never_wake(loop, frame) or _held_by_suspended_task(loop, frame)))
                or _held_by_own_stack(frame)
            )
        # the same state twice in a row, a poll apart: not a moment caught mid-step
        self.seen = self.seen + 1 if stuck else 0
        return self.seen >= 2


def _blocked_loop_lines(frame, busy: bool | None) -> list[str]:
    """The loop thread is not waiting for I/O: it is inside one callback that does not return."""
    frames = _frames_of(frame)
    mine = [f for f in frames if is_learner_file(f[0])] or frames[-1:]
    file, line, func = mine[-1]
    where = f"{display_path(file)}:{line} in {func}"
    if busy:
        head = (f"the event loop thread is busy at {where}: it keeps running and never gives the loop a turn "
                "(a loop that never awaits anything unfinished, or CPU-bound work inside async code)")
    else:
        held = _held_by_own_stack(frame)
        loop = _loop_of(frame)
        by_task = _held_by_suspended_task(loop, frame) if loop is not None and not held else ""
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

    `spin`: the stacks sampled while the loop thread ran inside one callback (see _Watch.spinning)."""
    loops = _loops_on(thread.ident)
    frame = sys._current_frames().get(thread.ident)
    lines: list[str] = []
    blocked = [loop for loop in loops if frame is not None and not _in_select(frame)]
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
        chain = tuple(describe_frames(_task_frames(task), fallback=False))
        if not chain:
            others += 1  # a task with no line of the learner's (asyncio.sleep, say)
            continue
        groups[chain] = groups.get(chain, 0) + 1
    if others and not groups:
        for task in waiting:  # nothing of the learner's: show asyncio's own lines after all
            chain = tuple(describe_frames(_task_frames(task)))
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
        held = _held_by_own_stack(frame)
        lines.append("the thread is stuck at" + (f" (it waits for a threading lock it already took at {held})" if held else ""))
        lines += [f"    {f}" for f in describe_frames(_frames_of(frame))]
    return "\n".join(lines), loops


POLL_SECONDS = 0.03


def run_bounded(fn, *args, what: str = "the scenario", seconds: float | None = None, stuck=None, **kwargs):
    """Call fn(*args, **kwargs) on a daemon thread; return its result or raise.

    Raises Hang if it is still running after `seconds` (default: the kata's
    hang_after), or as soon as it can be seen that it can never finish (an
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
    watch, certain, known = _Watch(thread), False, ""
    while thread.is_alive() and time.monotonic() - started < seconds:
        thread.join(min(POLL_SECONDS, max(seconds - (time.monotonic() - started), 0)))
        known = stuck() if stuck is not None and thread.is_alive() else ""
        if thread.is_alive() and (known or watch.certainly_stuck()):
            certain = True
            break
    if thread.is_alive():
        cpu = _cpu_seconds(thread)
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
        if loops and _in_select(sys._current_frames().get(thread.ident)):
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
