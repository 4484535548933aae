"""What the hidden tests of kata 16 (memory-guard) run: the worker in a container's memory limit, fed faster than it works.

`run(impl, folder, ...)` starts the ingest worker of the package at `impl` as a
child process (`ingest.main(argv)`, its status the process's exit status) and
serves it a feed on 127.0.0.1 from a thread of the test's own process:
`records` records of RECORD_BYTES each (None: endless), each sent as soon as
the worker reads the last one, so the feed is as fast as the worker can read.

Where the kernel allows it (services.containers: root, a memory controller), the
worker runs in a fresh cgroup with a memory limit and no swap, as `docker run
--memory` makes: going over is the OOM killer's SIGKILL, which the cgroup's own
oom_kill counter records. `--cgroup-root /` points the worker at the real
/proc/self/cgroup and /sys/fs/cgroup. Elsewhere (or with
LOOPKATA_CONTAINER=fallback) it runs under an address-space limit (RLIMIT_AS),
pointed at a fake cgroup tree (`--cgroup-root`) whose memory.max holds the limit
and whose memory.current the test keeps at the resident memory of the processes
it started; when that reaches the limit, the test ends the worker with SIGKILL,
where the kernel would have. A fallback run may show a wrong fix failing; it can
never prove a fix right.

With `pressure_after`, memory is also taken elsewhere in the container: a
second process in the same cgroup (as a helper the worker starts, or a log
shipper, would be) takes 1 MiB for every `pressure_every` records the feed
sends once it has sent `pressure_after`. It grows only as the worker reads, so
a worker that the machine's load slows down meets it no sooner.

With `quiet_after`, the feed sends that many records and then nothing more
(the connection stays open), and the second process grows by itself: at once
to `quiet_from` of the limit (the cgroup's own usage, read as the worker reads
it), then 1 MiB every `quiet_every` seconds, until the worker's process is gone
(a pipe only the worker holds reaches its end: no polling of the test's).
A worker whose guard looks only when a record arrives never looks again; one
that looks once a second looks after the limit has been passed.

The second process never gives its memory back. It asks the kernel not to
pick it for the OOM killer (oom_score_adj -1000), which needs CAP_SYS_RESOURCE
and is refused where root lacks it: the kernel may then kill it instead of the
worker, and the outcome says which process died (both exit statuses).

Everything is decided from what happened: the worker's exit status, its
checkpoint file (written by its `finally`), the cgroup's oom_kill counter and
peak usage. Time is only the deadline of a worker that never stops.

As root, the worker could write its own cgroup's files, which a container
cannot: raise its limit, move itself out, make a cgroup inside. The test looks
(`Cgroup.changes`: the limit files, a peak above the limit, cgroups inside, the
cgroup each process of the run is in) at every turn of its watch, and stops the
worker at the first change, and once more after the run; a run with a change
fails with what was changed, whatever else happened.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from loopkata.services import containers
from loopkata.testing import CpuWait

MiB = 2**20
SHEDDING = 0.8  # the share of the limit at which the worker must stop taking work
RECORD_BYTES = 256 * 1024  # the size of every record the feed sends
HEADER = struct.Struct("!I")
AS_ROOM = 512 * MiB  # fallback: address space beyond the limit (the interpreter, its libraries, thread stacks)

# The worker, loaded from the package at argv[1] under a name of its own; argv[2:] go to ingest.main().
WORKER = """\
import importlib, importlib.util, sys
path = sys.argv[1]
spec = importlib.util.spec_from_file_location("memory_guard_worker", path + "/__init__.py",
                                              submodule_search_locations=[path])
