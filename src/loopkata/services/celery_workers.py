"""Real Celery workers, started from a deploy file's own command line and always stopped.

A worker runs in a process group of its own, is told to die with the process
that started it (Linux's parent-death signal), and is killed with its whole
group on stop: a worker that outlived a test would go on consuming the next
test's messages. By default the broker is kombu's filesystem transport in a
folder the caller owns (no server); set CELERY_BROKER_URL (e.g. Redis) to use
a real broker instead.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from ..scan.celery_routes import celery_args
from .processes import die_with_parent, ended

READY_TIMEOUT = 15.0
# What makes a worker quick to start and stop; queue options are the deploy file's own.
FAST = ["--pool=solo", "--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel=INFO"]


class WorkerError(Exception):
    """A worker did not start; str() says which command and what it printed."""


def broker_env(folder: Path) -> dict:
    """The environment that points an app at a broker: $CELERY_BROKER_URL, else files in `folder`.

    For the broker of files, messages this process publishes are written whole before they
    appear in the folder (see `publish_whole_files`)."""
    if os.environ.get("CELERY_BROKER_URL"):
        return {}
    publish_whole_files()
    return {"CELERY_BROKER_URL": "filesystem://", "CELERY_BROKER_FOLDER": str(folder), "CELERY_RESULT_BACKEND": ""}


def publish_whole_files() -> None:
    """Make kombu's broker of files publish each message atomically, in this process.

    kombu creates a message's file under its final name and writes it afterwards; a worker
    polling the folder at that moment takes the empty file, fails to decode it and drops the
    message, whose task then stays PENDING for ever. On a busy machine that window is wide
    enough to lose tasks now and then. A real broker hands over whole messages: here the file
    is written under a name no queue matches, then renamed into place."""
    try:
        from kombu.transport import filesystem
    except ImportError:
        return
    channel = filesystem.Channel
    if getattr(channel._put, "whole_files", False):
        return

    def _put(self, queue, payload, **kwargs):
        name = f"{round(time.monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = os.path.join(self.data_folder_out, f".partial-{name}")  # "partial-...": no queue's name
        try:
            with open(partial, "wb") as f:
                f.write(filesystem.str_to_bytes(filesystem.dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            raise filesystem.ChannelError(f"Cannot add file {final!r} to directory") from exc

    _put.whole_files = True
    channel._put = _put


class Worker:
    """One running worker; `lines` is everything it has printed so far."""

    def __init__(self, command: str, process: subprocess.Popen):
        self.command, self.process, self.lines = command, process, []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if any(line.endswith(" ready.") for line in self.lines):
                return
            if ended(self.process.pid) is not None:  # not reaped: stop() still kills our group, no other
                self._reader.join(1)
                break
            time.sleep(0.02)
        tail = "\n".join(f"    {line}" for line in self.lines[-6:]) or "    (nothing)"
        self.stop()
        state = "exited" if self.process.returncode != -signal.SIGKILL else "was not ready in time"
        raise WorkerError(f"the worker started with `{self.command}` {state}; it printed:\n{tail}")

    def queues(self) -> set[str] | None:
        """The queues the worker says it consumes (its start-up banner), or None if it did not say."""
        found, inside = set(), False
        for line in self.lines:
            if "[queues]" in line:
                inside = True
            elif inside and ".>" in line and "exchange=" in line:
                found.add(line.split(".>", 1)[1].split()[0])
            elif inside and found and not line.strip():
                break
        return found or None

    def stop(self) -> None:
        """Kill the worker and everything in its process group at once (SIGTERM takes seconds).

        The worker is reaped only here, after the kill: a reaped pid is soon given to another
        process, and a group kill by that id could stop a stranger (another test's server)."""
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


def start(command: str | list, *, pythonpath: Path, env: dict, name: str = "worker", wait: bool = True) -> Worker:
    """Start the worker a deploy file's `command` describes, with FAST options added (and wait until it is ready)."""
    args = celery_args(command)
    shown = command if isinstance(command, str) else " ".join(map(str, command))
    if args is None:
        raise WorkerError(f"`{shown}` does not start a Celery worker")
    full_env = {**os.environ, **env, "PYTHONPATH": str(pythonpath), "PYTHONUNBUFFERED": "1", "NO_COLOR": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", *args, *FAST, f"--hostname={name}.{os.getpid()}@%h"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
        start_new_session=True, preexec_fn=die_with_parent(signal.SIGKILL), env=full_env, cwd=pythonpath,
    )
    worker = Worker(shown, process)
    if wait:
        worker.wait_ready()
    return worker


@contextlib.contextmanager
def running(commands, *, pythonpath: Path, env: dict, own_env: list[dict] | None = None):
    """Start every command's worker; stop them all on the way out, whatever happened.

    `own_env`: per command, variables its deploy file gives that worker alone (added to `env`)."""
    workers: list[Worker] = []
    try:
        # One after another, each ready before the next starts: kombu's broker of files creates
        # an exchange's binding file empty and fills it afterwards, and a second worker binding
        # the same exchange at that moment reads nothing and exits (JSONDecodeError).
        for n, command in enumerate(commands):
            extra = own_env[n] if own_env else {}
            workers.append(start(command, pythonpath=pythonpath, env={**env, **extra}, name=f"worker{n}"))
        yield workers
    finally:
        for worker in workers:
            worker.stop()
