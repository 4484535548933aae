"""The liveness drill, one worker at a time, on asyncio streams.

Connections are pinned and mapped to the worker that owns them through /proc;
a worker no connection reached makes the verdict void. Linux only.
"""
from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field


@dataclass
class Verdict:
    outcome: str  # "pass", "fail" or "void"
    slow_worker: int | None = None
    worst: dict[int, float] = field(default_factory=dict)
    reason: str = ""


def _inode_of_server_end(port: int, client_port: int) -> int:
    wanted = (f"{port:04X}", f"{client_port:04X}")
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            local, remote, *_, inode = row.split()[1:10]
            if (local.split(":")[-1], remote.split(":")[-1]) == wanted:
                return int(inode)
    return 0


def _holder(inode: int, workers: list[int]) -> int | None:
    link = f"socket:[{inode}]"
    for pid in workers:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == link:
                    return pid
            except OSError:
                pass
    return None


class Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer
        self.owner: int | None = None
        self.waits: list[float] = []
        self.asked: float | None = None  # when the /health in flight was sent
        self.broke = False

    @classmethod
    async def pinned(cls, port: int, workers: list[int]) -> Conn:
        conn = cls(*await asyncio.open_connection("127.0.0.1", port))
        await conn.get("/health")
        conn.owner = _holder(_inode_of_server_end(port, conn.writer.get_extra_info("sockname")[1]), workers)
        return conn

    async def get(self, path: str) -> None:
        self.writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        await self.writer.drain()
        head = (await self.reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        length = next((int(h.split(":", 1)[1]) for h in head if h.lower().startswith("content-length:")), 0)
        await self.reader.readexactly(length)
        if head[0].split()[1] != "200":
            raise ConnectionError(head[0])

    async def poll(self, stop: asyncio.Event, every: float) -> None:
        while not stop.is_set():
            self.asked = time.monotonic()
            try:
                await self.get("/health")
            except (OSError, asyncio.IncompleteReadError):
                self.broke = True
                return
            self.waits.append(time.monotonic() - self.asked)
            self.asked = None
            await asyncio.sleep(every)

    def longest(self) -> float:
        in_flight = time.monotonic() - self.asked if self.asked is not None else 0.0
        return max([in_flight, *self.waits])


async def _drill(port, workers, slow_path, limit, max_connections, poll_every, timeout) -> Verdict:
    conns: list[Conn] = []
    try:
        while not set(workers) <= {c.owner for c in conns} and len(conns) < max_connections:
            conns.append(await Conn.pinned(port, workers))
        missing = set(workers) - {c.owner for c in conns}
        if missing:
            return Verdict("void", reason=f"no connection reached worker(s) {sorted(missing)}")
        slow = await Conn.pinned(port, workers)
        stop = asyncio.Event()
        polls = [asyncio.create_task(c.poll(stop, poll_every)) for c in conns]
        answered = asyncio.create_task(slow.get(slow_path))
        mine = [c for c in conns if c.owner == slow.owner]
        deadline = time.monotonic() + timeout
        try:  # a frozen worker may never answer: judge the waits while they last
            while not answered.done() and time.monotonic() < deadline:
                if any(c.broke or c.longest() > limit for c in mine):
                    break
                await asyncio.sleep(poll_every)
        finally:
            stop.set()
            for task in [*polls, answered]:
                task.cancel()
            await asyncio.gather(*polls, answered, return_exceptions=True)
        conns.append(slow)
        worst = {pid: max([c.longest() for c in conns[:-1] if c.owner == pid], default=0.0) for pid in workers}
        if any(c.broke for c in mine) or worst[slow.owner] > limit:
            return Verdict("fail", slow.owner, worst, f"worker {slow.owner}'s /health waited {worst[slow.owner]:.3f} s")
        return Verdict("pass", slow.owner, worst, f"worker {slow.owner}'s /health took at most {worst[slow.owner]:.3f} s")
    finally:
        for c in conns:
            c.writer.close()


def check_workers(port: int, workers: list[int], slow_path: str, *, limit: float,
                  max_connections: int = 64, poll_every: float = 0.05, timeout: float = 60.0) -> Verdict:
    """Judge the worker that serves GET `slow_path`: "fail", "pass", or "void" when a worker was not reached."""
    return asyncio.run(_drill(port, workers, slow_path, limit, max_connections, poll_every, timeout))
