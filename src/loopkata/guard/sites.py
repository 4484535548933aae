"""Where in the team's code something happened: the frames that are neither Python's own library nor the guard's.

Installed packages (site-packages) are passed over too when a frame of the
team's own code is further out: "the line that made it" is the team's line
that called aiohttp, not aiohttp's line that called asyncio.
"""
from __future__ import annotations

import os
import sys
import sysconfig
import types

_STDLIB = tuple({os.path.realpath(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "platstdlib")})
_GUARD = os.path.dirname(os.path.abspath(__file__)) + os.sep
_INSTALLED = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)
_BUILTIN = ("<frozen ",)
_TYPED_IN = ("<string>", "<stdin>", "<ipython-input")  # -c, exec, a notebook's cells: the team's
_ENVIRONMENT = tuple({os.path.realpath(p) + os.sep for p in (sys.prefix, sys.base_prefix)})  # a venv's bin/pytest

Frame = tuple[str, int, str]  # (file, line, function)

_kinds: dict[str, int] = {}  # filename -> 0 the team's, 1 an installed package's, 2 Python's or the guard's,
# 3 code generated at run time by a library


def _kind(filename: str) -> int:
    kind = _kinds.get(filename)
    if kind is None:
        real = os.path.realpath(filename) if not filename.startswith("<") else filename
        if real.startswith(_GUARD) or filename.startswith(_BUILTIN):
            kind = 2
        elif filename.startswith("<") and not filename.startswith(_TYPED_IN):
            kind = 3  # code a library generated ("<sqlalchemy generated ... wrapper>"): a line of no file
        elif any(part in real for part in _INSTALLED):  # before the stdlib: a venv's site-packages is inside
            kind = 1                                      # what sysconfig calls its platstdlib
        elif real.startswith(_STDLIB):
            kind = 2
        elif real.startswith(_ENVIRONMENT):
            kind = 1  # a venv's bin/pytest
        else:
            kind = 0
        _kinds[filename] = kind
    return kind


def frames_of(frame: types.FrameType | None, depth: int = 40) -> list[Frame]:
    """`frame` and its callers, innermost first, at most `depth` of them."""
    out = []
    while frame is not None and len(out) < depth:
        out.append((frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name))
        frame = frame.f_back
    return out


def here(skip: int = 1, depth: int = 40) -> list[Frame]:
    """The caller's stack, innermost first (skipping `skip` frames of the guard's own)."""
    return frames_of(sys._getframe(skip + 1), depth)


def caller(skip: int = 1) -> str:
    """The file of the first frame outside the guard, from the caller's caller on (skipping `skip` frames)."""
    frame = sys._getframe(skip + 1)
    while frame is not None and frame.f_code.co_filename.startswith(_GUARD):
        frame = frame.f_back
    return frame.f_code.co_filename if frame is not None else ""


def ours(frames: list[Frame], limit: int = 3) -> list[Frame]:
    """Of `frames` (innermost first), the innermost `limit` of the team's own; else of installed packages;
    else of code they generated; else whatever there is outside the guard."""
    for wanted in (0, 1, 3):
        picked = [f for f in frames if _kind(f[0]) == wanted]
        if picked:
            return picked[:limit]
    return [f for f in frames if not f[0].startswith(_GUARD)][:limit]


def show(frame: Frame) -> str:
    """'file:line in function': an installed package's file from its package folder (sqlalchemy/pool/base.py),
    any other relative to the current folder where it is below it."""
    file, line, func = frame
    for part in _INSTALLED:
        if part in file:
            return f"{file.split(part, 1)[1]}:{line} in {func}"
    try:
        rel = os.path.relpath(file)
        file = rel if not rel.startswith("..") else file
    except ValueError:
        pass
    return f"{file}:{line} in {func}"


def made_at(skip: int = 1, limit: int = 3, pythons_own: bool = True) -> list[str]:
    """'file:line in function' of the team's lines that led here, innermost first; without `pythons_own`,
    [] where no line outside Python's own library led here (a loop uvicorn's asyncio made, say)."""
    frames = ours(here(skip + 1), limit)
    if not pythons_own:
        frames = [f for f in frames if _kind(f[0]) != 2]
    return [show(f) for f in frames]


def raised_at(exc: BaseException) -> list[str]:
    """'raised at file:line in function' for the team's lines in `exc`'s traceback, innermost first."""
    tb, frames = exc.__traceback__, []
    while tb is not None:
        frames.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno, tb.tb_frame.f_code.co_name))
        tb = tb.tb_next
    return [f"raised at {show(f)}" for f in ours(list(reversed(frames)))]


def is_pythons_own(filename: str) -> bool:
    """Is `filename` Python's own library (or the guard)?"""
    return _kind(filename) == 2


def is_teams(filename: str) -> bool:
    """Is `filename` the team's own code (not Python's, not an installed package's, not the guard's)?"""
    return bool(filename) and _kind(filename) == 0
