"""What the hidden tests of kata 13 (half-dead-pod) serve and look at.

Run as a script, this file is the server: `uvicorn --workers N --factory` on
`drilled_app` (N from $HALF_DEAD_WORKERS, 2 unless set), listening on a socket the test bound (its file descriptor is
the first argument, the test's pid the second), so that the port is the
kernel's choice, fresh per pod.
Each worker is a separate process (uvicorn spawns them) that loads the
package under test from $HALF_DEAD_IMPL, serves its `create_app()`, and adds
the drill's routes in front of it:

- `GET /_drill/freeze?seconds=S` holds the worker's event loop S seconds
  (a blocking sleep on the loop, as a blocking handler does); with
  `&release=NAME`, only until the test creates the file NAME beside the record;
  with `&times=N&gap=G`, N times, the loop free for G seconds between two holds;
  with `&step=S`, the worker's wall clock (`time.time()`) steps S seconds
  forward as each hold begins, as NTP or a resumed VM steps a host's clock
  (the monotonic clock goes on as before); with `&in=c`, the hold is a wait
  inside C with Python's lock let go (a mutex taken twice through ctypes), as a
  C extension's blocking call holds a loop: no Python signal handler runs on
  the loop's thread until it ends; with `&in=cpu`, the hold is Python code
  that runs on the loop's thread, on a CPU all the while (a handler computing);
- `GET /_drill/wait?seconds=S` waits S seconds without holding it; with
  `&status=N` it then answers status N; with `&sick=1` the worker answers
  /health with 500 while it waits, and the wait ends (S is then a deadline)
  once one /health has been answered so;
- `GET /_drill/crash` ends the worker, its connections reset (SO_LINGER 0, as
  the kernel resets a connection whose data was never read): every connection
  it holds, the one of this request too, breaks in a ConnectionResetError on
  the client's side. It first holds the loop until another of its connections
  has a request waiting (CRASH_ASKED_WITHIN at most), as a worker that dies
  busy has requests in flight.

A worker records each connection it sees ("connected", with the client's
port), so that the tests can count the drill's connections. With
$HALF_DEAD_STRANGERS set (to the pod's port), each worker, before it answers a connection's first
request, makes two more connections on the host whose client's port number is
that connection's client's port (from 127.0.0.2 and 127.0.0.3, to listeners of
its own on a port below and a port above the pod's): rows of /proc/net/tcp whose remote
port is the drill's own, as any connection to a peer on that port number
makes on a busy host; and, in one worker, connections to the pod's port number
on [::1] (another service on another address) from client ports below and
above the range the kernel picks a client's port from: rows of
/proc/net/tcp6 whose local port is the pod's and whose remote port is not the
drill's.

Every worker writes what it does to the record file $HALF_DEAD_RECORD, one
JSON line each ("started", then "began" and "ended" around every drill, with
its pid and the system's monotonic clock): the tests decide from that record
and from /proc, never from how long something took. Its event loop also
stamps the monotonic clock into `beat-<pid>` beside the record every
BEAT_EVERY seconds, so that once a worker has exited the tests know how long
before its loop last turned: a worker killed while its loop turned is a
wrong watchdog's doing, one whose loop a busy machine held past its limit is not.

On the test's side: `Pod` starts that server in a process group of its own
and always kills the group; `Pinned` is one keep-alive connection, and
`owner()` tells which process holds the server's end of it (the client's port,
then the server-side socket's inode in /proc/net/tcp*, then the process whose
/proc/PID/fd holds it). `Pods` lets the tests of a module share pods: a pod
takes about a second to boot (three Python processes, two of them importing
FastAPI), most of what a test costs, so a test that leaves its pod as it found
it (the same two workers, no drill running) hands it to the next test with the
same freeze limit; `Ahead` runs a test that only waits for the workers on a
thread of its own while earlier tests run.
"""
from __future__ import annotations

import asyncio
import contextlib
import ctypes
import fcntl
import http.client
import importlib
import importlib.util
import itertools
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path
from urllib.parse import parse_qs

from loopkata.services.processes import die_with_parent

PACKAGE = "half_dead_service"  # the name the package under test gets in each worker
STARTED_WITHIN = 20.0  # seconds for both workers to serve (a deadline against a hang only)
BEAT_EVERY = 0.05  # seconds between two stamps of a worker's loop in its beat file
SAME_PORT_PEERS = 8  # connections on [::1] to the pod's port number, from client ports below and above the drill's
CRASH_ASKED_WITHIN = 0.2  # seconds, at most, /_drill/crash waits for a request on another connection before it dies


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


