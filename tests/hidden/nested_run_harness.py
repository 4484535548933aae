"""What the hidden tests of kata 12 (nested-run) serve and talk to.

- `Warehouse`: a stand-in for the warehouse's HTTP API, a real HTTP server on
  127.0.0.1 with its own thread and event loop. `GET /orders/{customer}`
  answers the customer's orders, `PUT /reports/{customer}` stores a report.
  How it answers depends on the customer's name: "held-orders-..." is held at
  the orders call and "held-store-..." at the store call, each until the test
  releases that customer; "broken-..." gets 503 at the orders call; the
  store call of "slow-..." takes `slow` seconds. A held customer may be broken
  too: "held-orders-broken-..." is held, then answered 503. It keeps the calls it holds,
  so a test can see where each job is.
- `served(app)`: the app under test, served by uvicorn on 127.0.0.1 on a
  thread of its own, lifespan included, stopped (and the thread joined) when
  the block ends. `Served.shut_down()` runs the app's shutdown while the test
  watches: whether it finished within a number of event loop turns in which
  nothing the app waits for can have happened. `Served.look()` asks the same
  again later, through a callback the event loop must run: so it also tells
  whether the loop still runs while the shutdown waits. The server's event
  loop has a clock the test can move forward (`ClockLoop`): a look may first
  put it days ahead, and the `time` module's clocks as the app's own modules
  see them (`MovedClocks`), so that every deadline the app set itself on that
  loop or on those clocks has passed, as it would for a job that ran that
  long, without the wait.
- `JobLog`: every record of the logger `reports.jobs`, with its traceback.

Nothing here outlives its `with` block: the warehouse lets every call go before
anything is stopped, so no job can be left waiting for it.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import ssl
import sys
import threading
import time
import traceback
import types
from contextlib import contextmanager
from pathlib import Path

import uvicorn

from loopkata.testing import describe_frames, is_learner_file

JOBS_LOGGER = "reports.jobs"
A_WEEK = 7 * 24 * 3600.0  # seconds a look may move the server's event loop clock ahead: longer than any deadline a shutdown sets itself
QUIET_TURNS = 200  # event loop turns in which a shutdown with nothing to wait for ends (it needs about ten)
SHUTDOWN_GUARD = 2.0  # seconds the server waits for the app's shutdown after the test's last look before it gives up on it (a deadline, not a verdict)

# The tests speak plain HTTP to 127.0.0.1: a TLS context that loads no CA
# bundle makes each httpx client some 30 ms cheaper to build.
NO_TLS = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def orders_for(customer: str) -> list[dict]:
    """The orders the warehouse has for `customer`."""
    return [{"id": i + 1, "cents": 100 * (i + 1) + len(customer)} for i in range(3)]


def report_for(customer: str) -> dict:
    """The report a job builds for `customer`."""
    orders = orders_for(customer)
    return {"customer": customer, "orders": len(orders), "total_cents": sum(o["cents"] for o in orders)}


class Warehouse:
    """The warehouse's HTTP API on 127.0.0.1, on its own thread and event loop."""

    def __init__(self, slow: float = 0.0):
        self.slow = slow  # seconds the store call of a "slow-..." customer takes
        self.url = ""
        self.calls = []  # (step, customer) of every call, as it arrives: step is "orders" or "store"
        self.held = []  # (step, customer) of the calls it holds now
        self.reports = {}  # customer -> the report stored
        self._cond = threading.Condition()
        self._loop = None
        self._released = set()  # customers let go
        self._changed = None
        self._stop = None
        self._thread = None

    # --- the test's side -------------------------------------------------------

    def __enter__(self) -> Warehouse:
        started = threading.Event()
        failed = []

        def run():
            try:
                asyncio.run(self._main(started))
            except BaseException as exc:  # noqa: BLE001 - reported to the test below
                failed.append(exc)
                started.set()

        self._thread = threading.Thread(target=run, name="warehouse API", daemon=True)
        self._thread.start()
        if not started.wait(10) or failed:
            raise RuntimeError(f"the stand-in for the warehouse's API did not start: {failed[:1]}")
        return self

    def __exit__(self, *exc) -> None:
        self.release()
        if self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(self._stop.set)
            except RuntimeError:
                pass  # its loop has already closed
        self._thread.join(5)

    def release(self, customer: str | None = None) -> None:
        """Let the calls for `customer` go (every customer's, and every call after, when None)."""
        with self._cond:
            self._released.add(customer)
        if self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(self._wake)
            except RuntimeError:
                pass

    def wait_for(self, predicate, seconds: float) -> bool:
        """Wait until predicate(self) is true, at most `seconds`; is it?"""
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self), timeout=seconds)

    def holds(self, customer: str) -> bool:
        with self._cond:
            return any(who == customer for _, who in self.held)

    def held_customers(self) -> list[str]:
        with self._cond:
            return [who for _, who in self.held]

    # --- the server ------------------------------------------------------------

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _let_go(self, customer: str) -> bool:
        with self._cond:
            return None in self._released or customer in self._released

    async def _main(self, started: threading.Event) -> None:
        self._loop = asyncio.get_running_loop()
        self._changed, self._stop = asyncio.Event(), asyncio.Event()
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
        lines = head.decode("latin-1").split("\r\n")
        method, path = lines[0].split(" ")[:2]
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        body = await reader.readexactly(length) if length else b""
        step, _, customer = path.strip("/").partition("/")
        step = {"orders": "orders", "reports": "store"}.get(step, "")
        call = (step, customer)
        with self._cond:
            self.calls.append(call)
            self._cond.notify_all()
        if customer.startswith(f"held-{step}-"):
            with self._cond:
                self.held.append(call)
                self._cond.notify_all()
            try:
                deadline = time.monotonic() + 30
                while not self._let_go(customer) and time.monotonic() < deadline:
                    try:
                        await asyncio.wait_for(self._changed.wait(), 1)
                    except TimeoutError:
                        pass
            finally:
                with self._cond:
                    self.held.remove(call)
                    self._cond.notify_all()
        if step == "store" and customer.startswith("slow-"):
            await asyncio.sleep(self.slow)
        if step == "orders" and method == "GET":
            if customer.removeprefix("held-orders-").startswith("broken-"):
                status, answer = "503 Service Unavailable", {"error": "the warehouse is down for maintenance"}
            else:
                status, answer = "200 OK", {"orders": orders_for(customer)}
        elif step == "store" and method == "PUT":
            try:
                report = json.loads(body or b"null")
            except ValueError:
                report = None
            with self._cond:
                self.reports[customer] = report
                self._cond.notify_all()
            status, answer = "201 Created", {"stored": customer}
        else:
            status, answer = "404 Not Found", {"error": f"no {method} {path}"}
        data = json.dumps(answer).encode()
        writer.write(
            f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
            "Connection: close\r\n\r\n".encode() + data
        )
        await writer.drain()


