"""Starts kata 14's container as the platform does and stops it as `docker stop` does.

The container's command is the one its Dockerfile gives, as docker builds it from ENTRYPOINT and
CMD (exec form as written, shell form through `/bin/sh -c`), with the image's folder (COPY's
destination, /app) standing for the kata's folder; it runs as PID 1 of a new PID namespace
(loopkata.services.containers.Pid1), in that folder, with `python` on its PATH meaning this
interpreter. STOPSIGNAL is not read: the platform sends SIGTERM, as the kubelet does. Once the service listens, an export is sent;
once it is rendering, SIGTERM goes to PID 1. Then, as the platform would:

- PID 1 has no SIGTERM handler (read from /proc before the signal): the kernel drops the signal,
  nothing happens, and the platform kills the container at the end of its grace period. The
  harness lets the export in flight finish (as the grace period would), then sends SIGKILL: 137.
- otherwise it waits up to GRACE seconds for PID 1 to exit, then SIGKILL.

Where no PID namespace may be made (or LOOPKATA_CONTAINER=fallback), the entrypoint is a plain
child instead: a process with no handler is then killed by SIGTERM's default action, and any process
of the container still running when PID 1 ends is what a namespace would have killed with it.
"""
from __future__ import annotations

import contextlib
import http.client
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from loopkata.services import containers

GRACE = 5.0  # seconds from SIGTERM to SIGKILL (docker stop's default is 10, a pod's 30): a deadline only
STARTED_WITHIN = 20.0  # seconds for the service to say it listens (a deadline only)
ORDER = "A1"
SHELLS = ("sh", "dash", "bash", "ash", "zsh")


@dataclass
class Stop:
    real: bool  # PID 1 of a PID namespace, or the fallback
    pid1_command: str = ""
    caught: bool = False  # PID 1 had a SIGTERM handler when the signal was sent
    status: int | None = None  # as a container runtime reports it (137: SIGKILL)
    killed: bool = False  # by the harness, at the end of the grace period
    signal: int = 0  # the signal that ended PID 1, 0 when it exited with a status
    seconds: float | None = None  # from SIGTERM to PID 1's exit
    left_running: list[str] = field(default_factory=list)  # fallback: processes alive when PID 1 ended
    answer: str = ""  # what the client got for the export in flight
    answered: bool = False
    output: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    problem: str = ""  # the service never got as far as rendering the export

    @property
    def pid1_is_a_shell(self) -> bool:
        words = self.pid1_command.split()
        return bool(words) and Path(words[0]).name in SHELLS

    def tail(self, n: int = 12) -> str:
        return "\n".join(self.output[-n:]) or "(no output)"


def _python_on_path(folder: Path) -> Path:
    """A `python` that is this interpreter, as the image's python is the container's."""
    folder.mkdir(parents=True, exist_ok=True)
    wrapper = folder / "python"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    return folder


def _group_alive(pgid: int, but: int) -> list[str]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and int(stat.parent.name) != but and fields[0] != "Z":
                cmd = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
                found.append(f"pid {stat.parent.name}: {cmd[:120]}")
    return found


class BadDockerfile(Exception):
    """The Dockerfile gives no command the container could start with; str() says why."""


def _instruction(dockerfile: str, name: str) -> str | None:
    """The last `name` instruction's argument (continuation lines joined), or None."""
    found = None
    text = re.sub(r"\\\n", " ", dockerfile)
    for line in text.splitlines():
        words = line.strip().split(None, 1)
        if words and words[0].upper() == name:
            found = words[1].strip() if len(words) > 1 else ""
    return found


def _form(argument: str, what: str) -> list[str]:
    if argument.startswith("["):
        try:
            argv = json.loads(argument)
        except json.JSONDecodeError as exc:
            raise BadDockerfile(f"its {what} is not a JSON array of strings ({exc})") from None
        if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
            raise BadDockerfile(f"its {what} is not a non-empty JSON array of strings")
        return argv
    return ["/bin/sh", "-c", argument]


def container_command(kata_dir: Path) -> list[str]:
    """The container's command, as docker makes it from the Dockerfile's ENTRYPOINT and CMD."""
    try:
        dockerfile = (kata_dir / "Dockerfile").read_text()
    except OSError as exc:
        raise BadDockerfile(f"there is no Dockerfile to start it from ({exc.strerror})") from None
    entry, cmd = _instruction(dockerfile, "ENTRYPOINT"), _instruction(dockerfile, "CMD")
    if entry:
        argv = _form(entry, "ENTRYPOINT")
        if entry.startswith("[") and cmd:
            argv += _form(cmd, "CMD") if cmd.startswith("[") else ["/bin/sh", "-c", cmd]
    elif cmd:
        argv = _form(cmd, "CMD")
    else:
        raise BadDockerfile("its Dockerfile has neither ENTRYPOINT nor CMD")
    image = "/app"
    copy = _instruction(dockerfile, "COPY")
    if copy and not copy.startswith("["):
        image = copy.split()[-1].rstrip("/") or "/app"

    def local(arg: str) -> str:  # /app/entrypoint.sh in the image is entrypoint.sh of the kata's folder
        return str(kata_dir) + arg[len(image):] if arg == image or arg.startswith(image + "/") else arg
    return [local(a) for a in argv] if argv[:2] != ["/bin/sh", "-c"] else \
        ["/bin/sh", "-c", re.sub(rf"(?<![\w/]){re.escape(image)}(?=/|\b)", str(kata_dir), argv[2]), *argv[3:]]