package = importlib.util.module_from_spec(spec)
sys.modules["memory_guard_worker"] = package
spec.loader.exec_module(package)
ingest = importlib.import_module("memory_guard_worker.ingest")
sys.exit(ingest.main(sys.argv[2:]))
"""

# The other process in the container: 1 MiB (written, so the pages are really taken) per "+" on stdin; on "g",
# it grows by itself (argv: the usage file, the usage to reach at once, the seconds between two MiB, the fd of
# the pipe that ends with the worker). It writes "+" on stdout for every MiB it holds.
PRESSURE = """\
import os, select, sys
try:
    with open("/proc/self/oom_score_adj", "w") as f:
        f.write("-1000")
except OSError:
    pass
usage_file, jump_to, every, gone = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
held = []
def take():
    held.append(b"m" * (1 << 20))
    os.write(1, b"+")
def usage():
    try:
        with open(usage_file) as f:
            return int(f.read())
    except (OSError, ValueError):
        return 0
os.write(1, b"ready\\n")
while True:
    got = sys.stdin.buffer.read(1)
    if not got:
        break
    if got == b"+":
        take()
    elif got == b"g":
        while usage() < jump_to and not select.select([gone], [], [], 0)[0]:
            take()
        while not select.select([gone], [], [], every)[0]:
            take()
"""


@dataclass
class Outcome:
    real: bool  # a real cgroup (True) or the fallback
    limit: int
    status: int | None  # the worker's exit status as Popen has it (-9: SIGKILL); None: still running at the deadline
    oom_kills: int  # the cgroup's oom_kill counter (the fallback: 1 when the test ended the worker at the limit)
    checkpoint: dict | None  # what the worker's finally wrote, None if nothing
    sent: int  # records the feed sent
    peak: int  # the most memory the container held, in bytes (the fallback: resident memory)
    log: str  # what the worker printed
    pressure_mib: int = 0  # MiB the other process took
    pressure_status: int | None = None  # its exit status (None: alive until the end; -9: the kernel killed it)
    deadline: float = 0.0
    quiet_after: int | None = None  # records the feed sent before it went quiet (None: it never did)
    waited_past_shedding: float = 0.0  # seconds the worker waited for a CPU once the container held 80% of its limit

    @property
    def pressure_killed(self) -> bool:
        return self.pressure_status == -signal.SIGKILL

    @property
    def killed(self) -> bool:
        return self.status == -signal.SIGKILL

    def log_tail(self, lines: int = 6) -> str:
        tail = [ln for ln in self.log.strip().splitlines() if ln.strip()][-lines:]
        return " | ".join(tail) if tail else "nothing"


class Feed:
    """GET /feed on 127.0.0.1: a 200 whose body is `records` records (None: endless), then the end of the stream."""

    def __init__(self, records: int | None, on_sent=None, hold: bool = False):
        self.records, self.on_sent, self.hold = records, on_sent, hold
        self.sent = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.05)
        self.port = self.listener.getsockname()[1]
        self.conn: socket.socket | None = None
        self.stopping = threading.Event()
        self.ended = threading.Event()  # the feed sent its last record and the end of the stream
        self.closed_by_worker = threading.Event()  # and then the worker closed its end: it has read to the end
        self.thread = threading.Thread(target=self._serve, name="the feed", daemon=True)
        self.thread.start()

    def _accept(self) -> socket.socket | None:
        """The worker's connection, once it comes (None if the feed was stopped first)."""
        while not self.stopping.is_set():
            try:
                self.conn, _ = self.listener.accept()
                return self.conn
            except TimeoutError:
                continue
            except OSError:
                return None
        return None

    def _serve(self) -> None:
        record = HEADER.pack(RECORD_BYTES) + b"r" * RECORD_BYTES
        if self._accept() is None:
            return
        conn = self.conn
        conn.settimeout(None)
        try:
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, RECORD_BYTES)  # little sent ahead of the reader
            request = b""
            while b"\r\n\r\n" not in request:
                got = conn.recv(4096)
                if not got:
                    return
                request += got
            conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: application/octet-stream\r\n\r\n")
            while not self.stopping.is_set() and (self.records is None or self.sent < self.records):
                conn.sendall(record)
                self.sent += 1
                if self.on_sent is not None:
                    self.on_sent(self.sent)
            if self.hold:  # quiet: nothing more, and no end either, until the test stops
                self.stopping.wait()
                return
            conn.shutdown(socket.SHUT_WR)  # the end of the feed
            self.ended.set()
            while conn.recv(4096):
                pass
            if not self.stopping.is_set():
                self.closed_by_worker.set()
        except OSError:
            pass  # the worker went away, or the test stopped the feed

    def stop(self) -> None:
        self.stopping.set()
        for s in (self.conn, self.listener):
            if s is not None:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
        self.thread.join(5)
        for s in (self.conn, self.listener):
            if s is not None:
                with contextlib.suppress(OSError):
                    s.close()


