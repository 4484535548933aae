"""The guard in a child process of a guarded run: settings from the parent, findings written as they happen.

The parent (the pytest plugin or `loopkata guard -- COMMAND`) sets
LOOPKATA_GUARD_CHILD to {"settings": ..., "share": folder} and puts `boot/`
first on PYTHONPATH; `boot/sitecustomize.py` calls `start()`. Each finding is
appended to share/findings-<pid>.jsonl at once: a child is often ended with a
signal, and nothing written at exit would survive that.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from .config import ConfigError, Settings, apply
from .core import Guard

ENV = "LOOPKATA_GUARD_CHILD"
BOOT = Path(__file__).resolve().parent / "boot"

_guard: Guard | None = None


def environment(settings_table: dict, share: Path, env: dict) -> dict:
    """`env` with what a child needs to guard itself."""
    out = dict(env)
    out[ENV] = json.dumps({"settings": settings_table, "share": str(share)})
    path = out.get("PYTHONPATH", "")
    out["PYTHONPATH"] = str(BOOT) + (os.pathsep + path if path else "")
    return out


def start() -> None:
    global _guard
    if _guard is not None:
        return
    try:
        given = json.loads(os.environ[ENV])
        settings = apply(Settings(), given["settings"], "the guarded parent's settings")
        share = Path(given["share"])
    except (KeyError, ValueError, TypeError, ConfigError) as exc:
        print(f"loopkata guard: this child process runs unguarded: {ENV} cannot be used ({exc})", file=sys.stderr)
        return
    if not share.is_dir():
        return  # the parent has finished: nothing would read what this child finds
    guard = Guard(settings, share, is_child=True)
    path = share / f"findings-{os.getpid()}.jsonl"
    add = guard.collector.add

    def add_and_write(finding) -> None:
        add(finding)
        if finding.code in settings.selected:
            try:
                with open(path, "a", encoding="utf-8") as out:
                    out.write(json.dumps(finding.as_dict()) + "\n")
            except OSError:
                pass  # the parent removed the folder: it no longer listens
    guard.collector.add = add_and_write
    guard.install()
    _guard = guard