class ClockLoop(asyncio.SelectorEventLoop):
    """The event loop the app is served on: asyncio's own, with a clock that `ahead` moves forward.

    Every deadline on a loop (a timer of asyncio.wait, asyncio.timeout, asyncio.sleep, call_later) is a time
    of loop.time(); moved past it, the timer runs at the loop's next turn, as if that long had passed.
    """

    ahead = 0.0  # seconds this loop's clock is ahead of time.monotonic()

    def time(self) -> float:
        return super().time() + self.ahead


class MovedClocks:
    """The clocks of the `time` module as the code under test sees them, moved forward with the loop's.

    A deadline the code under test sets itself on time.monotonic(), time.time() or time.perf_counter()
    (or their _ns forms) is moved past as one set on the loop is: every module of the implementation
    that holds `time` (import time) gets a copy whose clocks are `ahead` seconds ahead, and every name
    it bound to one of those clocks (from time import monotonic) the clock moved. The tests' own
    clocks, uvicorn's and asyncio's are untouched. `undo()` puts every name back.
    """

    NAMES = ("monotonic", "perf_counter", "time")

    def __init__(self):
        self.ahead = 0.0
        self._put_back: list[tuple[object, str, object]] = []  # (module, name, what it held)
        self._moved = types.ModuleType("time", time.__doc__)
        self._moved.__dict__.update({k: v for k, v in vars(time).items() if not k.startswith("__")})
        self._clock_for = {}
        for name in self.NAMES:
            real, real_ns = getattr(time, name), getattr(time, f"{name}_ns")
            moved = self._later(real)
            moved_ns = self._later_ns(real_ns)
            setattr(self._moved, name, moved)
            setattr(self._moved, f"{name}_ns", moved_ns)
            self._clock_for[real], self._clock_for[real_ns] = moved, moved_ns

    def _later(self, real):
        return lambda: real() + self.ahead

    def _later_ns(self, real_ns):
        return lambda: real_ns() + int(self.ahead * 1_000_000_000)

    def move(self, seconds: float) -> None:
        """Move the code under test's clocks `seconds` forward (its modules are found the first time)."""
        if not self._put_back:
            for module in list(sys.modules.values()):
                if isinstance(getattr(module, "__file__", None), str) and is_learner_file(module.__file__):
                    self._take_over(module)
        self.ahead += seconds

    def _take_over(self, module) -> None:
        for name, value in list(vars(module).items()):
            if value is time:
                replacement = self._moved
            else:
                try:
                    replacement = self._clock_for.get(value)
                except TypeError:  # a value that cannot be a dict key is not a clock
                    replacement = None
            if replacement is not None:
                self._put_back.append((module, name, value))
                setattr(module, name, replacement)

    def undo(self) -> None:
        for module, name, value in reversed(self._put_back):
            setattr(module, name, value)
        self._put_back.clear()


