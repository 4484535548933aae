"""Which files a scan reads, and reading each of them within bounds.

A team's tree may hold anything: a folder nobody may list, a generated module of
megabytes, a FIFO or a device where a file was expected, bytes that are not UTF-8.
Each of those is one reason (a `Skipped`, or one warning from `find`), and the
scan goes on with the other files.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

from . import celery_routes, pid1_rules

SKIPPED_FOLDERS = {".git", ".hg", ".venv", "venv", "node_modules", "__pycache__", ".tox", ".nox",
                   ".mypy_cache", ".ruff_cache", ".pytest_cache", "build", "dist", ".ipynb_checkpoints"}
# Parsing Python costs about 200 times the text in memory (a 2 MB module peaks near 450 MB),
# and the largest hand-written modules of big projects stay under 1 MB.
PYTHON_LIMIT = 2 * 1024 * 1024
# A deploy file is written by hand; one larger than this is data, not a list of processes.
DEPLOY_LIMIT = 256 * 1024


class Skipped(Exception):
    """A file the scan did not read; str() is the reason, for a warning line."""


def wanted(path: Path) -> bool:
    """Is this a file the scan reads when it meets it in a folder?"""
    return path.suffix == ".py" or celery_routes.is_deploy_file(path) or pid1_rules.is_container_file(path)


def limit(path: Path) -> int:
    return DEPLOY_LIMIT if path.suffix != ".py" and (celery_routes.is_deploy_file(path) or
                                                     pid1_rules.is_container_file(path)) else PYTHON_LIMIT


def _size(n: int) -> str:
    return f"{n / 1024 / 1024:.1f} MB" if n >= 1024 * 1024 else f"{n / 1024:.0f} KB"


def _kind(path: Path) -> str:
    if limit(path) == DEPLOY_LIMIT:
        return "a deploy file"
    return "a Python file" if path.suffix == ".py" else "a file"


def _listing(folder: Path) -> list[os.DirEntry]:
    with os.scandir(folder) as entries:
        return sorted(entries, key=lambda e: e.name)


def find(paths: list[Path]) -> tuple[list[Path], list[str]]:
    """The files to scan under `paths` (a file given by name is always read), and one warning
    per folder or entry that could not be looked at. Symlinked folders are not entered (a
    link to a parent would loop), and the walk keeps its own stack, so depth costs no recursion."""
    found, problems = [], []
    for top in paths:
        if top.is_file():
            found.append(top)
            continue
        if not top.is_dir():
            problems.append(f"{top}: not scanned (neither a regular file nor a folder)")
            continue
        under, folders = [], [top]
        while folders:
            folder = folders.pop()
            try:
                entries = _listing(folder)
            except OSError as exc:
                problems.append(f"{folder}: folder not read ({exc.strerror or exc}), so nothing under it was scanned")
                continue
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name not in SKIPPED_FOLDERS and not entry.name.endswith(".egg-info"):
                            folders.append(Path(entry.path))
                    elif entry.is_file() and wanted(Path(entry.name)):
                        under.append(Path(entry.path))
                except OSError as exc:
                    problems.append(f"{entry.path}: not read ({exc.strerror or exc})")
        found += sorted(under)
    return found, problems


def read(path: Path) -> str:
    """The file's text, or Skipped saying why not: unreadable, not a regular file, over its size
    limit, or not UTF-8. Never reads more than the limit, whatever the file claims to be."""
    most = limit(path)
    try:
        # O_NONBLOCK: a FIFO put where a file was expected must not stop the scan at open()
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise Skipped(f"not read ({exc.__class__.__name__}: {exc.strerror or exc})") from exc
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise Skipped("not read (not a regular file)")
        if info.st_size > most:
            raise Skipped(f"skipped: {_size(info.st_size)} is over the {_size(most)} limit for {_kind(path)}")
        try:
            data = f.read(most + 1)
        except OSError as exc:
            raise Skipped(f"not read ({exc.__class__.__name__}: {exc.strerror or exc})") from exc
    if len(data) > most:  # it grew since fstat
        raise Skipped(f"skipped: it is over the {_size(most)} limit for {_kind(path)}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Skipped(f"not read (not UTF-8: {exc.reason} at byte {exc.start})") from exc
