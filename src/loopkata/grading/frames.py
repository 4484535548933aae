"""Where a learner's code is: stack frames trimmed to the implementation under test, as lines to read.

`describe_frames` turns (file, line, function) frames into "katas/x.py:42 in step: async with sem:";
the grader's reports, the hang guard and the hidden tests' own crash reports all use it.
"""
from __future__ import annotations

import asyncio
import linecache
import os
import traceback
from pathlib import Path

from ..model.paths import display_path


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


def source_line(filename: str, lineno: int | None) -> str:
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
        f"{display_path(fn)}:{line} in {func}: {source_line(fn, line)}"
        for fn, line, func in chosen
    ]


def frames_of(frame) -> list[tuple[str, int, str]]:
    return [(f.filename, f.lineno, f.name) for f in traceback.extract_stack(frame)]


def task_frames(task: asyncio.Task) -> list[tuple[str, int, str]]:
    """The task's whole await chain, outermost first (Task.get_stack shows only the top)."""
    out, coro = [], task.get_coro()
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:
            break
        out.append((frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name))
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return out
