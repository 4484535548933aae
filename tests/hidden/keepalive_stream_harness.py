"""The real server, the scripted draft and the streaming client of kata 09 (keepalive-stream).

Used by the hidden tests (test_09_keepalive_stream.py) and by notebook 09's lab.

- `Script(seconds, fails=None)`: a draft whose step n takes seconds[n] (and whose
  step `fails`, if given, raises a RuntimeError after its time, as a model
  call that fails). Its `events(draft_id, start)` is the async generator the app
  streams; it records on one clock when each step starts, finishes, fails or is
  cancelled, and when the generator is closed (its `finally`), so a test can
  count steps started twice and see what is still running after a client left.
- `Served(app)`: uvicorn serving the app on 127.0.0.1 (an ephemeral port) on a
  thread of its own, with its own event loop. Leaving the `with` block stops the
  server, cancels whatever the app left running (as asyncio.run does), closes
  the loop and joins the thread. The server's log records at ERROR and above,
  from any logger (uvicorn's, asyncio's, the app's own), are kept (`errors`).
- `read_stream(url, ...)`: one streaming GET with httpx, every chunk and every
  SSE frame timestamped on arrival; stops at a deadline, or when `leave`
  says so (the client goes away mid-stream).
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Self

import httpx
import uvicorn

from loopkata.testing import Deadline, describe_frames

# --- the draft ------------------------------------------------------------------

class Script:
    """A draft of len(seconds) sections; step n sleeps seconds[n], then yields section n's event
    (or, for step `fails`, raises a RuntimeError: the model call failed)."""

    def __init__(self, seconds, fails: int | None = None):
        self.seconds = list(seconds)
        self.fails = fails
        self.raised: list[BaseException] = []  # the exceptions the failing step raised
        self.log: list[tuple[float, str, int | None]] = []  # (time.monotonic(), what, step)

    def _record(self, what: str, step: int | None = None) -> None:
        self.log.append((time.monotonic(), what, step))

    async def events(self, draft_id: str, start: int = 0):
        """The async generator the app streams: one SSE event per step, from step `start` on."""
        self._record("opened", start)
        try:
            for n in range(start, len(self.seconds)):
                self._record("started", n)
                try:
                    await asyncio.sleep(self.seconds[n])
                except asyncio.CancelledError:
                    self._record("cancelled", n)
                    raise
                if n == self.fails:
                    self._record("failed", n)
                    error = self.failure(n)
                    self.raised.append(error)
                    raise error
                self._record("finished", n)
                yield f"id: {n}\ndata: section {n}\n\n"
        finally:
            self._record("closed")

    @staticmethod
    def failure(n: int) -> RuntimeError:
        """The exception step n raises when it is the failing step."""
        return RuntimeError(f"the model provider answered 503 Service Unavailable (step {n})")

    def expected(self) -> list[str]:
        return [f"section {n}" for n in range(len(self.seconds))]

    def starts(self) -> dict[int, int]:
        """How many times each step was started."""
        counts = {n: 0 for n in range(len(self.seconds))}
        for _, what, step in list(self.log):
            if what == "started":
                counts[step] += 1
        return counts

    def when(self, what: str, step: int | None = None) -> list[float]:
        return [t for t, w, s in list(self.log) if w == what and (step is None or s == step)]

    def running(self) -> list[int]:
        """Steps started more often than they finished or were cancelled: still running now."""
        open_ = {}
        for _, what, step in list(self.log):
            if what == "started":
                open_[step] = open_.get(step, 0) + 1
            elif what in ("finished", "failed", "cancelled"):
                open_[step] = open_.get(step, 0) - 1
        return sorted(s for s, n in open_.items() if n > 0)

    def closed(self) -> bool:
        return bool(self.when("closed"))


# --- the server -----------------------------------------------------------------

class _Errors(logging.Handler):
    """The server's error log records (an exception in the app, with its traceback), from any logger."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []
        self.times: list[float] = []  # time.monotonic() when each record was logged

    def emit(self, record):
        if not any(record is seen for seen in self.records):  # once, if two of our loggers both see it
            self.records.append(record)
            self.times.append(time.monotonic())

# Where the errors are read: the root logger (every logger that propagates: uvicorn's, asyncio's for
# the loop's exception handler, the app's own), and uvicorn's, in case something stops it propagating.
_ERROR_LOGGERS = ("", "uvicorn.error", "asyncio")


