"""What several labs share: scratch folders, a decoy laid over a starter, a coroutine run off the
kernel's thread, and how a child process ended.

- `scratch(prefix)`: a new folder inside this kernel's workspace, removed when the kernel exits.
- `decoy_files(kata, decoy, prefix)`: a folder holding the files where the kata's decoy (a wrong
  fix, named by kata and name) differs from the reference fix; `decoy_over(code, kata, decoy,
  prefix)`: a copy of the package `code` with those files laid over it.
- `in_a_thread(coro_fn, timeout)`: `asyncio.run(coro_fn())` on a thread of its own, for
  the kernel, whose own thread already runs an event loop.
- `forked_run(target, args, env, preload, timeout)`: `target(*args)` in a process forked from
  a fork server that imported `preload` once, killed with all it started at its deadline.
- `ended(out)`: how a process run (loopkata's Outcome) ended, in a few words.
"""
from __future__ import annotations

import asyncio
import atexit
import multiprocessing
import multiprocessing.forkserver
import os
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path

from loopkata.grading.repro import Outcome
from loopkata.grading.supervise import kill_group_of
from loopkata.learner import progress
from loopkata.model import alternatives, catalogue

_workspace: list[Path] = []


def scratch(prefix: str) -> Path:
    """A new folder named from `prefix`, inside one workspace per kernel that goes when the kernel exits."""
    if not _workspace:
        _workspace.append(Path(tempfile.mkdtemp(prefix="loopkata-labs-")))
        atexit.register(shutil.rmtree, _workspace[0], ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=_workspace[0]))


def decoy_files(kata: str, decoy: str, prefix: str = "") -> Path:
    """A new folder holding the files where the decoy `decoy` of kata `kata` differs from the reference fix."""
    found = catalogue.find(kata)
    folder = scratch(prefix + decoy + "-")
    own = alternatives.own_files(found, alternatives.find(found, "decoy", decoy), progress.starter_snapshots())
    for rel, text in own.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")
    return folder


def decoy_over(code: Path, kata: str, decoy: str, prefix: str) -> Path:
    """A copy of the package `code` with the files where kata `kata`'s decoy `decoy` differs from the
    reference fix laid over it."""
    folder = scratch(prefix + decoy + "-") / Path(code).name
    shutil.copytree(code, folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(decoy_files(kata, decoy, prefix), folder, dirs_exist_ok=True)
    return folder


def in_a_thread(coro_fn, timeout=30.0):
    """Run `coro_fn()` with asyncio.run on a thread of its own (the kernel's thread has a loop)."""
    box = {}

    def run():
        try:
            box["result"] = asyncio.run(asyncio.wait_for(coro_fn(), timeout))
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout + 1)
    if "error" in box:
        raise box["error"]
    if "result" not in box:
        raise TimeoutError(f"no answer in {timeout:g} s")
    return box["result"]


def ended(out) -> str:
    """How a run that gave no result ended: the signal that killed it, a deadline, or its exit status."""
    if out.crashed:
        return signal.Signals(-out.returncode).name
    return "still running at the deadline" if out.hung else f"exit {out.returncode}"


_FORKS = multiprocessing.get_context("forkserver")
_starting = threading.Lock()


def _forked_child(target, args: tuple, env: dict, out: str, err: str) -> None:
    os.setsid()  # a group of its own, killed whole at the end
    for fd, path in ((1, out), (2, err)):
        opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 - line by line: the run ends with os._exit
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    os.environ.update(env)
    target(*args)


def forked_run(target, args: tuple, env: dict, preload: list[str], timeout: float = 30.0) -> Outcome:
    """Run `target(*args)` in a process forked from the fork server (which imported `preload` once);
    what it printed and how it ended. `target` is a module-level function the fork server can import."""
    with tempfile.TemporaryDirectory(prefix="loopkata-labs-") as tmp:
        out, err = Path(tmp, "out"), Path(tmp, "err")
        with _starting:
            _FORKS.set_forkserver_preload(preload)
            process = _FORKS.Process(target=_forked_child, args=(target, args, env, str(out), str(err)), daemon=False)
            process.start()
        try:
            process.join(timeout)
            hung = process.exitcode is None
        finally:
            kill_group_of(process.pid, ended=process.exitcode is not None)
            process.join()
        text = [p.read_text(errors="replace") if p.exists() else "" for p in (out, err)]
    return Outcome(stdout=text[0], stderr=text[1], returncode=None if hung else process.exitcode)


def _stop_fork_server() -> None:
    server = getattr(multiprocessing.forkserver, "_forkserver", None)
    stop = getattr(server, "_stop", None)  # private, present on 3.11-3.13; without it the server exits with us
    if stop is not None:
        stop()


atexit.register(_stop_fork_server)