def fake_root(folder: Path, limit: int) -> Path:
    """A cgroup v2 tree seen from inside a cgroup namespace: memory.max is the limit; memory.current the test keeps."""
    root = folder / "root"
    (root / "proc" / "self").mkdir(parents=True, exist_ok=True)
    (root / "proc" / "self" / "cgroup").write_text("0::/\n")
    fs = root / "sys" / "fs" / "cgroup"
    fs.mkdir(parents=True, exist_ok=True)
    (fs / "cgroup.controllers").write_text("cpu io memory pids\n")
    (fs / "memory.max").write_text(f"{limit}\n")
    _write_usage(root, 0)
    return root


def _write_usage(root: Path, used: int) -> None:
    target = root / "sys" / "fs" / "cgroup" / "memory.current"
    tmp = target.with_name("memory.current.tmp")
    tmp.write_text(f"{used}\n")
    os.replace(tmp, target)  # a reader never sees half a number


def set_still_usage(folder: Path, used: int) -> None:
    """What memory.current says from now on, in the tree on_a_still_cgroup(impl, folder, ...) made."""
    _write_usage(folder / "root", used)


def resident(pid: int) -> int:
    """Bytes of memory `pid` holds (VmRSS), 0 if it is gone."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _kill_group(process: subprocess.Popen) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _close(fds: set, *which: int) -> None:
    """Closes `which` (all of `fds` if none) once each: a number closed twice may be another file's by then."""
    for fd in which or tuple(fds):
        if fd in fds:
            fds.discard(fd)
            with contextlib.suppress(OSError):
                os.close(fd)


class RefusingFeed(Feed):
    """GET /feed answered with `status` and nothing more: a feed that is down."""

    def __init__(self, status: bytes = b"503 Service Unavailable"):
        self.status_line = status
        super().__init__(0)

    def _serve(self) -> None:
        if self._accept() is not None:
            with contextlib.suppress(OSError):
                self.conn.recv(4096)
                self.conn.sendall(b"HTTP/1.0 " + self.status_line + b"\r\n\r\n")
                self.conn.shutdown(socket.SHUT_RDWR)


@contextlib.contextmanager
def on_a_still_cgroup(impl: Path, folder: Path, *, limit: int, usage: int, handle_seconds: float,
                      feed: Feed | None = None):
    """The worker at `impl` on a cgroup v2 tree that says `limit` and a usage that stays `usage`, fed `feed` (an
    endless one by default); yields (the worker's Popen, the Feed, its log file). Both are stopped when the block
    ends."""
    folder.mkdir(parents=True, exist_ok=True)
    root = fake_root(folder, limit)
    _write_usage(root, usage)
    feed = Feed(None) if feed is None else feed
    log_path = folder / "worker.log"
    with contextlib.ExitStack() as stack:
        stack.callback(feed.stop)
        log = stack.enter_context(open(log_path, "wb"))
        argv = [sys.executable, "-c", WORKER, str(impl), "--feed", f"127.0.0.1:{feed.port}",
                "--checkpoint", str(folder / "checkpoint.json"), "--handle-seconds", f"{handle_seconds:g}",
                "--cgroup-root", str(root)]
        worker = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
        stack.callback(_kill_group, worker)
        yield worker, feed, log_path