def _hold_the_loop(seconds: float, release: str) -> None:
    """Block this worker's event loop, as a blocking handler does: `seconds`, or until the file `release` exists."""
    until = time.monotonic() + seconds
    flag = Path(os.environ["HALF_DEAD_RECORD"]).with_name(Path(release).name) if release else None
    while (left := until - time.monotonic()) > 0 and not (flag and flag.exists()):
        time.sleep(min(left, 0.01) if flag else left)  # blocking, on the loop: the point


def _hold_the_loop_in_c(seconds: float, release: str) -> None:
    """Block this worker's event loop inside C, with Python's lock let go, as a C extension's blocking call does: a
    mutex taken twice (ctypes lets go of Python's lock around the call), which a thread of the worker unlocks once
    `seconds` have passed or the file `release` exists. A wait on a mutex is not cut short by a signal: no Python
    signal handler runs on the loop's thread until the hold ends; another thread, or the kernel, can still act."""
    libc = ctypes.CDLL(None)
    mutex = ctypes.create_string_buffer(64)  # zeroed: PTHREAD_MUTEX_INITIALIZER, a plain mutex (glibc's is 40 bytes)
    libc.pthread_mutex_lock(mutex)

    def let_go() -> None:
        _hold_the_loop(seconds, release)  # on this thread, not the loop's
        libc.pthread_mutex_unlock(mutex)  # a plain mutex: any thread may unlock it

    threading.Thread(target=let_go, name="let the hold in C go", daemon=True).start()
    libc.pthread_mutex_lock(mutex)  # the hold: taken already, so this waits in C
    libc.pthread_mutex_unlock(mutex)


def _hold_the_loop_running(seconds: float, release: str) -> None:
    """Block this worker's event loop with work, as a handler that computes for too long does: Python code that runs
    on the loop's thread, on a CPU all the while, `seconds` or until the file `release` exists."""
    until = time.monotonic() + seconds
    flag = Path(os.environ["HALF_DEAD_RECORD"]).with_name(Path(release).name) if release else None
    spins = 0
    while time.monotonic() < until:
        spins += 1
        if flag and spins % 10_000 == 0 and flag.exists():
            return


def _beat_file(record: Path, pid: int) -> Path:
    return Path(record).with_name(f"beat-{pid}")


def _start_beating() -> None:
    """Stamp the monotonic clock into this worker's beat file from its event loop, every BEAT_EVERY s."""
    loop = asyncio.get_running_loop()
    fd = os.open(_beat_file(os.environ["HALF_DEAD_RECORD"], os.getpid()), os.O_WRONLY | os.O_CREAT, 0o600)

    def beat() -> None:
        os.pwrite(fd, f"{time.monotonic():24.6f}".encode(), 0)  # same width each time: one whole number
        loop.call_later(BEAT_EVERY, beat)

    beat()


def _step_the_wall_clock(seconds: float) -> None:
    """From now on, time.time() in this worker answers `seconds` later than the real wall clock."""
    real = getattr(time.time, "real", time.time)

    def stepped() -> float:
        return real() + seconds

    stepped.real = real
    time.time = stepped


