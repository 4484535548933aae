"""The rules store: one small JSON document on disk, shared by every worker.

Threads of this process (the server's threadpool) and the other worker
processes of the pod may update the document at the same time, so `guard()`
excludes both: `_lock` for the threads, an flock on a lock file for the
processes. The lock file is opened once per process and kept open. An flock
belongs to the open file, so threads sharing that file are not kept apart by
it: that is what the thread lock is for.
"""
import contextlib
import fcntl
import json
import os
import threading
from pathlib import Path

# One lock per function: update() holds _lock through guard() and takes the
# other two in load() and save(), so no thread ever waits for a lock it holds.
_lock = threading.Lock()
_load_lock = threading.Lock()
_save_lock = threading.Lock()
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


def load(path) -> dict:
    """The document at `path` ({} if there is none yet)."""
    with _load_lock:
        try:
            return json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}


def save(path, doc: dict) -> None:
    """Write `doc` to `path` atomically (a reader never sees half a file)."""
    with _save_lock:
        tmp = Path(f"{path}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(doc, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)


def update(path, change) -> dict:
    """Read the document, let `change(doc)` edit it in place, write it back; returns it."""
    with guard(path):
        doc = load(path)
        change(doc)
        save(path, doc)
        return doc
