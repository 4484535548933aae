"""The stock service and the warm container of kata 11 (warm-invocation).

Used by the hidden tests (test_11_warm_invocation.py) and by notebook 11's lab.

- `StockService`: the upstream HTTP/1.1 API on 127.0.0.1 (an ephemeral port), a
  real server on a thread of its own with its own event loop. `GET /stock/{sku}`
  answers the units left; `POST /reservations` reserves units of a sku. A write
  that carries an `Idempotency-Key` header is applied once per key: the same
  key again gets the first answer back, marked `Idempotent-Replayed: true`,
  and changes nothing; a write without a key is applied every time it
  arrives. It counts what it sees: connections accepted, connections it closed
  because they stayed idle past its keep-alive timeout, every write applied,
  every write that arrived. `drop_after_next_write()` makes it apply the next
  write and then close that connection without answering (the connection
  died after the server had done the work); `drop_mid_answer_after_next_write()`
  makes it apply the next write, send the head of its answer and part of its
  body, and then close that connection (it died part-way through the answer);
  `hold_next_write()` makes it read the next write and neither apply nor
  answer it until the client closes that connection (it gave the write up:
  nothing is applied) or the test calls `release_held_write()` (then it is
  applied and answered); `refuse_next_writes(n)` closes
  the connection of each of the next n writes unapplied (an upstream that is
  down). With `reset_idle` set, it resets an
  idle connection (RST) instead of closing it, as a load balancer or a NAT
  gateway drops an idle flow.
- `Container`: a warm Lambda container, for real: a Python process of its own
  that imports the implementation under test once and calls its
  `handler(event)` once per `invoke(event)`, on its main thread, as the
  runtime does, with a `context` as the runtime's: `get_remaining_time_in_millis()`
  counts down the invocation's time (LAMBDA_TIMEOUT, or the budget the test
  gives). After each call it reports what handler returned or raised,
  and every asyncio task still pending on an event loop of the process.
  `freeze_past_keepalive(service)` SIGSTOPs it, waits until the service has
  closed, by its keep-alive timer, every connection that was open, and
  SIGCONTs it: what `docker pause` does to a container between invocations.
  The process is killed when the `with` block ends, whatever happened.

Run as a script (`python warm_invocation_harness.py IMPL`), this file is the
container's own side: it reads one JSON event per line and answers one JSON
line per call.
"""
from __future__ import annotations

import asyncio
import gc
import importlib.util
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Self

from loopkata.services import containers
from loopkata.services.processes import die_with_parent
from loopkata.testing import describe_frames, hang_after

KEEPALIVE = 0.3  # seconds the service keeps an idle connection open (a Node.js server: 5 s)
LAMBDA_TIMEOUT = 60.0  # seconds an invocation may run, as the function's configured timeout, unless a test says less
STOCK = {"kettle": 40, "toaster": 25, "blender": 12}


# --- the upstream service ------------------------------------------------------------

_CUT = "cut"  # an extra header that is never sent: the answer is cut off part-way through its body
_HOLD = "hold"  # a status: the write is read, and neither applied nor answered until it is released