def _connections() -> list[socket.socket]:
    """A copy (a new descriptor) of each TCP connection this worker holds; the listening socket left out."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError, ValueError):
            if not os.readlink(f"/proc/self/fd/{fd}").startswith("socket:["):
                continue
            sock = socket.socket(fileno=os.dup(int(fd)))
            try:
                if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM:
                    sock.getpeername()  # connected ones only
                    found.append(sock)
                    continue
            except OSError:
                pass
            sock.close()
    return found


def _unread(sock: socket.socket) -> int:
    """How many bytes a client has sent on `sock` that this worker has not read yet."""
    return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]


def _reset_every_connection_and_exit(own_port: int | None, asked_within: float) -> None:
    """End this worker, its TCP connections reset (SO_LINGER 0) instead of closed; first, its loop held until
    another of its connections has a request waiting (at most `asked_within` s), so that a request is in flight
    when it dies, as with a worker that dies busy."""
    connections = _connections()
    others = [s for s in connections if s.getpeername()[1] != own_port]
    until = time.monotonic() + asked_within
    while others and time.monotonic() < until and not any(_unread(s) for s in others):
        time.sleep(0.002)  # blocking, on the loop: the requests wait in the kernel, unread
    for sock in connections:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    _write_record(event="crashed", asked=[s.getpeername()[1] for s in others if _unread(s)])
    os._exit(1)


class Strangers:
    """Connections on this host whose client's port number is a drill connection's: what makes a row of
    /proc/net/tcp whose remote port is the drill's own, with a local port that is not the pod's."""

    def __init__(self, pod_port: int):
        self.listeners = [self._listen(range(pod_port - 1, 1023, -1)), self._listen(range(pod_port + 1, 65536))]
        self.listeners = [listener for listener in self.listeners if listener is not None]
        self.connections: list[socket.socket] = []
        self._same_port_elsewhere(pod_port)

    def _same_port_elsewhere(self, pod_port: int) -> None:
        """Connections to the pod's port number on another address, [::1] (another service's), from client ports
        outside the range the kernel picks a client's port from: below it and above it. Their rows of
        /proc/net/tcp6 have the pod's local port and a remote port lower or higher than any of the drill's."""
        listener = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        try:
            listener.bind(("::1", pod_port))  # one worker of the pod gets it; the others find it taken
            listener.listen(64)
        except OSError:
            listener.close()
            return
        self.listeners.append(listener)
        for ports in (range(20000, 32768), range(61000, 65536)):  # below and above the kernel's range for clients
            made = 0
            for port in ports:  # the first free ones: another pod on this machine may hold some
                sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
                try:
                    sock.bind(("::1", port))
                    sock.connect(("::1", pod_port))
                except OSError:
                    sock.close()
                    continue
                self.connections.append(sock)
                made += 1
                if made == SAME_PORT_PEERS:
                    break

    @staticmethod
    def _listen(ports) -> socket.socket | None:
        """A listener on 127.0.0.1 on the first port of `ports` that is free (below the pod's, or above it)."""
        for port in ports:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                listener.bind(("127.0.0.1", port))
                listener.listen(64)
                return listener
            except OSError:
                listener.close()
        return None

    def match(self, client_port: int) -> None:
        """Connect from 127.0.0.2:`client_port` and 127.0.0.3:`client_port` to the listeners below and above the pod's
        port; never accepted, never closed until the worker ends."""
        for source, listener in zip(("127.0.0.2", "127.0.0.3"), self.listeners[:2]):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.bind((source, client_port))
                sock.connect(listener.getsockname())
            except OSError:
                sock.close()  # that port is taken on that address: no stranger there for this connection
                continue
            self.connections.append(sock)


def drilled_app():
    """The factory uvicorn calls in each worker: the app under test, with the drill's routes in front."""
    die_with_parent(signal.SIGKILL)()  # a worker whose supervisor was killed goes with it
    inner = _load_service().create_app()
    _write_record(event="started")
    beating = []
    clients: set[int] = set()  # the client ports of the connections this worker has seen
    sick: list[asyncio.Event] = []  # while a /_drill/wait?sick=1 runs: set once /health has been answered 500
    strangers: list[Strangers] = []

    async def app(scope, receive, send):
        if not beating:  # the first call (lifespan's) comes on the worker's running loop
            beating.append(_start_beating())
        drill = scope["path"].removeprefix("/_drill/") if scope["type"] == "http" else ""
        client = (scope.get("client") or (None, None))[1] if scope["type"] == "http" else None
        if client is not None and client not in clients:
            clients.add(client)
            if os.environ.get("HALF_DEAD_STRANGERS"):
                if not strangers:
                    strangers.append(Strangers(int(os.environ["HALF_DEAD_STRANGERS"])))
                strangers[0].match(client)
            _write_record(event="connected", client=client)
        if drill == "crash":
            _write_record(event="began", drill=drill, seconds=0, client=client)
            _reset_every_connection_and_exit(client, CRASH_ASKED_WITHIN)
        if scope["type"] == "http" and scope["path"] == "/health" and sick:
            _write_record(event="sick", client=client)
            await _answer(send, 500, {"status": "sick"})
            sick[-1].set()
            return
        if drill not in ("freeze", "wait"):
            await inner(scope, receive, send)
            return
        query = parse_qs(scope["query_string"].decode())
        seconds = float(query.get("seconds", ["1"])[0])
        _write_record(event="began", drill=drill, seconds=seconds, client=client)
        if drill == "freeze":
            times, gap = int(query.get("times", ["1"])[0]), float(query.get("gap", ["0"])[0])
            step = float(query.get("step", ["0"])[0])
            for hold in range(times):
                if hold:
                    await asyncio.sleep(gap)  # the loop turns: whatever was due while it was held runs now
                if step:
                    _step_the_wall_clock(step)  # while the loop is held: no beat can follow the step before a look
                hold = {"c": _hold_the_loop_in_c, "cpu": _hold_the_loop_running}.get(query.get("in", [""])[0],
                                                                                    _hold_the_loop)
                hold(seconds, query.get("release", [""])[0])
        elif query.get("sick"):
            sick.append(asyncio.Event())
            try:
                with contextlib.suppress(asyncio.TimeoutError):  # `seconds`: a deadline, should no /health come
                    await asyncio.wait_for(sick[-1].wait(), seconds)
            finally:
                sick.pop()
        else:
            await asyncio.sleep(seconds)
        _write_record(event="ended", drill=drill, seconds=seconds)
        status = int(query.get("status", ["200"])[0])
        await _answer(send, status, {"pid": os.getpid(), "drill": drill, "seconds": seconds})

    return app


def serve(fd: int) -> None:
    import uvicorn  # here, not at the top: the tests import this module too, and never need uvicorn

    # The tests' keep-alive connections may sit idle for seconds while a worker is replaced on a
    # loaded machine: uvicorn's default would close them after 5 s and make a healthy worker look deaf.
    uvicorn.run(f"{Path(__file__).stem}:drilled_app", factory=True, fd=fd, workers=int(os.environ["HALF_DEAD_WORKERS"]),
                log_level="warning", access_log=False, timeout_keep_alive=3600)


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


def dual_stack_listener() -> socket.socket | None:
    """A socket listening as a server started with `--host ::` does, an IPv6 socket that takes IPv4 too, but
    on the loopback address alone (::ffff:127.0.0.1): its connections from 127.0.0.1 are listed in
    /proc/net/tcp6, with IPv4-mapped addresses, not in /proc/net/tcp. None where this machine has no IPv6."""
    try:
        listener = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    except OSError:
        return None
    try:
        listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        listener.bind(("::ffff:127.0.0.1", 0))
    except OSError:
        listener.close()
        return None
    return listener


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
    """`uvicorn --workers N` serving the package at `impl`, in a process group of its own, killed on exit."""

    def __init__(self, impl: Path, folder: Path, freeze_limit: float | None = None, dual_stack: bool = False,
                 size: int = 2, strangers: bool = False):
        self.impl, self.folder, self.freeze_limit, self.size = Path(impl), Path(folder), freeze_limit, size
        self.strangers = strangers  # connections on the host sharing the drill's client port numbers (see the top)
        self.dual_stack = dual_stack  # listening on IPv6 for IPv4 too, as `--host ::` does (turned off where no IPv6)
        self.record_file = self.folder / "record.jsonl"
        self.log_file = self.folder / "server.log"
        self.process: subprocess.Popen | None = None
        self.port = 0
        self.listening = 0  # the listening socket's inode: what every worker holds
        self.pinned: list[Pinned] = []
        self.seen = 0  # lines of the record that earlier tests on this pod wrote
        self.ended = False
        self.releases = itertools.count(1)

    def __enter__(self) -> Pod:
        listener = dual_stack_listener() if self.dual_stack else None
        self.dual_stack = listener is not None
        if listener is None:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.bind(("127.0.0.1", 0))
        try:
            listener.listen(128)
            self.port, self.listening = listener.getsockname()[1], os.fstat(listener.fileno()).st_ino
            env = {**os.environ, "HALF_DEAD_IMPL": str(self.impl), "HALF_DEAD_RECORD": str(self.record_file),
                   "PYTHONUNBUFFERED": "1", "HALF_DEAD_WORKERS": str(self.size)}
            env.pop("WORKER_FREEZE_LIMIT", None)
            env.pop("HALF_DEAD_STRANGERS", None)
            if self.strangers:
                env["HALF_DEAD_STRANGERS"] = str(self.port)
            if self.freeze_limit is not None:
                env["WORKER_FREEZE_LIMIT"] = str(self.freeze_limit)
            for name in ("LOOPKATA_RESULTS_FD", "LOOPKATA_STACKS_FD"):
                env.pop(name, None)
            with open(self.log_file, "wb") as log:
                self.process = subprocess.Popen(
                    [sys.executable, __file__, str(listener.fileno()), str(os.getpid())], pass_fds=(listener.fileno(),),
                    cwd=Path(__file__).parent, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True,  # no preexec_fn: pods are started from several threads (Ahead)
                )
        finally:
            listener.close()  # the server holds its own copy
        return self

    def __exit__(self, *exc) -> None:
        for pinned in self.pinned:
            pinned.close()
        if self.process is not None and not self.ended:
            self.ended = True
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

    def whole_record(self) -> list[dict]:
        """Every line the workers have written since the pod started."""
        with contextlib.suppress(FileNotFoundError):
            return [json.loads(line) for line in self.record_file.read_text().splitlines() if line.strip()]
        return []

    def record(self) -> list[dict]:
        """Every line the workers have written during this test."""
        return self.whole_record()[self.seen:]

    def drills(self, drill: str, event: str = "began") -> list[dict]:
        return [r for r in self.record() if r.get("drill") == drill and r["event"] == event]

    def connections(self, besides: list[Pinned] = ()) -> list[dict]:
        """The connections the workers saw during this test ("connected" records), those of `besides` left out."""
        ours = {p.client_port for p in besides}
        return [r for r in self.record() if r["event"] == "connected" and r["client"] not in ours]

    def beat_age(self, pid: int) -> float | None:
        """Seconds since worker `pid`'s event loop last stamped its beat file (None if it never did, or it cannot
        be read). Once the worker is gone, at least the time its loop was still before it died."""
        try:
            return time.monotonic() - float(_beat_file(self.record_file, pid).read_text())
        except (OSError, ValueError):
            return None

    def log(self) -> str:
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""

    def died(self) -> str:
        """Why the server has stopped, in words, or '' while it runs."""
        if self.process.poll() is None:
            return ""
        tail = "\n".join(self.log().strip().splitlines()[-8:])
        return f"the server exited with status {self.process.returncode}; its log ends:\n{tail}"

    def running_drills(self) -> list[dict]:
        """The drills a worker began and has not ended yet."""
        running: dict[tuple[int, str], list[dict]] = {}
        for r in self.whole_record():
            if r["event"] == "began":
                running.setdefault((r["pid"], r["drill"]), []).append(r)
            elif r["event"] == "ended" and running.get((r["pid"], r["drill"])):
                running[r["pid"], r["drill"]].pop(0)
        return [r for began in running.values() for r in began]

    # --- driving it ---

    def release(self) -> str:
        """A fresh name for `&release=`: the freeze that carries it lasts until `let_go(name)`."""
        return f"release-{next(self.releases)}"

    def let_go(self, name: str) -> None:
        (self.folder / name).touch()

    def pin(self, timeout: float = 30.0) -> Pinned:
        """A new keep-alive connection, answered once (GET /health), with its owner found."""
        pinned = Pinned(self.port, timeout)
        self.pinned.append(pinned)
        pinned.get("/health")
        pinned.owner = self.owner(pinned)
        return pinned

    def settled(self, workers: list[int], within: float = 5.0) -> bool:
        """Whether the pod still has the same `workers`, alive, and none is running a drill (once its drills
        have ended; `within` is a deadline against a hang)."""
        def changed() -> bool:
            return bool(self.died()) or self.workers() != workers

        wait_until(lambda: changed() or not self.running_drills(), within)
        return not changed() and not self.running_drills()

    def ready(self, within: float = STARTED_WITHIN) -> dict[int, list[Pinned]]:
        """Wait until every worker serves: keep connecting until each owns a connection; pid -> its connections."""
        deadline = time.monotonic() + within
        owned: dict[int, list[Pinned]] = {}
        while time.monotonic() < deadline:
            if self.died():
                raise RuntimeError(f"expected uvicorn --workers {self.size} to serve create_app(), but {self.died()}")
            workers = self.workers()
            if len(workers) == self.size:
                with contextlib.suppress(OSError, http.client.HTTPException):
                    pinned = self.pin()
                    if pinned.owner is not None:
                        owned.setdefault(pinned.owner, []).append(pinned)
                if set(owned) >= set(workers):
                    return {pid: owned[pid] for pid in workers}
            time.sleep(0.01)
        raise RuntimeError(f"expected every worker of uvicorn --workers {self.size} to serve within {within:g} s, but the ones "
                           f"that answered were {sorted(owned) or 'none'}; the server's log:\n{self.log()[-2000:]}")


class Pods:
    """The pods one module's tests share, one per (implementation, WORKER_FREEZE_LIMIT, listener, workers); all
    killed on exit.

    `lease()` hands a test a pod whose workers all serve, with a connection pinned to each.
    When the test ends without an error, and the pod is as the test found it once its drills
    have ended (the same workers, alive, no drill running), the pod waits for the next
    test; otherwise it is killed and the next test gets a new one.
    """

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.numbers = itertools.count(1)
        self.idle: dict[tuple[str, float | None, bool, int, bool], Pod] = {}
        self.every: list[Pod] = []  # leased or idle: whatever happens, none outlives the module
        self.lock = threading.Lock()  # tests on other threads lease pods too (Ahead)
        self.closed = False

    def __enter__(self) -> Pods:
        return self

    def __exit__(self, *exc) -> None:
        with self.lock:
            self.closed = True
            every, self.every, self.idle = self.every, [], {}
        for pod in every:
            pod.__exit__(None, None, None)

    def _take(self, key: tuple[str, float | None, bool, int, bool], impl: Path) -> Pod:
        with self.lock:
            if self.closed:
                raise RuntimeError("the module's pods are closed")
            pod = self.idle.pop(key, None)
            if pod is None:
                folder = self.folder / f"pod-{next(self.numbers)}"
                folder.mkdir()
                pod = Pod(impl, folder, *key[1:])
                self.every.append(pod)
        return pod if pod.process else pod.__enter__()

    def _drop(self, pod: Pod) -> None:
        with self.lock:
            if pod in self.every:
                self.every.remove(pod)
        pod.__exit__(None, None, None)

    def prestart(self, impl: Path, freeze_limit: float | None = None, dual_stack: bool = False, size: int = 2,
                 strangers: bool = False) -> None:
        """Start the pod a later test will lease, unless one waits already: its boot overlaps this test."""
        key = (str(Path(impl).resolve()), freeze_limit, dual_stack, size, strangers)
        with self.lock:
            if self.closed or key in self.idle:
                return
        pod = self._take(key, impl)
        with self.lock:
            if not self.closed and key not in self.idle:
                self.idle[key] = pod
                return
        self._drop(pod)

    @contextlib.contextmanager
    def lease(self, impl: Path, freeze_limit: float | None = None, dual_stack: bool = False, size: int = 2,
              strangers: bool = False):
        """(pod, pid -> its pinned connections) for one test; `size` workers."""
        key = (str(Path(impl).resolve()), freeze_limit, dual_stack, size, strangers)
        pod = self._take(key, impl)
        try:
            for pinned in pod.pinned:
                pinned.close()
            pod.pinned, pod.seen = [], len(pod.whole_record())
            owned = pod.ready()
            yield pod, owned
        except BaseException:
            self._drop(pod)
            raise
        if pod.settled(sorted(owned)):
            with self.lock:
                if not self.closed and key not in self.idle:
                    self.idle[key] = pod
                    return
        self._drop(pod)


class Ahead:
    """Tests that run on threads of their own, begun while earlier tests run; their own test collects the outcome.

    A scenario that only waits for worker processes (a watchdog's) spends most of its time
    waiting: begun early, its waiting overlaps other tests. Its assertions run on its thread,
    and `outcome()` re-raises what it raised, on the test's own thread.
    """

    def __init__(self):
        self.runs: dict[str, tuple[threading.Thread, dict]] = {}

    def begin(self, scenario, *args) -> None:
        """Start scenario(*args) on a thread, unless it has started already."""
        if scenario.__name__ in self.runs:
            return
        outcome: dict = {}

        def run() -> None:
            try:
                outcome["value"] = scenario(*args)
            except BaseException as exc:  # noqa: BLE001 - re-raised by outcome(), on the test's thread
                outcome["error"] = exc

        thread = threading.Thread(target=run, name=scenario.__name__, daemon=True)
        self.runs[scenario.__name__] = (thread, outcome)
        thread.start()

    def outcome(self, scenario, *args, within: float = 60.0):
        """scenario(*args)'s value, begun now if it has not been; what it raised is raised here."""
        self.begin(scenario, *args)
        thread, outcome = self.runs[scenario.__name__]
        thread.join(within)  # a deadline against a hang: every wait inside a scenario has one of its own
        if thread.is_alive():
            raise RuntimeError(f"expected this test to end within {within:g} s, it was still waiting for its pod")
        if "error" in outcome:
            raise outcome["error"]
        return outcome.get("value")


def wait_until(condition, seconds: float, every: float = 0.01):
    """condition()'s first true value within `seconds` (a deadline against a hang), else its last value."""
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(every)


if __name__ == "__main__":
    die_with_parent(signal.SIGKILL)()  # the server goes with the test that started it...
    if os.getppid() != int(sys.argv[2]):
        sys.exit(1)  # ...and a test that was gone before that is not served at all
    serve(int(sys.argv[1]))
