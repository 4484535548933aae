"""Threading locks that can never be freed: the line that took a lock its own waiter holds.

Read from a stuck thread's frames, never by running anything: a non-reentrant lock taken twice
by one thread, or a lock an event loop's thread waits for while a suspended task of the same
loop holds it across an await.
"""
from __future__ import annotations

import asyncio
import linecache
import sys
import sysconfig
import threading

from ..model.paths import display_path
from .frames import source_line


def _waiting_frame(frame):
    """The outermost frame of a blocking acquire: past threading's own frames (Semaphore.acquire
    is Python code that waits inside a Condition) to the line that asked for the lock."""
    while frame is not None and frame.f_code.co_filename == threading.__file__:
        frame = frame.f_back
    return frame


def held_by_own_stack(frame) -> str:
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


def held_by_suspended_task(loop, frame) -> str:
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
            line = source_line(frame.f_code.co_filename, frame.f_lineno)
    if waiting is None:
        return ""
    # The `with` statements the waiting thread is entering (`async with limiter.get():` whose
    # __aenter__ blocks): a task suspended inside the same statement holds what it waits for.
    entering = {line} - {""}
    caller = frame
    while caller is not None:
        text = source_line(caller.f_code.co_filename, caller.f_lineno)
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
    line = source_line(frame.f_code.co_filename, lineno or frame.f_lineno)
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