def ran_and_slept(pid: int) -> tuple[float, int]:
    """Seconds the threads of `pid` have spent on a CPU, and how many times they gave it up to wait for something
    (a sleep, a socket, a timer: voluntary context switches). Threads that ended are not counted."""
    ran, slept = 0.0, 0
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                    ran += int(f.read().split()[0]) / 1e9
                with open(f"/proc/{pid}/task/{tid}/status", "rb") as f:
                    for line in f:
                        if line.startswith(b"voluntary_ctxt_switches:"):
                            slept += int(line.split()[1])
    return ran, slept


def real_here() -> bool:
    return containers.missing(containers.MEMORY_LIMIT) == ""


def _usage(group: containers.Cgroup) -> int:
    """The cgroup's usage now, in bytes (what its limit counts)."""
    folder = group.dirs.get("memory")
    name = "memory.current" if group.version == 2 else "memory.usage_in_bytes"
    with contextlib.suppress(OSError, ValueError, TypeError):
        return int((folder / name).read_text())
    return 0


def run(impl: Path, folder: Path, *, limit: int, records: int | None, handle_seconds: float, deadline: float,
        pressure_after: int | None = None, pressure_every: int = 8, program: str = WORKER,
        extra: tuple[str, ...] = (), samples: list | None = None, every: float = 0.01,
        quiet_after: int | None = None, quiet_from: float = 0.75, quiet_every: float = 0.01) -> Outcome:
    """The worker at `impl` under a memory limit of `limit` bytes, fed until it stops; what happened.

    `program` and `extra`: another program to run the same way (notebook 16's toy worker), and
    arguments of its own ("{usage}" in one stands for the file that holds the cgroup's usage). `samples`: a list to append (seconds since the worker started, bytes the
    container uses) to, every `every` seconds (a hundredth by default)."""
    real = real_here()
    folder.mkdir(parents=True, exist_ok=True)
    checkpoint, log_path = folder / "checkpoint.json", folder / "worker.log"
    with contextlib.ExitStack() as stack:
        group = stack.enter_context(containers.Cgroup(memory_bytes=limit)) if real else None
        root = Path("/") if real else fake_root(folder, limit)
        usage_file = (group.dirs["memory"] / ("memory.current" if group.version == 2 else "memory.usage_in_bytes")
                      if real else root / "sys" / "fs" / "cgroup" / "memory.current")
        pressure = None
        gone_r, gone_w = os.pipe()  # its end is the worker's: only the worker holds the write end
        fds = {gone_r, gone_w}
        stack.callback(_close, fds)
        if pressure_after is not None or quiet_after is not None:
            argv = [sys.executable, "-I", "-S", "-c", PRESSURE, str(usage_file), str(int(limit * quiet_from)),
                    f"{quiet_every:g}", str(gone_r)]
            pressure = subprocess.Popen(group.command(argv) if real else argv, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
                                        pass_fds=(gone_r,))
            stack.callback(_kill_group, pressure)
            pressure.stdout.readline()  # "ready": its interpreter is in the container before the worker measures anything
        _close(fds, gone_r)

        def tell(what: bytes) -> None:
            with contextlib.suppress(OSError, ValueError):
                pressure.stdin.write(what)
                pressure.stdin.flush()

        def on_sent(sent: int) -> None:
            if pressure is None:
                return
            if pressure_after is not None and sent > pressure_after and (sent - pressure_after) % pressure_every == 0:
                tell(b"+")
            if sent == quiet_after:
                tell(b"g")

        feed = Feed(quiet_after if quiet_after is not None else records, on_sent, hold=quiet_after is not None)
        stack.callback(feed.stop)
        argv = [sys.executable, "-c", program, str(impl), "--feed", f"127.0.0.1:{feed.port}",
                "--checkpoint", str(checkpoint), "--handle-seconds", f"{handle_seconds:g}", "--cgroup-root", str(root),
                *(a.replace("{usage}", str(usage_file)) for a in extra)]
        command = group.command(argv) if real else containers.address_space_limit(argv, limit + AS_ROOM)
        log = stack.enter_context(open(log_path, "wb"))
        worker = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True, pass_fds=(gone_w,))
        stack.callback(_kill_group, worker)
        _close(fds, gone_w)
        started = time.monotonic()
        ends = started + deadline
        oom_kills, peak = 0, 0
        # A guard kept from a CPU sheds late through no fault of its own: how long, once it was due to shed, is noted.
        cpu, waited_at_shedding = CpuWait([worker.pid]), None
        # As root the worker may write its cgroup's files: the run counts only in the container as made.
        members = {worker.pid: "itself"} | ({pressure.pid: "the other process in the container"} if pressure else {})
        changed: list[str] = []
        while worker.poll() is None and time.monotonic() < ends:
            if real:
                changed += [c for c in group.changes(members) if c not in changed]
                if changed:
                    break  # the worker is stopped at once: a limit it raised no longer holds it
                stats = group.stats()
                oom_kills, peak = stats.get("oom_kill", 0), stats.get("peak_bytes", 0)
                used = _usage(group)
                if samples is not None:
                    samples.append((time.monotonic() - started, used))
                waited = cpu.update([worker.pid])
                if waited_at_shedding is None and used >= SHEDDING * limit:
                    waited_at_shedding = waited
                if oom_kills:
                    break
            else:
                used = resident(worker.pid) + (resident(pressure.pid) if pressure is not None else 0)
                peak = max(peak, used)
                _write_usage(root, used)
                if samples is not None:
                    samples.append((time.monotonic() - started, used))
                if used >= limit:  # where the kernel would have: SIGKILL, no finally
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(worker.pid, signal.SIGKILL)
                    oom_kills = 1
                    break
            time.sleep(every)
        if oom_kills:  # the kernel killed someone: the worker, or the other process (then the worker lives on)
            settle = time.monotonic() + 2
            while (worker.poll() is None and time.monotonic() < settle
                   and (pressure is None or pressure.poll() is None)):
                time.sleep(0.01)
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.wait(0.05)
        status = worker.poll()
        if real:  # a process reaped may have given its pid to another: only the ones not reaped are looked at
            alive = {p.pid: members[p.pid] for p in (worker, pressure) if p is not None and p.returncode is None}
            changed += [c for c in group.changes(alive) if c not in changed]
            if changed:
                raise AssertionError(containers.changed_from_inside("the worker", changed))
            stats = group.stats()
            oom_kills, peak = stats.get("oom_kill", 0), stats.get("peak_bytes", 0)
        pressure_status, pressure_mib = None, 0
        if pressure is not None:
            if oom_kills and worker.poll() is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    pressure.wait(0.2)  # the kernel may have picked both
            pressure_status = pressure.poll()  # before the test ends it: None, or the kernel's SIGKILL
            with contextlib.suppress(OSError):
                pressure.stdin.close()  # it stops growing, and exits
            with contextlib.suppress(subprocess.TimeoutExpired):
                pressure.wait(2)
            _kill_group(pressure)
            pressure_mib = pressure.stdout.read().count(b"+")
    text = log_path.read_bytes().decode(errors="replace")
    try:
        saved = json.loads(checkpoint.read_text())
    except (OSError, ValueError):
        saved = None
    return Outcome(real=real, limit=limit, status=status, oom_kills=oom_kills, checkpoint=saved, sent=feed.sent,
                   peak=peak, log=text, pressure_mib=pressure_mib, pressure_status=pressure_status, deadline=deadline,
                   quiet_after=quiet_after,
                   waited_past_shedding=0.0 if waited_at_shedding is None else cpu.seconds - waited_at_shedding)
