"""The rules store: one small JSON document on disk, shared by every worker.

`guard()` keeps out the other threads (`_lock`) and the other processes (an
flock on a lock file opened once per process; an flock belongs to the open
file, so it does not keep apart the threads sharing it).
"""
import contextlib
import fcntl
import json
import os
import threading
from pathlib import Path

_lock = threading.Lock()
_lock_files = {}  # str(path) -> this process's open lock file for it


def _lock_file(path):
    key = str(path)
    if key not in _lock_files:
        _lock_files[key] = open(f"{path}.lock", "a+")  # noqa: SIM115 - kept for the process's life
    return _lock_files[key]


@contextlib.contextmanager
def guard(path):
    """Hold the document at `path`: no other thread or process writes it meanwhile."""
    with _lock:
        lock_file = _lock_file(path)
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


# The helpers take no lock: call them only inside guard(). _lock is not
# reentrant, so nothing called under guard() may take it again.
def _read(path) -> dict:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}


def _write(path, doc: dict) -> None:
    tmp = Path(f"{path}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


def load(path) -> dict:
    """The document at `path` ({} if there is none yet)."""
    with guard(path):
        return _read(path)


def save(path, doc: dict) -> None:
    """Write `doc` to `path` atomically (a reader never sees half a file)."""
    with guard(path):
        _write(path, doc)


def update(path, change) -> dict:
    """Read the document, let `change(doc)` edit it in place, write it back; returns it."""
    with guard(path):
        doc = _read(path)
        change(doc)
        _write(path, doc)
        return doc
