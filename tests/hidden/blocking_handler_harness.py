"""What the hidden tests of kata 08 (blocking-handler) serve and talk to.

- `ModelAPI`: a stand-in for the drafting model's HTTP API, a real HTTP server
  on 127.0.0.1 with its own thread and event loop. How it answers depends on
  the prompt: "slow: ..." after SLOW seconds, "hang: ..." only when the test
  releases it, "fail: ..." at once with 503 (the model is overloaded). It
  counts the calls it is working on, so a test can see whether calls made at
  the same time ran at the same time.
- `served(app)`: the app under test, served by uvicorn on 127.0.0.1 on a
  thread of its own, stopped (and the thread joined) when the block ends.
  `threads=N` gives the served app's threadpool N threads instead of its 40
  (AnyIO's default thread limiter, the one FastAPI runs a `def` endpoint
  with), so that a test can fill it with a few held requests; the served
  app tells how many tasks wait for a thread of it (`threads_waiting()`), and
  which requests the app is waiting on for more of their body
  (`reading_body`, by X-Request-ID, seen at the ASGI `receive` the server
  hands the app).
- `AccessLines`: every line the logger `drafts.access` writes meanwhile.
- `LoggedTracebacks`: every traceback any logger writes meanwhile (the
  server's "Exception in ASGI application" among them).

Nothing here outlives its `with` block: the model is released before anything
is stopped, so no request of the app under test can be left waiting for it.
"""
from __future__ import annotations

import asyncio
import json
import logging
import re
import ssl
import sys
import threading
import time
from contextlib import contextmanager

import anyio.to_thread
import uvicorn

from loopkata.testing import describe_frames

SLOW = 0.4  # seconds the model takes to answer a slow call (a test tells it to answer sooner once it has seen enough)
ACCESS_LOGGER = "drafts.access"

# The tests speak plain HTTP to 127.0.0.1: a TLS context that loads no CA
# bundle makes each httpx client some 30 ms cheaper to build.
NO_TLS = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def draft_for(prompt: str) -> str:
    """The draft the model writes for `prompt`."""
    return f"Dear customer, about '{prompt}': thank you for writing."