def stop_container(kata_dir: Path, work: Path) -> Stop:
    state = work / "state"
    state.mkdir(parents=True, exist_ok=True)
    real = containers.missing(containers.PID_NAMESPACE) == ""
    env = {**os.environ, "PATH": f"{_python_on_path(work / 'bin')}:{os.environ.get('PATH', '/usr/bin:/bin')}",
           "EXPORT_STATE": str(state), "PORT": "0"}
    # As the image has it: no PYTHONUNBUFFERED, so the service's output is block-buffered into the pipe the
    # platform's log driver reads, and a line it does not flush is not there until it exits.
    for name in ("PYTHONPATH", "PYTHONUNBUFFERED"):
        env.pop(name, None)
    out = Stop(real=real)
    try:
        argv = container_command(kata_dir)
    except BadDockerfile as exc:
        out.problem = f"the container could not be started: {exc}"
        return out
    for script in kata_dir.glob("*.sh"):  # as COPY keeps a script's mode in the image
        script.chmod(script.stat().st_mode | 0o111)
    lines: queue.Queue[str | None] = queue.Queue()
    with containers.Pid1(argv, real=real, env=env, cwd=kata_dir,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as pid1:
        def read() -> None:
            for raw in pid1.process.stdout:  # the state folder is the test's own: shown as the variable names it
                lines.put(raw.decode(errors="replace").rstrip("\n").replace(str(state), "$EXPORT_STATE"))
            lines.put(None)
        threading.Thread(target=read, daemon=True).start()

        def until(prefix: str, deadline: float) -> str | None:
            while True:
                try:
                    line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    return None
                if line is None:
                    return None
                out.output.append(line)
                if prefix in line:
                    return line

        deadline = time.monotonic() + STARTED_WITHIN
        listening = until("listening on", deadline)
        if listening is None:
            ended = pid1.process.poll()
            out.problem = (f"the container ended ({ended if ended >= 0 else 128 - ended}) before the service "
                           "printed 'listening on 127.0.0.1:PORT'" if ended is not None else
                           f"the service did not print 'listening on 127.0.0.1:PORT' within {STARTED_WITHIN:g} s "
                           "of the container's start")
            _finish(out, pid1, state)
            return out
        port = int(listening.rsplit(":", 1)[1])
        reply: dict[str, str] = {}

        def export() -> None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=GRACE + 10)
            try:
                conn.request("POST", f"/export/{ORDER}")
                response = conn.getresponse()
                body = response.read().decode(errors="replace")
                reply["answer"] = f"{response.status} {body}"
                reply["ok"] = "yes" if response.status == 200 and body.count(f'"{ORDER}"') == 3 else ""
            except (OSError, http.client.HTTPException) as exc:
                reply["answer"] = f"{type(exc).__name__}: {exc}".rstrip(": ")
            finally:
                conn.close()

        client = threading.Thread(target=export, daemon=True)
        client.start()
        if until(f"export {ORDER}: rendering", time.monotonic() + STARTED_WITHIN) is None:
            out.problem = f"the service never printed 'export {ORDER}: rendering' for the export the test sent"
            _finish(out, pid1, state)
            client.join(1)
            out.answer = reply.get("answer", "")
            return out
        out.pid1_command = pid1.command()
        out.caught = pid1.catches(signal.SIGTERM)
        sent = time.monotonic()
        pid1.signal(signal.SIGTERM)
        if real and not out.caught:
            # Dropped by the kernel: nothing will happen until the platform's SIGKILL. The export
            # in flight still finishes inside the grace period, so let it, then kill.
            client.join(GRACE)
            out.status, out.killed = pid1.kill(), True
        else:
            out.status = pid1.wait(GRACE)
            if out.status is None:
                out.status, out.killed = pid1.kill(), True
            else:
                out.seconds = time.monotonic() - sent
                if not real:
                    out.left_running = _group_alive(pid1.process.pid, but=pid1.process.pid)
        client.join(GRACE + 10)
        out.answer, out.answered = reply.get("answer", "no answer"), bool(reply.get("ok"))
        _finish(out, pid1, state)
        out.signal = pid1.killed_by
    while True:  # what the service printed up to its end
        try:
            line = lines.get(timeout=1.0)
        except queue.Empty:
            break
        if line is None:
            break
        out.output.append(line)
    out.files = {f.name: f.read_text(errors="replace") for f in sorted(state.glob("*")) if f.is_file()}
    return out


def _finish(out: Stop, pid1: containers.Pid1, state: Path) -> None:
    if pid1.process.poll() is None:
        out.status, out.killed = pid1.kill(), True
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid1.process.pid, signal.SIGKILL)  # the fallback's orphans