class _Server(uvicorn.Server):
    """uvicorn's server, stopped by an event rather than a flag it polls every 0.1 s."""

    stopping: asyncio.Event

    async def main_loop(self) -> None:
        await self.stopping.wait()

    async def shutdown(self, sockets=None) -> None:
        for server in self.servers:
            server.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        deadline = time.monotonic() + 0.5
        while self.server_state.connections and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        for connection in list(self.server_state.connections):
            transport = getattr(connection, "transport", None)
            if transport is not None:
                transport.close()  # a response the app is still streaming: cut it


class Served:
    """Serve `app` with uvicorn on 127.0.0.1 in a thread of its own; stop everything on the way out."""

    def __init__(self, app):
        self.app = app
        self.errors = _Errors()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stopping_at = float("inf")
        self._main: asyncio.Task | None = None
        self._failed: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="uvicorn", daemon=True)
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, log_level="warning",
                                lifespan="off", access_log=False)
        self._server = _Server(config)

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    def _run(self):
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # noqa: BLE001 - reported by __enter__
            self._failed = exc

    async def _serve(self):
        self.loop = asyncio.get_running_loop()
        self._main = asyncio.current_task()
        self._server.stopping = asyncio.Event()
        await self._server.serve()

    def __enter__(self) -> Self:
        for name in _ERROR_LOGGERS:
            logging.getLogger(name).addHandler(self.errors)
        self._thread.start()
        deadline = time.monotonic() + 15
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError(f"the server did not start: {self._failed!r}")
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not start within 15 s")
            time.sleep(0.002)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        return self

    def __exit__(self, *exc):
        self.stopping_at = time.monotonic()  # what the server does from here on is its own teardown
        try:
            if self.loop is not None and not self.loop.is_closed():
                self.loop.call_soon_threadsafe(self._server.stopping.set)
            self._thread.join(2)  # a loop blocked for good cannot stop: its daemon thread is left
        except RuntimeError:
            pass  # the loop closed meanwhile
        finally:
            for name in _ERROR_LOGGERS:
                logging.getLogger(name).removeHandler(self.errors)

    def stopped(self) -> bool:
        return not self._thread.is_alive()

    def pending_tasks(self, timeout: float = 1.0) -> list[str] | None:
        """Tasks still pending on the server's loop besides the server's own, described; None if the
        loop did not answer within `timeout` (it is blocked)."""
        async def snapshot():
            me = asyncio.current_task()
            return [describe_task(t) for t in asyncio.all_tasks() if t not in (me, self._main) and not t.done()]
        try:
            return asyncio.run_coroutine_threadsafe(snapshot(), self.loop).result(timeout)
        except TimeoutError:
            return None

    def error_records(self) -> list[logging.LogRecord]:
        """The server's error log records until the test stopped it (not those of its own teardown)."""
        return [r for r, t in zip(list(self.errors.records), list(self.errors.times)) if t <= self.stopping_at]

    def error_text(self) -> str:
        """The server's logged exceptions, one line each: 'RuntimeError: ...'."""
        lines = []
        for record in self.errors.records:
            if record.exc_info and record.exc_info[1] is not None:
                exc = record.exc_info[1]
                lines.append(f"{type(exc).__name__}: {exc}")
            else:
                lines.append(record.getMessage())
        return "; ".join(dict.fromkeys(lines))


def describe_task(task: asyncio.Task) -> str:
    """A pending task in words: its coroutine and, when it runs code of the kata, that line."""
    frames, coro = [], task.get_coro()
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None) or getattr(coro, "ag_frame", None)
        if frame is None:
            break
        frames.append((frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name))
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None) or getattr(coro, "ag_await", None)
    name = getattr(task.get_coro(), "__qualname__", type(task.get_coro()).__name__)
    if name.endswith(("_wrap_awaitable", "async_generator_asend")):
        name = "a task running anext() of the generator (a step in progress)"
    mine = describe_frames(frames, fallback=False)
    return f"{name}" + (f" at {mine[-1]}" if mine else "")


# --- the client -----------------------------------------------------------------