class ModelAPI:
    """The model's HTTP API on 127.0.0.1, on its own thread and event loop."""

    def __init__(self, slow: float = SLOW):
        self.slow = slow
        self.url = ""
        self.arrivals = []  # (monotonic time, prompt) of each call, as it arrives
        self.spans = []  # [prompt, arrived, answered or None] of each call (monotonic times)
        self.working = 0  # calls it is working on now
        self.most_at_once = 0  # the most calls it was ever working on at once
        self._cond = threading.Condition()
        self._loop = None
        self._release = None
        self._stop = None
        self._thread = None

    # --- the test's side -------------------------------------------------------

    def __enter__(self) -> ModelAPI:
        started = threading.Event()
        failed = []

        def run():
            try:
                asyncio.run(self._main(started))
            except BaseException as exc:  # noqa: BLE001 - reported to the test below
                failed.append(exc)
                started.set()

        self._thread = threading.Thread(target=run, name="model API", daemon=True)
        self._thread.start()
        if not started.wait(10) or failed:
            raise RuntimeError(f"the stand-in for the model's API did not start: {failed[:1]}")
        return self

    def __exit__(self, *exc) -> None:
        self.release()
        if self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(self._stop.set)
            except RuntimeError:
                pass  # its loop has already closed
        self._thread.join(5)

    def release(self) -> None:
        """Answer every call now, and every call that comes after at once."""
        if self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(self._release.set)
            except RuntimeError:
                pass

    def wait_for_calls(self, count: int, seconds: float) -> bool:
        """Wait until `count` calls have arrived, at most `seconds`; did they?"""
        with self._cond:
            return self._cond.wait_for(lambda: len(self.arrivals) >= count, timeout=seconds)

    def wait_for_working(self, count: int, seconds: float) -> bool:
        """Wait until the model is working on `count` calls at once, at most `seconds`; is it?"""
        with self._cond:
            return self._cond.wait_for(lambda: self.working >= count, timeout=seconds)

    def held(self) -> list[str]:
        """The prompts of the calls the model is working on now."""
        with self._cond:
            return [prompt for prompt, _, answered in self.spans if answered is None]

    # --- the server ------------------------------------------------------------

    async def _main(self, started: threading.Event) -> None:
        self._loop = asyncio.get_running_loop()
        self._release, self._stop = asyncio.Event(), asyncio.Event()
        handlers = set()

        async def on_connect(reader, writer):
            task = asyncio.current_task()
            handlers.add(task)
            try:
                await self._serve(reader, writer)
            except (ConnectionError, asyncio.IncompleteReadError):
                pass
            finally:
                handlers.discard(task)
                writer.close()

        server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        started.set()
        await self._stop.wait()
        server.close()
        if handlers:
            await asyncio.wait(handlers, timeout=2)
        for task in handlers:
            task.cancel()
        await server.wait_closed()

    async def _serve(self, reader, writer) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.decode("latin-1").split("\r\n")[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        body = await reader.readexactly(length) if length else b""
        try:
            prompt = str(json.loads(body or b"{}").get("prompt", ""))
        except ValueError:
            prompt = ""
        span = [prompt, time.monotonic(), None]
        with self._cond:
            self.arrivals.append((span[1], prompt))
            self.spans.append(span)
            self.working += 1
            self.most_at_once = max(self.most_at_once, self.working)
            self._cond.notify_all()
        try:
            if prompt.startswith("fail:"):
                status, answer = "503 Service Unavailable", {"error": "the model is overloaded, try again later"}
            else:
                if prompt.startswith("hang:"):
                    await asyncio.wait_for(self._release.wait(), 30)
                else:
                    try:
                        await asyncio.wait_for(self._release.wait(), self.slow)
                    except TimeoutError:
                        pass
                status, answer = "200 OK", {"text": draft_for(prompt)}
        finally:
            with self._cond:
                self.working -= 1
                span[2] = time.monotonic()
                self._cond.notify_all()
        data = json.dumps(answer).encode()
        writer.write(
            f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
            "Connection: close\r\n\r\n".encode() + data
        )
        await writer.drain()


class BodyReads:
    """Wraps the app as the server calls it: which requests the app is waiting on for more of their body.

    Each request is known by its X-Request-ID. A request is in `reading` while the app waits in the
    ASGI `receive()` the server handed it (for a POST, the next piece of its body), and in `ended`
    once the app's call for it has returned or raised.
    """

    def __init__(self, app):
        self.app = app
        self.reading: dict[str, int] = {}
        self.ended: set[str] = set()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = dict(scope.get("headers") or []).get(b"x-request-id", b"-").decode("latin-1")

        async def watched_receive():
            self.reading[rid] = self.reading.get(rid, 0) + 1
            try:
                return await receive()
            finally:
                self.reading[rid] -= 1

        try:
            await self.app(scope, watched_receive, send)
        finally:
            self.ended.add(rid)


class Served:
    """The app under test, served by uvicorn: its base URL and the thread that runs its event loop."""

    def __init__(self, url: str, thread: threading.Thread, limiter, reads: BodyReads):
        self.url, self.loop_thread, self._limiter, self._reads = url, thread, limiter, reads
        self.port = int(url.rsplit(":", 1)[1])

    def threads_waiting(self) -> int:
        """How many tasks of the served app wait for a thread of its threadpool right now."""
        return self._limiter.statistics().tasks_waiting

    def reading_body(self, request_id: str) -> bool:
        """Is the app waiting, right now, for more of the body of the request with this X-Request-ID?"""
        return self._reads.reading.get(request_id, 0) > 0

    def ended(self, request_id: str) -> bool:
        """Has the app's call for the request with this X-Request-ID returned or raised?"""
        return request_id in self._reads.ended

    def loop_lines(self) -> list[str]:
        """The lines of the code under test that the event loop thread is running right now (none if it is free)."""
        frame = sys._current_frames().get(self.loop_thread.ident)
        frames = []
        while frame is not None:
            frames.append((frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name))
            frame = frame.f_back
        return describe_frames(frames[::-1], fallback=False)


@contextmanager
def served(app, threads: int | None = None, log_level: str = "critical"):
    """Serve `app` with uvicorn on 127.0.0.1 (an ephemeral port) on a thread of its own; stop it after.

    `threads`: how many threads the served app's threadpool has (AnyIO's default
    thread limiter on the server's event loop; FastAPI's default is 40).
    `log_level`: the level of uvicorn's own loggers ("error" lets "Exception in
    ASGI application" and its traceback through).

    The server is started and stopped step by step rather than with serve(), whose
    main loop only looks at should_exit every 0.1 s and whose shutdown always sleeps
    0.1 s: every check would pay for both.
    """
    reads = BodyReads(app)
    config = uvicorn.Config(reads, host="127.0.0.1", port=0, log_config=None, log_level=log_level,
                            lifespan="off", access_log=False)
    server = uvicorn.Server(config)
    state = {}
    ready = threading.Event()

    async def main():
        state["loop"], state["stop"] = asyncio.get_running_loop(), asyncio.Event()
        state["limiter"] = anyio.to_thread.current_default_thread_limiter()  # this event loop's own
        if threads is not None:  # set here, before any request
            state["limiter"].total_tokens = threads
        config.load()
        server.lifespan = config.lifespan_class(config)
        await server.startup()
        ready.set()
        await state["stop"].wait()
        for listener in server.servers:
            listener.close()
        for connection in list(server.server_state.connections):
            connection.shutdown()
        deadline = time.monotonic() + 2
        while (server.server_state.connections or server.server_state.tasks) and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        for task in server.server_state.tasks:
            task.cancel()
        for listener in server.servers:
            await listener.wait_closed()

    def run():
        try:
            asyncio.run(main())
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            state["error"] = exc
        finally:
            ready.set()

    thread = threading.Thread(target=run, name="uvicorn", daemon=True)
    thread.start()
    ready.wait(15)
    if "error" in state or not server.started:
        raise RuntimeError(f"expected the app to start serving on 127.0.0.1, it did not: {state.get('error')!r}")
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield Served(f"http://127.0.0.1:{port}", thread, state["limiter"], reads)
    finally:
        try:
            state["loop"].call_soon_threadsafe(state["stop"].set)
        except RuntimeError:
            pass  # the loop has already closed
        thread.join(5)


class AccessLines(logging.Handler):
    """Collects every line written on the logger `drafts.access` while the block runs."""

    STATUS = re.compile(r"(?<![\w.])([1-5]\d\d)(?![\w.])")

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines = []
        self._logger = logging.getLogger(ACCESS_LOGGER)

    def emit(self, record) -> None:
        try:
            self.lines.append(record.getMessage())
        except Exception:  # noqa: BLE001 - a record that cannot be formatted is still a line
            self.lines.append(str(record.msg))

    def __enter__(self) -> AccessLines:
        self._level = self._logger.level
        self._logger.addHandler(self)
        self._logger.setLevel(logging.INFO)
        return self

    def __exit__(self, *exc) -> None:
        self._logger.removeHandler(self)
        self._logger.setLevel(self._level)

    def of(self, request_id: str) -> list[str]:
        """The lines that name `request_id`."""
        return [line for line in list(self.lines) if request_id in line]

    @classmethod
    def statuses(cls, line: str) -> set[str]:
        """The HTTP status codes a line names (a completion line names one; an arrival line none)."""
        return set(cls.STATUS.findall(line))


class LoggedTracebacks(logging.Handler):
    """Every traceback written by any logger while the block runs (on the root logger, where records propagate)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.texts = []

    def emit(self, record) -> None:
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a record that cannot be formatted is still a record
            text = str(record.msg)
        if record.exc_info and record.exc_info[1] is not None:
            text += "\n" + logging.Formatter().formatException(record.exc_info)
        elif record.exc_text:
            text += "\n" + record.exc_text
        if "Traceback (most recent call last)" in text:
            self.texts.append(text)

    def __enter__(self) -> LoggedTracebacks:
        logging.getLogger().addHandler(self)
        return self

    def __exit__(self, *exc) -> None:
        logging.getLogger().removeHandler(self)

    def naming(self, *words: str) -> list[str]:
        """The tracebacks that name any of `words`."""
        return [text for text in list(self.texts) if any(word in text for word in words)]