class Served:
    """The app under test, served by uvicorn: its base URL, and the thread that runs its event loop."""

    def __init__(self, url: str, thread: threading.Thread, state: dict, errors: ServerErrors):
        self.url, self.loop_thread, self._state, self.errors = url, thread, state, errors
        self.loop = state["loop"]
        self.held_at = []  # where the event loop thread was held, the last time a watch found it held

    def loop_lines(self) -> list[str]:
        """The lines of the code under test that the event loop thread is running right now (none if it is free)."""
        frame = sys._current_frames().get(self.loop_thread.ident)
        frames = []
        while frame is not None:
            frames.append((frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name))
            frame = frame.f_back
        return describe_frames(frames[::-1], fallback=False)

    def loop_held(self) -> list[str]:
        """The code under test's lines where the event loop thread is held, in three looks 20 ms apart
        (none if it was free at one of them)."""
        for _ in range(3):
            lines = self.loop_lines()
            if not lines:
                return []
            time.sleep(0.02)
        return lines

    def shut_down(self, seconds: float, record=None) -> str:
        """Start the app's shutdown (its lifespan's end), and watch it for QUIET_TURNS turns of its event loop.

        "done": it finished within them; "waiting": it had not, so it waits for something;
        "blocked": the event loop thread is held in the code under test (it waits, blocking the loop),
        where `held_at` says; "stuck": none of these within `seconds`. `record()`, if given, is called
        on the event loop thread the moment the shutdown ends: `at_end` is what it returned.
        """
        state = self._state
        state["record"] = record
        state["give up at"] = time.monotonic() + SHUTDOWN_GUARD
        try:
            self.loop.call_soon_threadsafe(state["stop"].set)
        except RuntimeError:  # the loop has closed before the test stopped it
            raise AssertionError(self.ended_on_its_own()) from None
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if state["watched"].wait(0.02):
                return state["within"]
            if self._held():
                return "blocked"
        return "stuck"

    def look(self, seconds: float, ahead: float = 0.0) -> str:
        """Once the shutdown waits: watch it for QUIET_TURNS more turns of its event loop, from a callback
        scheduled on that loop now (call_soon_threadsafe). With `ahead`, that callback first moves the loop's
        clock `ahead` seconds forward: every timer the app set on the loop (asyncio.wait(..., timeout=...),
        asyncio.timeout(), asyncio.sleep()) is then due, and runs in the watched turns.

        "done": it has finished (within those turns, or before); "waiting": it had not finished after them;
        "blocked": the callback has not run, and the event loop thread is held in the code under test,
        where `held_at` says; "stuck": none of these within `seconds`.
        """
        state = self._state
        if state["finished"].is_set():
            return "done"
        state["give up at"] = time.monotonic() + SHUTDOWN_GUARD
        watching = quiet_turns(state["ending"], ahead, state["clocks"])
        try:
            watch = asyncio.run_coroutine_threadsafe(watching, self.loop)
        except RuntimeError:  # the loop has closed: the shutdown ended, or the server gave up on it
            watching.close()
            return "done" if state["finished"].is_set() else "stuck"
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                return watch.result(0.02)
            except concurrent.futures.TimeoutError:
                pass
            if state["finished"].is_set():
                return "done"
            if self._held():
                return "blocked"
        return "stuck"

    def ended_on_its_own(self) -> str:
        """Why the server's event loop ended before the test stopped it, in words."""
        error = self._state.get("error")
        if error is None:
            return "expected the server's event loop to run until the test stopped it, but it had already ended"
        last = traceback.extract_tb(error.__traceback__)[-1:] if error.__traceback__ else []
        where = f" (raised at {Path(last[0].filename).name}:{last[0].lineno} in {last[0].name})" if last else ""
        return (f"expected the server's event loop to run until the test stopped it, but it had ended on its own "
                f"with {type(error).__name__}: {error}{where}")

    def _held(self) -> bool:
        lines = self.loop_held()
        if lines:
            self.held_at = lines
        return bool(lines)

    @property
    def at_end(self):
        """What the shutdown's `record()` returned the moment the shutdown ended (None before)."""
        return self._state.get("at end")

    def shutdown_finished(self, seconds: float) -> bool:
        """Wait until the app's shutdown has finished, at most `seconds`; has it?"""
        return self._state["finished"].wait(seconds)