@dataclass
class Reading:
    """What the client received: every SSE frame with its arrival time (seconds since the request)."""

    started: float  # time.monotonic() when the request was sent
    status: int | None = None
    frames: list[tuple[float, str]] = field(default_factory=list)
    chunks: list[float] = field(default_factory=list)  # arrival time of every chunk of bytes
    headers_at: float | None = None
    ended: str = "not started"  # complete | broken | silent | deadline | left | refused
    ended_at: float = 0.0
    error: str = ""

    def at(self, t: float) -> float:
        """A time.monotonic() of the server's log, on this reading's clock."""
        return t - self.started

    def items(self) -> list[str]:
        return [data for _, data in self.item_frames()]

    def item_frames(self) -> list[tuple[float, str]]:
        out = []
        for t, frame in self.frames:
            data = [line[5:].strip() for line in frame.splitlines() if line.startswith("data:")]
            if data:
                out.append((t, "\n".join(data)))
        return out

    def keepalives(self) -> list[float]:
        return [t for t, frame in self.frames if is_comment(frame)]

    def silences(self) -> list[tuple[float, float]]:
        """(from, to) of every stretch without a byte, from the response's headers to its end."""
        marks = ([self.headers_at] if self.headers_at is not None else []) + self.chunks
        if self.ended in ("complete", "broken", "silent", "deadline", "left"):
            marks = marks + [self.ended_at]
        return list(itertools.pairwise(marks))

    def story(self, limit: int = 12) -> str:
        """What arrived, in words: '0.05 s keepalive, 0.16 s section 0, ..., 0.40 s end of stream'."""
        parts = []
        for t, frame in self.frames[:limit]:
            if is_comment(frame):
                parts.append(f"{t:.2f} s keepalive")
            else:
                data = " ".join(line[5:].strip() for line in frame.splitlines() if line.startswith("data:"))
                parts.append(f"{t:.2f} s {data or repr(frame)}")
        if len(self.frames) > limit:
            parts.append(f"... {len(self.frames) - limit} more frames")
        parts.append(f"{self.ended_at:.2f} s {ENDINGS.get(self.ended, self.ended)}")
        return ", ".join(parts)


ENDINGS = {
    "complete": "end of stream",
    "broken": "the server broke the response off",
    "silent": "nothing more (the client stopped waiting)",
    "deadline": "still streaming (the client stopped reading)",
    "left": "the client left",
    "refused": "no response",
}


def is_comment(frame: str) -> bool:
    lines = [line for line in frame.splitlines() if line]
    return bool(lines) and all(line.startswith(":") for line in lines)


def read_stream(url: str, *, deadline: float, leave=None, silence: float | None = None) -> Reading:
    """GET `url` and read its event stream until it ends, for at most `deadline` seconds (plus the
    time a busy machine keeps this process, the server's, waiting for a CPU meanwhile).

    `leave(reading)`, if given, is asked after every frame: True closes the
    connection there (a client going away mid-stream). The client stops waiting
    after `silence` seconds without a byte (default: `deadline`).
    """
    started, until = time.monotonic(), Deadline(deadline)
    reading = Reading(started=started)
    timeout = httpx.Timeout(5.0, read=silence or deadline)
    try:
        # plain HTTP to 127.0.0.1: no TLS, so no certificates to load (that costs up to 0.1 s per client)
        with httpx.Client(timeout=timeout, verify=False) as client, client.stream("GET", url) as response:
            reading.status = response.status_code
            reading.headers_at = time.monotonic() - started
            buffer, event = "", []
            for chunk in response.iter_raw():
                now = time.monotonic() - started
                reading.chunks.append(now)
                buffer += chunk.decode("utf-8", errors="replace").replace("\r\n", "\n")
                while "\n" in buffer:
                    line, buffer = buffer.split("\n", 1)
                    # SSE: a line starting with ':' is a comment (a keepalive); a blank line ends an event
                    if line.startswith(":"):
                        reading.frames.append((now, line))
                    elif line:
                        event.append(line)
                        continue
                    elif event:
                        reading.frames.append((now, "\n".join(event)))
                        event = []
                    else:
                        continue
                    if leave is not None and leave(reading):
                        reading.ended, reading.ended_at = "left", time.monotonic() - started
                        return reading
                if until.passed():
                    reading.ended, reading.ended_at = "deadline", time.monotonic() - started
                    return reading
            reading.ended = "complete"
    except httpx.RemoteProtocolError as exc:
        reading.ended, reading.error = "broken", str(exc)
    except httpx.ReadTimeout:
        reading.ended = "silent"
    except httpx.TransportError as exc:
        reading.ended, reading.error = "refused", f"{type(exc).__name__}: {exc}"
    reading.ended_at = time.monotonic() - started
    return reading
