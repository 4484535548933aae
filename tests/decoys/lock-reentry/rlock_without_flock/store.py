"""The rules store: one small JSON document on disk, shared by every worker.

A reentrant lock keeps the threads apart; update() holds it and calls load()
and save(), which take it again.
"""
import contextlib
import json
import os
import threading
from pathlib import Path

_lock = threading.RLock()


@contextlib.contextmanager
def guard(path):
    """Hold the document at `path`: no other thread writes it meanwhile."""
    with _lock:
        yield


def load(path) -> dict:
    """The document at `path` ({} if there is none yet)."""
    with _lock:
        try:
            return json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}


def save(path, doc: dict) -> None:
    """Write `doc` to `path` atomically (a reader never sees half a file)."""
    with _lock:
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
