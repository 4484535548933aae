"""The rules store: one small JSON document on disk, shared by every worker.

`_lock` keeps the threads apart, an flock on the lock file keeps the worker
processes apart, and load() and save() take both, so they are safe on their own.
"""
import contextlib
import fcntl
import json
import os
import threading
from pathlib import Path

_lock = threading.RLock()  # reentrant: update() holds it and calls load() and save()


@contextlib.contextmanager
def _file_locked(path):
    with open(f"{path}.lock", "a+") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


@contextlib.contextmanager
def guard(path):
    """Hold the document at `path`: no other thread or process writes it meanwhile."""
    with _lock, _file_locked(path):
        yield


def load(path) -> dict:
    """The document at `path` ({} if there is none yet)."""
    with _lock, _file_locked(path):
        try:
            return json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}


def save(path, doc: dict) -> None:
    """Write `doc` to `path` atomically (a reader never sees half a file)."""
    with _lock, _file_locked(path):
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