class ServerErrors(logging.Handler):
    """The tracebacks uvicorn logs for the app ("Exception in ASGI application"), as text."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.tracebacks = []

    def emit(self, record) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            self.tracebacks.append(logging.Formatter().formatException(record.exc_info))


@contextmanager
def served(app, log_level: str = "error", job_threads: int | None = None):
    """Serve `app` with uvicorn on 127.0.0.1 (an ephemeral port), lifespan on, on a thread of its own; stop it after.

    The server runs on a ClockLoop. With `job_threads`, that loop's default executor (the one
    asyncio.to_thread and run_in_executor(None, ...) use) has that many threads, not min(32, cores + 4):
    a few held jobs fill it, as six do on a two-core pod.

    The server is started and stopped step by step rather than with serve(), whose
    main loop only looks at should_exit every 0.1 s and whose shutdown always sleeps
    0.1 s: every check would pay for both.
    """
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, log_level=log_level,
                            lifespan="on", access_log=False)
    server = uvicorn.Server(config)
    state = {"watched": threading.Event(), "finished": threading.Event(), "within": "", "clocks": MovedClocks()}
    ready = threading.Event()

    async def main():
        state["loop"], state["stop"] = asyncio.get_running_loop(), asyncio.Event()
        if job_threads is not None:
            state["loop"].set_default_executor(
                concurrent.futures.ThreadPoolExecutor(job_threads, thread_name_prefix="default executor"))
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
        # The app's shutdown, watched turn by turn: with nothing to wait for it ends in a few turns.
        ending = state["ending"] = asyncio.create_task(server.lifespan.shutdown())
        ending.add_done_callback(on_shutdown_end)
        state["within"] = await quiet_turns(ending)
        state["watched"].set()
        # The test may look again while the shutdown waits: each look puts off the moment the server gives up.
        state.setdefault("give up at", time.monotonic() + SHUTDOWN_GUARD)
        while not ending.done() and time.monotonic() < state["give up at"]:
            await asyncio.wait({ending}, timeout=0.05)

    def on_shutdown_end(ending: asyncio.Task) -> None:
        if ending.cancelled():
            return  # the server gave up on it
        if state.get("record") is not None:
            try:
                state["at end"] = state["record"]()
            except Exception as exc:  # noqa: BLE001 - reported to the test as what was seen
                state["at end"] = {"state": f"unknown: {type(exc).__name__}: {exc}"}
        state["finished"].set()

    def run():
        try:
            with asyncio.Runner(loop_factory=ClockLoop) as runner:
                runner.run(main())
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            state["error"] = exc
        finally:
            ready.set()
            state["watched"].set()

    errors = ServerErrors()
    server_log = logging.getLogger("uvicorn.error")
    server_log.addHandler(errors)
    propagates, server_log.propagate = server_log.propagate, False  # kept here, not printed
    thread = threading.Thread(target=run, name="uvicorn", daemon=True)
    thread.start()
    ready.wait(15)
    if "error" in state or not server.started:
        raise RuntimeError(f"expected the app to start serving on 127.0.0.1, it did not: {state.get('error')!r}")
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield Served(f"http://127.0.0.1:{port}", thread, state, errors)
    finally:
        try:
            state["loop"].call_soon_threadsafe(state["stop"].set)
        except RuntimeError:
            pass  # the loop has already closed
        thread.join(5)
        server_log.removeHandler(errors)
        server_log.propagate = propagates
        state["clocks"].undo()


async def quiet_turns(ending: asyncio.Task, ahead: float = 0.0, clocks: MovedClocks | None = None) -> str:
    """Watch the app's shutdown for QUIET_TURNS turns of the event loop: "done" if it ends within them, else "waiting".

    With `ahead`, move the loop's clock (a ClockLoop's) and the code under test's `clocks` that many
    seconds forward first, at the same moment."""
    if ahead:
        asyncio.get_running_loop().ahead += ahead
        if clocks is not None:
            clocks.move(ahead)
    for _ in range(QUIET_TURNS):
        if ending.done():
            break
        await asyncio.sleep(0)
    return "done" if ending.done() else "waiting"


class JobLog(logging.Handler):
    """Every record of the logger `reports.jobs` while the block runs: its message, and its traceback if any."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []  # (message, traceback text or "")
        self._logger = logging.getLogger(JOBS_LOGGER)

    def emit(self, record) -> None:
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a record that cannot be formatted is still a record
            text = str(record.msg)
        trace = ""
        if record.exc_info and record.exc_info[1] is not None:
            trace = logging.Formatter().formatException(record.exc_info)
        elif record.exc_text:
            trace = record.exc_text
        self.records.append((text, trace))

    def __enter__(self) -> JobLog:
        self._level = self._logger.level
        self._logger.addHandler(self)
        self._logger.setLevel(logging.DEBUG)
        return self

    def __exit__(self, *exc) -> None:
        self._logger.removeHandler(self)
        self._logger.setLevel(self._level)
