"""The rules store: one small JSON document on disk, shared by every worker.

The flock on the lock file keeps the worker processes apart; the thread lock
that deadlocked is gone.
"""
import contextlib
import fcntl
import json
import os
from pathlib import Path

_lock_files = {}  # str(path) -> this process's open lock file for it


def _lock_file(path):
    key = str(path)
    if key not in _lock_files:
        _lock_files[key] = open(f"{path}.lock", "a+")  # noqa: SIM115 - kept for the process's life
    return _lock_files[key]


@contextlib.contextmanager
def guard(path):
    """Hold the document at `path`: no other process writes it meanwhile."""
    lock_file = _lock_file(path)
    fcntl.flock(lock_file, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(lock_file, fcntl.LOCK_UN)


def load(path) -> dict:
    """The document at `path` ({} if there is none yet)."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}


def save(path, doc: dict) -> None:
    """Write `doc` to `path` atomically (a reader never sees half a file)."""
    tmp = Path(f"{path}.{os.getpid()}.{id(doc)}.tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


def update(path, change) -> dict:
    """Read the document, let `change(doc)` edit it in place, write it back; returns it."""
    with guard(path):
        doc = load(path)
        change(doc)
        save(path, doc)
        return doc