class _Connection(asyncio.Protocol):
    """One client connection: HTTP/1.1 with keep-alive, requests answered in order."""

    def __init__(self, service: StockService):
        self.service = service
        self.transport: asyncio.Transport | None = None
        self.buffer = b""
        self.idle_timer: asyncio.TimerHandle | None = None
        self.forgotten = False  # a load balancer forgot this flow: what comes next on it is answered with a reset

    def connection_made(self, transport):
        self.transport = transport
        with self.service.lock:
            self.service.accepted += 1
            self.service.open.add(self)
        self._arm()

    def connection_lost(self, exc):
        self._disarm()
        with self.service.lock:
            self.service.open.discard(self)
            if self.service._held is not None and self.service._held[0] is self:
                self.service._held = None
                self.service.held_given_up += 1  # the client closed it while the write waited for its answer

    def _arm(self):
        self._disarm()
        self.idle_timer = asyncio.get_running_loop().call_later(self.service.keepalive, self._idle_too_long)

    def _disarm(self):
        if self.idle_timer is not None:
            self.idle_timer.cancel()
            self.idle_timer = None

    def _idle_too_long(self):
        with self.service.lock:
            self.service.closed_idle += 1
        if self.service.reset_idle:
            self._reset()  # as a load balancer or NAT gateway drops an idle flow: a reset (RST), not a FIN
            return
        self.transport.close()

    def _reset(self):
        sock = self.transport.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()

    def data_received(self, data):
        self._disarm()
        if self.forgotten:
            self._reset()  # the request is never read: nothing is applied
            return
        self.buffer += data
        while True:
            head_end = self.buffer.find(b"\r\n\r\n")
            if head_end < 0:
                break
            head = self.buffer[:head_end].decode("latin-1").split("\r\n")
            headers = {}
            for line in head[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0") or 0)
            if len(self.buffer) < head_end + 4 + length:
                break
            body = self.buffer[head_end + 4:head_end + 4 + length]
            self.buffer = self.buffer[head_end + 4 + length:]
            method, _, rest = head[0].partition(" ")
            path = rest.rsplit(" ", 1)[0]
            if not self._answer(method, path, headers, body):
                return
        if self.buffer or self.transport.is_closing():
            return
        self._arm()

    def _answer(self, method: str, path: str, headers: dict, body: bytes) -> bool:
        """Answer one request; False if the connection was closed instead."""
        status, payload, extra = self.service.handle(method, path, headers, body)
        if status == _HOLD:
            with self.service.lock:
                self.service._held = (self, payload)
            return False  # nothing more is read or answered on it until it is released or closed
        return self._send(status, payload, extra, headers)

    def _send(self, status, payload, extra: dict, headers: dict) -> bool:
        if status is None:
            self.transport.close()  # the connection died before the answer (the write applied or not)
            return False
        cut = extra.pop(_CUT, False)
        data = json.dumps(payload).encode()
        reason = {200: "OK", 201: "Created", 400: "Bad Request", 404: "Not Found", 409: "Conflict",
                  503: "Service Unavailable"}[status]
        lines = [f"HTTP/1.1 {status} {reason}", "Content-Type: application/json",
                 f"Content-Length: {len(data)}", f"Keep-Alive: timeout={self.service.keepalive:g}"]
        lines += [f"{k}: {v}" for k, v in extra.items()]
        close = headers.get("connection", "").lower() == "close"
        lines.append("Connection: close" if close else "Connection: keep-alive")
        if cut:  # the head and half of the body, then the connection dies: the answer ends part-way through
            self.transport.write(("\r\n".join(lines) + "\r\n\r\n").encode() + data[:len(data) // 2])
            self.transport.close()
            return False
        self.transport.write(("\r\n".join(lines) + "\r\n\r\n").encode() + data)
        if close:
            self.transport.close()
            return False
        return True


class StockService:
    """The upstream API, on 127.0.0.1, on a thread and event loop of its own (see the module docstring)."""

    def __init__(self, keepalive: float = KEEPALIVE):
        self.keepalive = keepalive
        self.url = ""
        self.lock = threading.Lock()
        self.accepted = 0  # connections accepted
        self.closed_idle = 0  # connections it closed because they stayed idle past `keepalive`
        self.reset_idle = False  # True: an idle connection is reset (RST), as a load balancer does, not closed
        self.open: set[_Connection] = set()
        self.stock = dict(STOCK)
        self.applied: list[dict] = []  # every reservation applied, in order
        self.arrived: list[dict] = []  # every write that arrived: {"order", "key"}
        self.replayed = 0  # writes answered from a key already applied
        self._answers: dict[str, dict] = {}  # idempotency key -> the answer given when it was applied
        self._drop_next = False
        self._cut_next = False
        self._hold_next = False
        self._held: tuple | None = None  # (connection, the write) read and held, unanswered
        self.held_given_up = 0  # held writes whose connection the client closed while they waited
        self._refuse = 0  # writes still to refuse (refuse_next_writes)
        self._unavailable = 0  # writes still to answer 503 (unavailable_for_next_writes)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None

    # --- what the tests read ---

    def open_connections(self) -> int:
        with self.lock:
            return len(self.open)

    def applied_for(self, order: str) -> int:
        with self.lock:
            return sum(1 for r in self.applied if r["order"] == order)

    def arrived_for(self, order: str) -> list[dict]:
        with self.lock:
            return [w for w in self.arrived if w["order"] == order]

    def drop_after_next_write(self) -> None:
        """Apply the next write, then close its connection without answering."""
        with self.lock:
            self._drop_next = True

    def drop_mid_answer_after_next_write(self) -> None:
        """Apply the next write, send the head of its answer and half of its body, then close its connection."""
        with self.lock:
            self._cut_next = True

    def hold_next_write(self) -> None:
        """Read the next write and leave it unapplied and unanswered until its connection closes or it is released."""
        with self.lock:
            self._hold_next = True

    def stop_holding(self) -> None:
        """Hold no further write (one held already stays held): for when the write to hold never came."""
        with self.lock:
            self._hold_next = False

    def holding(self) -> bool:
        """A held write still waits for its answer on a connection the client keeps open."""
        with self.lock:
            return self._held is not None

    def release_held_write(self) -> None:
        """Apply the held write and answer it, if its connection is still open; returns once done."""
        done = threading.Event()

        def release():
            with self.lock:
                held, self._held = self._held, None
            if held is not None:
                conn, write = held
                conn._send(*self._apply(*write), {})
            done.set()

        self._loop.call_soon_threadsafe(release)
        done.wait(10.0)  # against a hang only

    def refuse_next_writes(self, n: int) -> None:
        """Close the connection of each of the next `n` writes as it arrives, unapplied (an upstream that is down)."""
        with self.lock:
            self._refuse = n

    def unavailable_for_next_writes(self, n: int) -> None:
        """Answer each of the next `n` writes 503 Service Unavailable, unapplied (an upstream that is down, behind
        a load balancer or a gateway that still answers)."""
        with self.lock:
            self._unavailable = n

    def drop_open_connections(self, reset: bool) -> None:
        """Close every connection open now, with a FIN, or with a reset (RST) when `reset`, as a service that
        restarts or a load balancer that forgets a flow does; returns once the service holds none open."""
        done = threading.Event()

        def drop():
            for conn in list(self.open):
                if reset:
                    conn._reset()
                else:
                    conn.transport.close()
            done.set()

        self._loop.call_soon_threadsafe(drop)
        deadline = time.monotonic() + 10.0  # against a hang only
        while (not done.is_set() or self.open_connections()) and time.monotonic() < deadline:
            time.sleep(0.005)

    def forget_open_connections(self) -> None:
        """As a load balancer that forgot every flow open now (its idle timer, a failover): nothing is sent on them,
        and the next packet the client sends on one is answered with a reset (RST), its request never read."""
        done = threading.Event()

        def forget():
            for conn in list(self.open):
                conn.forgotten = True
            done.set()

        self._loop.call_soon_threadsafe(forget)
        done.wait(10.0)  # against a hang only

    # --- serving ---

    def handle(self, method: str, path: str, headers: dict, body: bytes):
        """(status, payload, extra headers); status None: close without answering (applied or refused)."""
        if method == "GET" and path.startswith("/stock/"):
            sku = path[len("/stock/"):]
            with self.lock:
                if sku not in self.stock:
                    return 404, {"error": f"no such sku {sku!r}"}, {}
                return 200, {"sku": sku, "available": self.stock[sku]}, {}
        if method == "POST" and path == "/reservations":
            try:
                write = json.loads(body)
                order, sku, qty = write["order"], write["sku"], int(write["qty"])
            except (ValueError, KeyError, TypeError):
                return 400, {"error": "a reservation is {order, sku, qty}"}, {}
            key = headers.get("idempotency-key") or None
            with self.lock:
                self.arrived.append({"order": order, "key": key})
                if self._refuse:
                    self._refuse -= 1
                    return None, None, None
                if self._unavailable:
                    self._unavailable -= 1
                    return 503, {"error": "the stock service is down"}, {}
                if self._hold_next:
                    self._hold_next = False
                    return _HOLD, (order, sku, qty, key), None
            return self._apply(order, sku, qty, key)
        return 404, {"error": f"no route {method} {path}"}, {}

    def _apply(self, order: str, sku: str, qty: int, key: str | None):
        """A write that arrived, applied once per key: (status, payload, extra headers), status None to close."""
        with self.lock:
            if key is not None and key in self._answers:
                self.replayed += 1
                return 201, self._answers[key], {"Idempotent-Replayed": "true"}
            if self.stock.get(sku, 0) < qty:
                return 409, {"error": f"only {self.stock.get(sku, 0)} {sku} left"}, {}
            self.stock[sku] -= qty
            answer = {"reservation": len(self.applied) + 1, "order": order, "sku": sku, "qty": qty}
            self.applied.append(answer)
            if key is not None:
                self._answers[key] = answer
            if self._drop_next:
                self._drop_next = False
                return None, None, None
            if self._cut_next:
                self._cut_next = False
                return 201, answer, {_CUT: True}
            return 201, answer, {}

    def __enter__(self) -> Self:
        started = threading.Event()
        failed: list[BaseException] = []

        def serve():
            loop = self._loop = asyncio.new_event_loop()
            try:
                self._server = loop.run_until_complete(
                    loop.create_server(lambda: _Connection(self), "127.0.0.1", 0))
                port = self._server.sockets[0].getsockname()[1]
                self.url = f"http://127.0.0.1:{port}"
            except BaseException as exc:  # noqa: BLE001 - reported to the test below
                failed.append(exc)
                started.set()
                loop.close()
                return
            started.set()
            try:
                loop.run_forever()
            finally:
                self._server.close()
                for conn in list(self.open):
                    conn.transport.abort()
                loop.run_until_complete(asyncio.sleep(0))
                loop.close()

        self._thread = threading.Thread(target=serve, name="stock-service", daemon=True)
        self._thread.start()
        if not started.wait(10) or failed:
            self.__exit__()
            raise RuntimeError(f"the test's stock service could not start: {failed[0] if failed else 'no answer in 10 s'}")
        return self

    def __exit__(self, *exc) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)


# --- the warm container: the test's side -------------------------------------------------

class ContainerDied(Exception):
    """The container process ended (or stopped answering) while it was asked to do something."""


class Container:
    """One warm container: a process of its own that imports `impl` once (see the module docstring)."""

    def __init__(self, impl: Path, hang_after: float, env: dict | None = None, as_pid1: bool = False):
        self.impl = Path(impl)
        self.hang_after = hang_after
        self.env = env
        # PID 1 of a PID namespace of its own, as a container's process is, where the kernel allows one (then
        # `proc` is unshare's process, so such a container is never frozen)
        self.prefix = containers.pid_namespace_argv() if as_pid1 else []
        self.proc: subprocess.Popen | None = None
        self.frozen = 0  # freezes so far

    def __enter__(self) -> Self:
        env = {**os.environ, **(self.env or {}), "LOOPKATA_HANG_AFTER": str(self.hang_after),
               "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [*self.prefix, sys.executable, __file__, str(self.impl)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=env, start_new_session=True, preexec_fn=die_with_parent(signal.SIGKILL))  # noqa: PLW1509 - prctl only
        self._stderr: list[bytes] = []
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        ready = self._read(30.0, "importing the code under test")
        if "import_error" in ready:
            raise ContainerDied(ready["import_error"])
        return self

    def _drain_stderr(self):
        for line in self.proc.stderr:
            self._stderr.append(line)

    def stderr(self) -> str:
        return b"".join(self._stderr).decode(errors="replace")

    def __exit__(self, *exc) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait(5)
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass

    def _read(self, seconds: float, doing: str) -> dict:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], min(0.2, max(deadline - time.monotonic(), 0)))
            if ready:
                line = self.proc.stdout.readline()
                if not line:
                    break
                return json.loads(line)
            if self.proc.poll() is not None:
                break
        code = self.proc.poll()
        how = (f"ended with exit status {code}" if code is not None and code >= 0 else
               f"was killed by {signal.Signals(-code).name}" if code is not None else
               f"gave no answer within {seconds:g} s")
        tail = self.stderr().strip().splitlines()[-6:]
        raise ContainerDied(f"the container process {how} while {doing}"
                            + (":\n    " + "\n    ".join(tail) if tail else ""))

    def invoke(self, event: dict, what: str, budget: float = LAMBDA_TIMEOUT) -> dict:
        """Call handler(event, context) once in the container, the context's time left `budget` seconds:
        {"value"} or {"error"} or {"hang"}, and "tasks"."""
        self.proc.stdin.write((json.dumps({"event": event, "what": what, "budget": budget}) + "\n").encode())
        self.proc.stdin.flush()
        return self._read(self.hang_after + 15.0, "it ran handler(event)")

    def other_client_post(self, url: str, body: dict) -> dict:
        """In the container process, between two invocations: another part of the function POSTs `body` to `url`
        with a client of its own (its own session, on an event loop asyncio.run() makes and closes), and no
        Idempotency-Key. {"status"} or {"error"}."""
        self.proc.stdin.write((json.dumps({"other_post": {"url": url, "body": body}}) + "\n").encode())
        self.proc.stdin.flush()
        return self._read(self.hang_after + 15.0, "another client in it sent a POST")

    def state(self) -> str:
        """The process's state letter from /proc (R running, S sleeping, T stopped, ...)."""
        with open(f"/proc/{self.proc.pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()

    def freeze_past_keepalive(self, service: StockService, closed_idle_before: int | None = None) -> dict:
        """SIGSTOP the container, wait until the service has closed by its keep-alive timer every
        connection open when it stopped, SIGCONT it. Returns what the service saw: connections open
        when it stopped, closed by the keep-alive timer meanwhile, still open at SIGCONT, and
        (given the service's `closed_idle` count after the last answer) closed before it stopped."""
        os.kill(self.proc.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 10.0  # against a hang only
        while self.state() != "T":
            if time.monotonic() > deadline:
                raise ContainerDied("the container process did not stop on SIGSTOP within 10 s")
            time.sleep(0.005)
        with service.lock:
            open_at_stop = len(service.open)
            closed_before = service.closed_idle
        early = 0 if closed_idle_before is None else closed_before - closed_idle_before
        try:
            deadline = time.monotonic() + max(10.0, 20 * service.keepalive)  # against a hang only
            while service.open_connections() and time.monotonic() < deadline:
                time.sleep(0.01)
            with service.lock:
                still_open = len(service.open)
                closed = service.closed_idle - closed_before
        finally:
            os.kill(self.proc.pid, signal.SIGCONT)
        self.frozen += 1
        return {"open_at_stop": open_at_stop, "closed_by_keepalive": closed, "still_open": still_open,
                "closed_before_stop": early}


# --- the warm container: the container's side ---------------------------------------------

def _load(impl: Path):
    path = impl.resolve()
    name = "kata_under_test"
    if path.is_dir():
        spec = importlib.util.spec_from_file_location(name, path / "__init__.py", submodule_search_locations=[str(path)])
    else:
        spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _pending_tasks() -> list[str]:
    """Every task not done on an event loop of this process, with the learner's line it waits at."""
    out = []
    for obj in gc.get_objects():
        if not isinstance(obj, asyncio.AbstractEventLoop) or obj.is_closed():
            continue
        try:
            tasks = asyncio.all_tasks(obj)
        except RuntimeError:
            continue
        for task in tasks:
            coro = task.get_coro()
            frames = []
            while coro is not None:
                frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
                if frame is None:
                    break
                frames.append((frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name))
                coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
            where = describe_frames(frames, fallback=True)
            name = getattr(task.get_coro(), "__qualname__", repr(task.get_coro()))
            out.append(f"{name}()" + (f" at {where[-1]}" if where else ""))
    return sorted(out)


class LambdaContext:
    """What the Lambda runtime hands handler as `context`: the invocation's id and the time it has left."""

    def __init__(self, budget: float, number: int):
        self._deadline = time.monotonic() + budget
        self.aws_request_id = f"00000000-0000-4000-8000-{number:012d}"
        self.function_name = "reserve-stock"
        self.memory_limit_in_mb = 128

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def _learner_lines(exc: BaseException) -> list[str]:
    frames = [(f.filename, f.lineno, f.name) for f in traceback.extract_tb(exc.__traceback__)]
    return describe_frames(frames, fallback=False)


def _watch(done: threading.Event, main: int, out, writing: threading.Lock, hung: threading.Event) -> None:
    """Tell the test, once, that handler has not returned after hang_after, and where it is stuck."""
    if done.wait(hang_after()):
        return
    frame = sys._current_frames().get(main)
    frames = [(f.filename, f.lineno, f.name) for f in traceback.extract_stack(frame)] if frame else []
    with writing:
        if done.is_set():
            return
        hung.set()
        _write(out, {"hang": "\n".join(describe_frames(frames)), "tasks": _pending_tasks()})


def _serve(impl: Path) -> None:
    writing, hung = threading.Lock(), threading.Event()
    out = sys.stdout
    sys.stdout = sys.stderr  # what the code under test prints must not mix with the answers
    try:
        kata = _load(impl)
    except BaseException as exc:  # noqa: BLE001 - the test says it in one line
        out.write(json.dumps({"import_error": f"importing the code under test failed with "
                                              f"{type(exc).__name__}: {exc}"}) + "\n")
        out.flush()
        return
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for number, line in enumerate(sys.stdin, 1):
        ask = json.loads(line)
        if "other_post" in ask:
            _write(out, _other_post(**ask["other_post"]))
            continue
        answer: dict = {}
        done = threading.Event()
        threading.Thread(target=_watch, args=(done, threading.get_ident(), out, writing, hung), daemon=True).start()
        try:
            answer["value"] = kata.handler(ask["event"], LambdaContext(ask.get("budget", LAMBDA_TIMEOUT), number))
        except BaseException as exc:  # noqa: BLE001 - handed to the test, type and message
            answer["error"] = {"type": type(exc).__name__, "message": str(exc), "lines": _learner_lines(exc)}
        with writing:
            done.set()
            if hung.is_set():
                continue  # the test was told it hung, and ends the container
        answer["tasks"] = _pending_tasks()
        _write(out, answer)


def _other_post(url: str, body: dict) -> dict:
    """Another client of the function's process: its own aiohttp session, a keyless POST, sent once."""
    import aiohttp

    async def post() -> int:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
            async with session.post(url, json=body) as resp:
                await resp.read()
                return resp.status

    try:
        return {"status": asyncio.run(post())}
    except Exception as exc:  # noqa: BLE001 - handed to the test, type and message
        return {"error": f"{type(exc).__name__}: {exc}"}


def _write(out, answer: dict) -> None:
    try:
        text = json.dumps(answer)
    except (TypeError, ValueError):
        answer["value"] = repr(answer.get("value"))
        text = json.dumps(answer)
    out.write(text + "\n")
    out.flush()


if __name__ == "__main__":
    _serve(Path(sys.argv[1]))
