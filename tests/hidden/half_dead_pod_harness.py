"""What the hidden tests of kata 13 (half-dead-pod) serve and look at.

Run as a script, this file is the server: `uvicorn --workers 2 --factory` on
`drilled_app`, listening on a socket the test bound (its file descriptor is
the first argument), so that the port is the kernel's choice, fresh per test.
Each worker is a separate process (uvicorn spawns them) that loads the
package under test from $HALF_DEAD_IMPL, serves its `create_app()`, and adds
the drill's routes in front of it:

- `GET /_drill/freeze?seconds=S` holds the worker's event loop S seconds
  (a blocking sleep on the loop, as a blocking handler does);
- `GET /_drill/wait?seconds=S` waits S seconds without holding it.

Every worker writes what it does to the record file $HALF_DEAD_RECORD, one
JSON line each ("started", then "began" and "ended" around every drill, with
its pid and the system's monotonic clock): the tests decide from that record
and from /proc, never from how long something took.

On the test's side: `Pod` starts that server in a process group of its own
and always kills the group; `Pinned` is one keep-alive connection, and
`owner()` tells which process holds the server's end of it (the client's port,
then the server-side socket's inode in /proc/net/tcp*, then the process whose
/proc/PID/fd holds it).
"""
from __future__ import annotations

import asyncio
import contextlib
import http.client
import importlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs

import uvicorn

from loopkata.services.processes import die_with_parent

PACKAGE = "half_dead_service"  # the name the package under test gets in each worker
STARTED_WITHIN = 20.0  # seconds for both workers to serve (a deadline against a hang only)


# --- the server's side: runs in each uvicorn worker ---------------------------------------------

