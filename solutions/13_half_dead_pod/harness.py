"""The liveness drill, one worker at a time.

A probe on a new connection reaches whichever worker accepts it first, and a
frozen worker accepts nothing: the probes of a half-dead pod all land on the
healthy worker. So the drill pins keep-alive connections, finds the worker
process that owns each one, and judges only the worker that served the slow
request. A drill that could not reach every worker says "void".

Run it on a build known to have the bug (control mode): it must say "fail",
or its "pass" on a fixed build means nothing. Run it on a fixed build (clean
mode): it must say "pass". Linux only: it reads /proc.
"""
from __future__ import annotations

import contextlib
import http.client
import os
import socket
import threading
import time
from dataclasses import dataclass, field


@dataclass
class Verdict:
    outcome: str  # "pass", "fail" or "void"
    slow_worker: int | None = None  # the pid of the worker that served the slow request
    worst: dict[int, float] = field(default_factory=dict)  # pid -> longest wait for /health, in seconds
    reason: str = ""


def socket_inodes(pid: int) -> set[int]:
    """The inodes of the sockets process `pid` holds open."""
    found = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    found.add(int(target[len("socket:["):-1]))
    return found


def server_side_inode(port: int, client_port: int) -> int:
    """The inode of the server's end of the loopback connection from `client_port` (0 if none yet)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            next(f)  # the header
            for row in f:
                fields = row.split()
                local, remote = fields[1], fields[2]  # hex "address:port"
                if int(local.rsplit(":", 1)[1], 16) == port and int(remote.rsplit(":", 1)[1], 16) == client_port:
                    return int(fields[9])
    return 0


class Pinned:
    """A keep-alive connection and the worker that owns its server end."""

    def __init__(self, port: int, workers: list[int], timeout: float):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        self.waits: list[float] = [0.0]  # the waits for /health, none yet: the longest is 0 until one is timed
        self.asked_at: float | None = None  # when the /health in flight was sent; None between polls
        self.broken = ""
        self.get("/health")  # answered, so accepted: the server's end now belongs to a worker
        inode = server_side_inode(port, self.conn.sock.getsockname()[1])
        self.owner = next((pid for pid in workers if inode and inode in socket_inodes(pid)), None)

    def get(self, path: str) -> None:
        self.conn.request("GET", path)
        response = self.conn.getresponse()
        response.read()
        if response.status != 200:
            raise http.client.HTTPException(f"GET {path} answered {response.status}")

    def poll(self, running: threading.Event, every: float) -> None:
        """GET /health again and again while the slow request runs, timing each wait."""
        while running.is_set():
            self.asked_at = started = time.monotonic()
            try:
                self.get("/health")
            except (OSError, http.client.HTTPException) as exc:
                if running.is_set():  # not the drill hanging up
                    self.broken = f"{type(exc).__name__}: {exc}"  # a worker that died answers nothing
                return
            self.waits.append(time.monotonic() - started)
            self.asked_at = None
            time.sleep(every)

    def fetch(self, path: str, running: threading.Event) -> None:
        """GET `path` on this connection; what breaks it is kept in `broken`."""
        try:
            self.get(path)
        except (OSError, http.client.HTTPException) as exc:
            if running.is_set():
                self.broken = f"{type(exc).__name__}: {exc}"

    def waited(self) -> float:
        """The longest wait for /health on this connection, the one still in flight included."""
        asked = self.asked_at
        return max([time.monotonic() - asked if asked is not None else 0.0, *self.waits])

    def wake(self) -> None:
        """End the connection under a thread still waiting on it: its wait ends at once, in an error."""
        with contextlib.suppress(OSError, AttributeError):  # AttributeError: no socket (never connected)
            self.conn.sock.shutdown(socket.SHUT_RDWR)


def check_workers(port: int, workers: list[int], slow_path: str, *, limit: float,
                  max_connections: int = 64,  # pragma: no mutate (the starter's default: the lesson is void, not 64)
                  poll_every: float = 0.05,  # pragma: no mutate (how often to look: no lesson is about its value)
                  timeout: float = 60.0,  # pragma: no mutate (a bound on a server that never answers, not a lesson)
                  ) -> Verdict:
    """Pin connections to every worker, send GET `slow_path`, and judge the worker that serves it.

    "fail": a connection of that worker waited longer than `limit` s for /health (answered or
    not) or broke (an error status too), or the slow request did; "pass": none did; "void":
    some worker owned none of `max_connections` connections, or one reached a worker not given
    (the list is out of date): the drill cannot speak for them. A frozen worker may never answer:
    fail comes as soon as a wait passes the limit, and a slow request unanswered after `timeout`
    seconds ends in an error, and so does the drill: fail.
    """
    pinned: list[Pinned] = []
    running = threading.Event()
    threads: list[threading.Thread] = []
    try:
        while {p.owner for p in pinned} < set(workers) and len(pinned) < max_connections:
            pinned.append(Pinned(port, workers, timeout))
        uncovered = sorted(set(workers) - {p.owner for p in pinned})
        if uncovered:
            return Verdict("void", reason=f"{len(pinned)} connections reached no connection of worker(s) "
                                          f"{', '.join(map(str, uncovered))}: the drill cannot speak for them")

        slow = Pinned(port, workers, timeout)  # its own connection, its owner known before it freezes anything
        pinned.append(slow)
        if slow.owner is None:
            return Verdict("void", reason="the slow request's connection belongs to none of the workers given")
        running.set()
        pollers = [threading.Thread(target=p.poll, args=(running, poll_every), daemon=True) for p in pinned[:-1]]
        sending = threading.Thread(target=slow.fetch, args=(slow_path, running), daemon=True)  # the slow request
        threads = [*pollers, sending]
        for t in threads:
            t.start()
        judged = [p for p in pinned[:-1] if p.owner == slow.owner]
        while (sending.is_alive() and not any(p.broken for p in [*judged, slow])
               and not any(p.waited() > limit for p in judged)):
            time.sleep(poll_every)

        worst = {pid: max((p.waited() for p in pinned[:-1] if p.owner == pid), default=0.0)
                 for pid in workers}
        broken = [p.broken for p in [*judged, slow] if p.broken]
        if broken or worst[slow.owner] > limit:
            why = ("; ".join(dict.fromkeys(broken)) if broken  # every distinct break, once
                   else f"/health waited {worst[slow.owner]:.3f} s on a connection it owns")
            return Verdict("fail", slow.owner, worst, f"worker {slow.owner} served {slow_path}: {why} "
                                                      f"(limit {limit} s, {len(judged)} connections judged)")
        return Verdict("pass", slow.owner, worst, f"worker {slow.owner} served {slow_path}; its slowest /health "
                                                  f"took {worst[slow.owner]:.3f} s on {len(judged)} connections")
    finally:
        running.clear()
        for p in pinned:
            p.wake()
        for t in threads:
            t.join(timeout)
        for p in pinned:  # only now: closing a connection under a thread that reads it breaks http.client
            p.conn.close()