def _write_record(**event) -> None:
    line = json.dumps({"pid": os.getpid(), "at": time.monotonic(), **event}) + "\n"
    fd = os.open(os.environ["HALF_DEAD_RECORD"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())  # one write in append mode: lines of two workers never mix
    finally:
        os.close(fd)


def _load_service():
    path = Path(os.environ["HALF_DEAD_IMPL"])
    spec = importlib.util.spec_from_file_location(PACKAGE, path / "__init__.py",
                                                  submodule_search_locations=[str(path)])
    package = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = package
    spec.loader.exec_module(package)
    return importlib.import_module(f"{PACKAGE}.app")


async def _answer(send, status: int, payload: dict) -> None:
    body = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def drilled_app():
    """The factory uvicorn calls in each worker: the app under test, with the drill's routes in front."""
    die_with_parent(signal.SIGKILL)()  # a worker whose supervisor was killed goes with it
    inner = _load_service().create_app()
    _write_record(event="started")

    async def app(scope, receive, send):
        drill = scope["path"].removeprefix("/_drill/") if scope["type"] == "http" else ""
        if drill not in ("freeze", "wait"):
            await inner(scope, receive, send)
            return
        seconds = float(parse_qs(scope["query_string"].decode()).get("seconds", ["1"])[0])
        _write_record(event="began", drill=drill, seconds=seconds)
        if drill == "freeze":
            time.sleep(seconds)  # noqa: ASYNC251 - holds this worker's event loop, as a blocking handler does
        else:
            await asyncio.sleep(seconds)
        _write_record(event="ended", drill=drill, seconds=seconds)
        await _answer(send, 200, {"pid": os.getpid(), "drill": drill, "seconds": seconds})

    return app


def serve(fd: int) -> None:
    uvicorn.run(f"{Path(__file__).stem}:drilled_app", factory=True, fd=fd, workers=2,
                log_level="warning", access_log=False)


# --- the test's side ------------------------------------------------------------------------------

def socket_inodes(pid: int) -> set[int]:
    """The inodes of the sockets process `pid` holds open (none if it is gone)."""
    found = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    found.add(int(target[8:-1]))
    return found


def server_side_inode(server_port: int, client_port: int) -> int:
    """The inode of the server's end of the loopback connection from `client_port` (0 until accepted)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            next(f)
            for row in f:
                fields = row.split()
                local, remote = fields[1], fields[2]
                if int(local.rsplit(":", 1)[1], 16) == server_port and int(remote.rsplit(":", 1)[1], 16) == client_port:
                    return int(fields[9])
    return 0


def alive(pid: int) -> bool:
    """Is process `pid` running (not gone, not a zombie waiting to be reaped)?"""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:][:1] not in (b"Z", b"X")


def children(pid: int) -> list[int]:
    """The running processes whose parent is `pid`."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(f"/proc/{name}/stat", "rb") as f:
                    stat = f.read()
                fields = stat[stat.rfind(b")") + 2:].split()
                if int(fields[1]) == pid and fields[0] not in (b"Z", b"X"):
                    found.append(int(name))
    return found


class Pinned:
    """One keep-alive connection to the pod; `owner` is the worker pid that holds its server end."""

    def __init__(self, port: int, timeout: float):
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        self.conn.connect()
        self.client_port = self.conn.sock.getsockname()[1]
        self.owner: int | None = None

    def send(self, path: str) -> None:
        self.conn.request("GET", path)

    def answer(self) -> dict:
        response = self.conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise http.client.HTTPException(f"{response.status} {body[:200]!r}")
        return json.loads(body or b"{}")

    def get(self, path: str) -> dict:
        self.send(path)
        return self.answer()

    def close(self) -> None:
        self.conn.close()


class Pod:
    """`uvicorn --workers 2` serving the package at `impl`, in a process group of its own, killed on exit."""

    def __init__(self, impl: Path, folder: Path, freeze_limit: float | None = None):
        self.impl, self.folder, self.freeze_limit = Path(impl), Path(folder), freeze_limit
        self.record_file = self.folder / "record.jsonl"
        self.log_file = self.folder / "server.log"
        self.process: subprocess.Popen | None = None
        self.port = 0
        self.listening = 0  # the listening socket's inode: what every worker holds
        self.pinned: list[Pinned] = []

    def __enter__(self) -> Pod:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            listener.bind(("127.0.0.1", 0))
            listener.listen(128)
            self.port, self.listening = listener.getsockname()[1], os.fstat(listener.fileno()).st_ino
            env = {**os.environ, "HALF_DEAD_IMPL": str(self.impl), "HALF_DEAD_RECORD": str(self.record_file),
                   "PYTHONUNBUFFERED": "1"}
            env.pop("WORKER_FREEZE_LIMIT", None)
            if self.freeze_limit is not None:
                env["WORKER_FREEZE_LIMIT"] = str(self.freeze_limit)
            for name in ("LOOPKATA_RESULTS_FD", "LOOPKATA_STACKS_FD"):
                env.pop(name, None)
            with open(self.log_file, "wb") as log:
                self.process = subprocess.Popen(
                    [sys.executable, __file__, str(listener.fileno())], pass_fds=(listener.fileno(),),
                    cwd=Path(__file__).parent, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True, preexec_fn=die_with_parent(signal.SIGKILL),
                )
        finally:
            listener.close()  # the server holds its own copy
        return self

    def __exit__(self, *exc) -> None:
        for pinned in self.pinned:
            pinned.close()
        if self.process is not None:
            # The group: the supervisor, its workers and anything they started. Killed before the
            # supervisor is reaped, so its pid (the group's id) cannot have gone to a stranger.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    # --- what the pod is made of ---

    def workers(self) -> list[int]:
        """The supervisor's children that hold the listening socket: its workers, alive now."""
        return sorted(pid for pid in children(self.process.pid) if self.listening in socket_inodes(pid))

    def owner(self, pinned: Pinned) -> int | None:
        """The worker whose process holds the server's end of `pinned` (None until one has accepted it)."""
        inode = server_side_inode(self.port, pinned.client_port)
        if not inode:
            return None
        return next((pid for pid in self.workers() if inode in socket_inodes(pid)), None)

    def record(self) -> list[dict]:
        """Every line the workers have written so far."""
        with contextlib.suppress(FileNotFoundError):
            return [json.loads(line) for line in self.record_file.read_text().splitlines() if line.strip()]
        return []

    def drills(self, drill: str, event: str = "began") -> list[dict]:
        return [r for r in self.record() if r.get("drill") == drill and r["event"] == event]

    def log(self) -> str:
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""

    def died(self) -> str:
        """Why the server has stopped, in words, or '' while it runs."""
        if self.process.poll() is None:
            return ""
        tail = "\n".join(self.log().strip().splitlines()[-8:])
        return f"the server exited with status {self.process.returncode}; its log ends:\n{tail}"

    # --- driving it ---

    def pin(self, timeout: float = 30.0) -> Pinned:
        """A new keep-alive connection, answered once (GET /health), with its owner found."""
        pinned = Pinned(self.port, timeout)
        self.pinned.append(pinned)
        pinned.get("/health")
        pinned.owner = self.owner(pinned)
        return pinned

    def ready(self, within: float = STARTED_WITHIN) -> dict[int, list[Pinned]]:
        """Wait until both workers serve: keep connecting until each owns a connection; pid -> its connections."""
        deadline = time.monotonic() + within
        owned: dict[int, list[Pinned]] = {}
        while time.monotonic() < deadline:
            if self.died():
                raise RuntimeError(f"expected uvicorn --workers 2 to serve create_app(), but {self.died()}")
            workers = self.workers()
            if len(workers) == 2:
                with contextlib.suppress(OSError, http.client.HTTPException):
                    pinned = self.pin()
                    if pinned.owner is not None:
                        owned.setdefault(pinned.owner, []).append(pinned)
                if set(owned) >= set(workers):
                    return {pid: owned[pid] for pid in workers}
            time.sleep(0.01)
        raise RuntimeError(f"expected both workers of uvicorn --workers 2 to serve within {within:g} s, but the ones "
                           f"that answered were {sorted(owned) or 'none'}; the server's log:\n{self.log()[-2000:]}")


def wait_until(condition, seconds: float, every: float = 0.01):
    """condition()'s first true value within `seconds` (a deadline against a hang), else its last value."""
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(every)


if __name__ == "__main__":
    serve(int(sys.argv[1]))
