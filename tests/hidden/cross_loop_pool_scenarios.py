"""The scenarios of kata 06, each run in a process of its own by test_06_cross_loop_pool.py.

Two event loops touching one asyncpg connection can crash the interpreter, so
a scenario never runs inside the grader: `python cross_loop_pool_scenarios.py
IMPL SCENARIO` loads the package at IMPL, runs the scenario on an "API" event
loop in the main thread (jobs go through the package's own jobs.dispatch, into
its worker threads), and prints one JSON line after RESULT: {"ok": ...},
{"failed": message} or {"hang": message, "stacks": lines}. A failure
message starts with how the scenario drove the package (HOW).

DATABASE_URL (for the package) and LOOPKATA_DATABASE_DSN (for asyncpg) name the
scenario's own fresh database, LOOPKATA_DATABASE its name; LOOPKATA_ADMIN_DSN is
the server's maintenance database, from which connections are counted.
"""
from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import functools
import gc
import importlib
import importlib.util
import json
import logging
import os
import re
import sys
import threading
import time
import traceback
import warnings
from pathlib import Path

RESULT = "RESULT "
JOB_SECONDS = 2.5  # one job, from dispatch to "done"; the whole scenario is bounded by hang_after
HOLD_SECONDS = 0.6  # how long a job is held while the API is asked (a blocking dispatch waits this long)
TIMEOUT_SECONDS = 0.3  # jobs.JOB_TIMEOUT in the timeout scenario: its job is held past it by a row lock
TIMEOUT_ATTEMPTS = 4  # attempts of that scenario, the timeout doubled each time, to see the job inside its statement
OVERLAP_SECONDS = 1.5  # how long two jobs may take to be inside their statements at once (a runner that runs
                       # one job at a time never gets there: its jobs then run one after the other)


class Failed(Exception):
    """What the scenario saw, said as an expectation and what happened instead.

    `how`, if given, says how the scenario drove the package, in place of its entry in HOW."""

    def __init__(self, message: str, how: str | None = None):
        super().__init__(message)
        self.how = how


def load(impl: Path):
    spec = importlib.util.spec_from_file_location("orders_under_test", impl / "__init__.py",
                                                  submodule_search_locations=[str(impl)])
    package = importlib.util.module_from_spec(spec)
    sys.modules["orders_under_test"] = package
    spec.loader.exec_module(package)
    return [importlib.import_module(f"orders_under_test.{name}") for name in ("service", "jobs", "tasks")]


def where(exc: BaseException) -> str:
    from loopkata.testing import describe_frames

    frames = describe_frames([(f.filename, f.lineno, f.name) for f in traceback.extract_tb(exc.__traceback__)],
                             fallback=False)
    return f" (at {frames[-1]})" if frames else ""


def said(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".splitlines()[0]
    return text + where(exc)


class Harness:
    """The API side of a scenario: requests, jobs and connection counts, on the API's loop."""

    def __init__(self, service, jobs, tasks):
        self.service, self.jobs, self.tasks = service, jobs, tasks
        self.admin = None

    async def __aenter__(self):
        import asyncpg

        self.admin = await asyncpg.connect(os.environ["LOOPKATA_ADMIN_DSN"])
        self.database = os.environ["LOOPKATA_DATABASE"]
        return self

    async def __aexit__(self, *exc):
        await self.admin.close()

    async def request(self, what, fn, *args):
        try:
            return await fn(*args)
        except Exception as exc:  # noqa: BLE001 - said to the learner
            raise Failed(f"expected the API request {what} to succeed, but it failed with {said(exc)}") from None

    def start(self, customer: str, hold: float = 0.0, release: threading.Event | None = None) -> tuple[str, dict]:
        """Dispatch refresh_totals(customer) from the API's loop; (its job id, a box).

        The box's "where" says the learner's line a failing job raised at. With `release`, the job
        waits (up to `hold` s) for it first."""
        box: dict = {}
        task = self.tasks.refresh_totals

        @functools.wraps(task)
        def traced(*args):
            if release is not None:
                release.wait(hold)
            try:
                return task(*args)
            except BaseException as exc:
                box["where"] = where(exc)
                raise

        return self.jobs.dispatch(traced, customer), box

    async def outcome(self, job_id: str, box: dict):
        """Wait for a dispatched job from the API's loop: ("done", result), ("failed", why) or ("unfinished", why)."""
        deadline = time.monotonic() + JOB_SECONDS
        while time.monotonic() < deadline:
            state = self.jobs.status(job_id)
            if state.get("state") == "done":
                return "done", state.get("result")
            if state.get("state") == "failed":
                error = (str(state.get("error") or "no error recorded").strip().splitlines() or [""])[0]
                return "failed", f"{error}{box.get('where', '')}"
            await asyncio.sleep(0.003)
        return "unfinished", f"it was still {self.jobs.status(job_id).get('state')!r} after {JOB_SECONDS:g} s"

    async def job(self, customer: str, hold: float = 0.0):
        """Dispatch refresh_totals(customer) from the API's loop and wait for it: ("done", result) or not, and why.

        With `hold`, the job waits (up to `hold` s) until the API has answered a request meanwhile:
        dispatch() must return at once, and the API's loop must not wait for the job."""
        release = threading.Event()
        started = time.monotonic()
        try:
            job_id, box = self.start(customer, hold, release if hold else None)
            took = time.monotonic() - started
            if hold and took > hold / 2:
                raise Failed(f"expected jobs.dispatch() to return a job id at once and run the job in the background, "
                             f"but it returned after {took:.2f} s, when the job had finished: meanwhile the API's event "
                             "loop served no request at all")
            if hold:
                await self.request(f"customer_total({customer!r}) while a job runs", self.service.customer_total,
                                   customer)
                answered = time.monotonic() - started
                if answered > hold / 2:
                    raise Failed(f"expected the API to answer customer_total({customer!r}) while a job runs, but it "
                                 f"took {answered:.2f} s: the API's event loop waited for the job")
        finally:
            release.set()
        return await self.outcome(job_id, box)

    async def jobs_in_a_row(self, customer: str, count: int, expect_total: int | None = None) -> None:
        failures = []
        for n in range(1, count + 1):
            state, value = await self.job(customer)
            if state == "done" and expect_total is not None and value != expect_total:
                state, value = "failed", f"it returned {value!r}, but the customer's orders add up to {expect_total}"
            if state != "done":
                failures.append((n, value))
        if failures:
            raise Failed(job_failures(failures, count))

    async def connections(self) -> int:
        """Client connections the server has open to this scenario's database."""
        return await self.admin.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'",
            self.database)

    async def execute(self, statement: str) -> None:
        """Run one statement on this scenario's database, on a connection of the test's own."""
        import asyncpg

        conn = await asyncpg.connect(os.environ["LOOPKATA_DATABASE_DSN"])
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    async def lock_total(self, customer: str):
        """A connection of the test's own, in a transaction that holds `customer`'s totals row locked:
        a job refreshing that total waits inside its statement, its connection checked out, until the
        transaction ends (COMMIT, or closing the connection)."""
        import asyncpg

        conn = await asyncpg.connect(os.environ["LOOPKATA_DATABASE_DSN"])
        await conn.execute("BEGIN")
        await conn.execute("SELECT 1 FROM totals WHERE customer = $1 FOR UPDATE", customer)
        return conn

    async def waiting_on_locks(self) -> int:
        """How many connections to this scenario's database are waiting for a lock (a job held by lock_total)."""
        return await self.admin.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'", self.database)

    async def blocked_by(self, pid: int) -> int:
        """How many connections wait for a lock that the server process `pid` holds (a job held by lock_total)."""
        return await self.admin.fetchval("SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))",
                                         pid)

    async def backends_serving(self, table: str) -> int:
        """How many server connections wrote the rows of `table` (each row records pg_backend_pid())."""
        import asyncpg

        conn = await asyncpg.connect(os.environ["LOOPKATA_DATABASE_DSN"])
        try:
            return await conn.fetchval(f"SELECT count(DISTINCT served_by) FROM {table}")
        finally:
            await conn.close()


def _numbers(ns: list[int]) -> str:
    """[2, 3, 4, 7] -> "jobs 2-4 and 7"; [5] -> "job 5"."""
    runs: list[list[int]] = []
    for n in ns:
        if runs and runs[-1][1] == n - 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    spans = [f"{a}" if a == b else f"{a}-{b}" for a, b in runs]
    said = spans[0] if len(spans) == 1 else ", ".join(spans[:-1]) + f" and {spans[-1]}"
    return f"job {said}" if len(ns) == 1 else f"jobs {said}"


def job_failures(failures: list[tuple[int, str]], count: int) -> str:
    """"jobs 1 and 3-20 failed, the first with X; job 2 failed with Y": one part per error type."""
    if count == 1:
        return f"expected the job to succeed, but it failed with {failures[0][1]}"
    kinds: dict[str, list] = {}  # error type -> (job numbers, the first message); in order of first failure
    for n, why in failures:
        kinds.setdefault(why.split(":", 1)[0], [[], why])[0].append(n)
    parts = [f"{_numbers(ns)} failed with {why}" if len(ns) == 1 else f"{_numbers(ns)} failed, the first with {why}"
             for ns, why in kinds.values()]
    ran = f"all {count} jobs" if len(failures) == count else f"{len(failures)} of {count} jobs"
    return f"expected every job to succeed, but {ran} failed: " + "; ".join(parts)


# --- the scenarios --------------------------------------------------------

async def after_request(h: Harness):
    await h.request("place_order('ada', 1250)", h.service.place_order, "ada", 1250)
    await h.request("place_order('ada', 750)", h.service.place_order, "ada", 750)
    state, value = await h.job("ada", hold=HOLD_SECONDS)
    if state != "done" or value != 2000:
        raise Failed(job_failures([(1, value if state != "done" else
                                    f"it returned {value!r}, but the customer's orders add up to 2000")], 1))
    total = await h.request("customer_total('ada') after the job", h.service.customer_total, "ada")
    if total != 2000:
        raise Failed(f"expected customer_total('ada') to be 2000 after the job, got {total!r}")


async def in_flight(h: Harness):
    stop, served, errors = asyncio.Event(), [0], []

    async def customer(name: str):
        while not stop.is_set():
            try:
                await h.service.place_order(name, 100)
                await h.service.customer_total(name)
                served[0] += 1
            except Exception as exc:  # noqa: BLE001 - said to the learner
                errors.append(said(exc))
                return
            await asyncio.sleep(0.001)

    streams = [asyncio.create_task(customer(f"shop{i}")) for i in range(3)]
    try:
        await asyncio.sleep(0.02)  # requests in flight before the first job starts
        failures = []
        for n in range(1, 6):
            state, why = await h.job("shop0")
            if state != "done":
                failures.append((n, why))
    finally:
        stop.set()
        await asyncio.gather(*streams, return_exceptions=True)
    if errors:
        raise Failed(f"expected every API request to succeed while jobs ran, but one failed with {errors[0]}")
    if failures:
        raise Failed(job_failures(failures, 5).replace("every job", "every job started while API requests were in flight"))


async def twenty_in_a_row(h: Harness):
    await h.request("place_order('ada', 100)", h.service.place_order, "ada", 100)
    await h.jobs_in_a_row("ada", 20, expect_total=100)


# What SQLAlchemy logs (and then swallows) when closing a connection fails, e.g. from a loop
# that did not open it, or after that loop has ended: the connection is dropped, not closed.
CLOSE_FAILED = re.compile(r"Exception (closing|terminating) connection|garbage collector is trying to clean up")


class CloseFailures(logging.Handler):
    """Every error SQLAlchemy's pools log about closing a connection, with the learner's line that asked for it."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.seen: list[str] = []

    def emit(self, record):
        if not CLOSE_FAILED.search(str(record.msg)):
            return
        from loopkata.testing import describe_frames

        errors, error = [], record.exc_info[1] if record.exc_info else None
        while error is not None:  # the error raised, and the ones it was raised while handling
            text = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
            if "attached to a different loop" in text:
                text = f"{type(error).__name__}: ... attached to a different loop"
            errors.insert(0, text[:120])
            error = error.__context__
        why = f" ({', then '.join(dict.fromkeys(errors))})" if errors else ""
        lines = describe_frames(_stack_here(), fallback=False)
        at = f" at {' -> '.join(lines[-2:])}" if lines else ""
        self.seen.append(f'"{str(record.msg).split(" %r")[0]}"{why}{at}')


def _stack_here() -> list[tuple[str, int, str]]:
    """This thread's stack, outermost first, including the greenlets SQLAlchemy runs its sync code in."""
    frames = [(f.filename, f.lineno, f.name) for f in traceback.extract_stack()]
    try:
        import greenlet
    except ImportError:
        return frames
    parent = greenlet.getcurrent().parent
    while parent is not None:  # SQLAlchemy's async layer: the awaiting coroutine is in the parent greenlet
        if parent.gr_frame is not None:
            frames = [(f.filename, f.lineno, f.name) for f in traceback.extract_stack(parent.gr_frame)] + frames
        parent = parent.parent
    return frames


async def settled(h: Harness, baseline: int) -> int:
    """The server's count of connections, once it has fallen back to `baseline` (or after a second)."""
    deadline, now = time.monotonic() + 1.0, await h.connections()
    while now > baseline and time.monotonic() < deadline:  # a closed connection takes a moment to go
        await asyncio.sleep(0.02)
        now = await h.connections()
    return now


def left_open(after: str, baseline: int, now: int) -> str:
    left = now - baseline
    return (f"expected the server to have no more connections to the database after {after} than before them "
            f"({baseline}: the API's pool), but it had {now}: {left} connection"
            f"{'s the jobs opened were' if left > 1 else ' the jobs opened was'} never closed")


AT_ONCE = ("Three API requests and ten jobs, then two jobs at once through jobs.dispatch(), each held inside its "
           "statement (the test kept the total it refreshes locked) until both were, then let go one after the other, "
           "counting the server's connections in pg_stat_activity")
FAILING = ("Three API requests, ten jobs and two jobs at once, then an order of -500 cents and two jobs through "
           "jobs.dispatch() refreshing that customer's total, which the totals table's CHECK (cents >= 0) refuses, "
           "counting the server's connections in pg_stat_activity")
EVERY_JOB = ("Three API requests at once, then jobs through jobs.dispatch() (ten one after another, two at once, two "
             "that fail), then a garbage collection")


@contextlib.contextmanager
def driven(how: str):
    """A failure inside the block (an API request's, say) says `how` the scenario drove the package there."""
    try:
        yield
    except Failed as exc:
        exc.how = exc.how or how
        raise


def closed_cleanly(failures: CloseFailures) -> None:
    """Raise if SQLAlchemy logged a failed close while the jobs so far ran."""
    if failures.seen:
        raise Failed(
            f"expected every connection to be closed cleanly, by the loop that opened it, but closing "
            f"{len(failures.seen)} failed while the jobs ran: SQLAlchemy logged {failures.seen[0]}. A connection "
            "closed from a loop that did not open it, or after that loop ended, is not closed cleanly: the close "
            "fails half-way, and its socket is left for the garbage collector"
        )


def torn_down(unclosed: list[str]) -> None:
    """Raise if the garbage collector has had to tear down a connection (asyncpg, asyncio or Python warned)."""
    if unclosed:
        # One connection can be warned of three times (its asyncpg connection, its transport, its
        # socket): count the kind warned of most, and say the first of them.
        kinds = [("connection", "asyncpg", "unclosed connection"), ("transport", "asyncio", "unclosed transport"),
                 ("<socket", "Python", "unclosed <socket.socket ...>")]
        counts = [sum(key in w for w in unclosed) for key, _, _ in kinds]
        _, who, said = kinds[counts.index(max(counts))]
        raise Failed(
            f"expected every connection a job opened to be closed by the code that opened it, but the garbage "
            f"collector had to tear down {max(counts)} ({who} warned: {said}): in a process where it runs late, "
            "or not at all, those connections stay open"
        )


async def two_jobs_at_once(h: Harness, baseline: int) -> None:
    """Jobs for 'ada' and 'bob' at once, both inside their statements, then each let go and finished in turn."""
    await h.request("place_order('bob', 400)", h.service.place_order, "bob", 400)
    await h.execute("INSERT INTO totals (customer, cents, orders) VALUES ('bob', 0, 0)")  # a row to lock
    locks = {}
    try:
        for customer in ("ada", "bob"):
            locks[customer] = await h.lock_total(customer)
        started = {customer: h.start(customer) for customer in ("ada", "bob")}
        # Both jobs inside their statements, each with a connection checked out. A runner that runs one job
        # at a time never gets there: the second job only starts once the first is let go.
        deadline = time.monotonic() + OVERLAP_SECONDS
        while time.monotonic() < deadline and await h.waiting_on_locks() < 2:
            if any(h.jobs.status(job_id).get("state") in ("done", "failed") for job_id, _ in started.values()):
                break
            await asyncio.sleep(0.005)
        outcomes = {}
        for customer, (job_id, box) in started.items():
            conn = locks.pop(customer)
            await conn.execute("COMMIT")
            await conn.close()
            outcomes[customer] = await h.outcome(job_id, box)
    finally:
        for conn in locks.values():
            await conn.close()
    expected = {"ada": 300, "bob": 400}
    failures = [(n, value if state != "done" else
                 f"it returned {value!r}, but the customer's orders add up to {expected[customer]}")
                for n, (customer, (state, value)) in enumerate(outcomes.items(), 1)
                if state != "done" or value != expected[customer]]
    if failures:
        raise Failed(job_failures(failures, 2).replace("every job", "both jobs that ran at once"))
    now = await settled(h, baseline)
    if now > baseline:
        raise Failed(left_open("two jobs that ran at once", baseline, now))


async def two_failing_jobs(h: Harness, baseline: int) -> None:
    """Two jobs whose statement fails (a negative total), one after the other: reported failed, nothing left open."""
    await h.request("place_order('eve', -500)", h.service.place_order, "eve", -500)
    for n in (1, 2):
        job_id, box = h.start("eve")
        state, value = await h.outcome(job_id, box)
        if state != "failed":
            raise Failed(f"expected job {n} to be reported failed (its statement breaks the CHECK constraint), "
                         f"but {f'it returned {value!r}' if state == 'done' else value}")
    now = await settled(h, baseline)
    if now > baseline:
        raise Failed(left_open("2 jobs that failed", baseline, now))


async def no_leftover_connections(h: Harness):
    # A connection that only the garbage collector would close stays open until it happens to
    # run; keep the collector out, so such a connection is counted every time, not now and then.
    # The collector runs once at the end, and a job may run it itself: asyncpg then warns of each
    # connection it had to tear down ("unclosed connection"), asyncio and Python of each socket
    # ("unclosed transport", "unclosed <socket"), and those count too. So do the errors SQLAlchemy
    # logs when closing a connection fails: one closed from a loop that did not open it (or after
    # that loop ended) is not closed cleanly, and its socket is left for the collector.
    # Ten jobs one after another, then two at once, then two that fail: each leaves no connection.
    gc.disable()
    unclosed = []
    shown = warnings.showwarning

    def keep(message, category, *args, **kwargs):
        if issubclass(category, ResourceWarning) and re.search(r"unclosed (connection|transport|<socket)", str(message)):
            unclosed.append(str(message))
        else:
            shown(message, category, *args, **kwargs)

    warnings.simplefilter("always", ResourceWarning)
    warnings.showwarning = keep
    failures = CloseFailures()
    logging.getLogger("sqlalchemy.pool").addHandler(failures)
    # Three requests at once: the API's pool holds a few connections, so jobs that borrow the API's
    # own connections (on the API's loop) find enough of them there, even two jobs at once.
    await asyncio.gather(*(h.request("place_order('ada', 100)", h.service.place_order, "ada", 100) for _ in range(3)))
    baseline = await h.connections()
    await h.jobs_in_a_row("ada", 10, expect_total=300)
    now = await settled(h, baseline)
    if now > baseline:
        raise Failed(left_open("10 jobs", baseline, now))
    closed_cleanly(failures)
    torn_down(unclosed)  # a job that runs the collector itself has made it say so already
    with driven(AT_ONCE):
        await two_jobs_at_once(h, baseline)
        closed_cleanly(failures)
        torn_down(unclosed)
    with driven(FAILING):
        await two_failing_jobs(h, baseline)
        closed_cleanly(failures)
        torn_down(unclosed)
    gc.collect()  # whatever only the collector would close says so now ("unclosed ...")
    with driven(EVERY_JOB):
        torn_down(unclosed)


async def pool_reuse(h: Harness):
    for n in range(10):
        await h.request(f"place_order('ada', 100) (request {n + 1})", h.service.place_order, "ada", 100)
    await h.jobs_in_a_row("ada", 1, expect_total=1000)
    for n in range(10, 20):
        await h.request(f"place_order('ada', 100) (request {n + 1})", h.service.place_order, "ada", 100)
    served_by = await h.backends_serving("orders")
    if served_by > 2:
        raise Failed(
            f"expected the API to reuse its pooled connections: 20 requests, one after another, were served by "
            f"{served_by} different server connections (each one a new connection: a TCP handshake, "
            "authentication and a new server process per request)"
        )


async def timed_out_job(h: Harness):
    """A job held inside its statement (its row locked) past jobs.JOB_TIMEOUT: reported failed, and then, once the
    lock is let go, its transaction must not commit.

    The verdict needs the job seen inside its statement before it is reported failed. On a machine too busy to get
    it there within the timeout, the attempt proves nothing: it is made again, for another customer, with the
    timeout doubled (the rows of every attempt are checked at the end all the same)."""
    customers, timeout = [], TIMEOUT_SECONDS
    await h.request("place_order('ada', 700)", h.service.place_order, "ada", 700)
    baseline = await h.connections()
    for attempt in range(1, TIMEOUT_ATTEMPTS + 1):
        customer = f"ada{attempt}"
        customers.append(customer)
        await h.request(f"place_order({customer!r}, 700)", h.service.place_order, customer, 700)
        await h.execute(f"INSERT INTO totals (customer, cents, orders) VALUES ('{customer}', 0, 0)")  # a row to lock
        h.jobs.JOB_TIMEOUT = timeout
        lock = await h.lock_total(customer)
        try:
            holder = await lock.fetchval("SELECT pg_backend_pid()")
            job_id, box = h.start(customer)
            inside = False  # seen waiting for the row: inside its statement, its connection open
            # Reported failed, or done, or still running once the scenario's deadline passes (a hang: a job that
            # nothing cancels stays inside its statement for as long as the lock is held).
            while h.jobs.status(job_id).get("state") not in ("done", "failed"):
                inside = inside or await h.blocked_by(holder) > 0
                await asyncio.sleep(0.005)
            state = h.jobs.status(job_id)
            if state.get("state") == "done":
                raise Failed(f"expected the job to be cancelled and reported failed once it had run jobs.JOB_TIMEOUT "
                             f"({timeout:g} s) inside its statement, but it finished with {state.get('result')!r}")
        finally:
            await lock.execute("COMMIT")  # the row is let go: a statement still running goes on, and commits
            await lock.close()
        if inside:
            break
        timeout *= 2
    # The job's connection ends when its transaction does: committed, or rolled back with the job cancelled.
    while await h.connections() > baseline:
        await asyncio.sleep(0.01)
    if not inside:
        raise Failed(f"the machine was too busy to judge: in {TIMEOUT_ATTEMPTS} attempts, with jobs.JOB_TIMEOUT up "
                     f"to {timeout / 2:g} s, the job was never inside its statement before it was reported failed")
    for customer in customers:
        total = await h.request(f"customer_total({customer!r}) once the job's connection had closed",
                                h.service.customer_total, customer)
        if total != 0:
            raise Failed(
                f"expected a job reported failed (with {str(state.get('error')).strip().rstrip(':')}) to commit "
                f"nothing, but once the row it waited for was let go, its transaction went on and committed: "
                f"customer_total({customer!r}) is {total!r}, not 0. The job was given up, not cancelled: waiting for "
                "it with a timeout (future.result(timeout=...), asyncio.wait(..., timeout=...)) stops the wait, and "
                "the job runs on where it is; only cancelling its coroutine (asyncio.wait_for, asyncio.timeout, "
                "future.cancel() awaited) rolls its transaction back"
            )


SCENARIOS = {f.__name__: f for f in (after_request, in_flight, twenty_in_a_row, no_leftover_connections, pool_reuse,
                                     timed_out_job)}

# How each scenario drives the package, said before what it expected: the first clause of every failure.
HOW = {
    "after_request": "Two API requests on the API's event loop, then one job through jobs.dispatch()",
    "in_flight": "Five jobs through jobs.dispatch(), one after another, while three clients kept sending API "
                 "requests on the API's event loop",
    "twenty_in_a_row": "One API request, then twenty jobs through jobs.dispatch(), one after another",
    "no_leftover_connections": "Three API requests at once, then ten jobs through jobs.dispatch(), one after another, "
                               "counting the server's connections in pg_stat_activity",
    "pool_reuse": "Ten API requests, one job through jobs.dispatch(), ten more API requests, one after another",
    "timed_out_job": f"jobs.JOB_TIMEOUT set to {TIMEOUT_SECONDS:g} s, one API request, then one job through "
                     "jobs.dispatch() held inside its statement (the test kept the total it refreshes locked) until "
                     "it was reported failed, then the lock let go",
}


def forked(impl: str, name: str, seconds: float, env: dict, out: str, err: str) -> None:
    """The same run, in a process forked from the test's fork server (which has imported asyncpg and
    SQLAlchemy once, so each scenario does not pay for them): a process group of its own, the
    scenario's environment, its output in the files `out` and `err`."""
    os.setsid()
    for fd, path in ((1, out), (2, err)):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)
    os.environ.clear()
    os.environ.update(env)
    sys.argv = [__file__, impl, name, str(seconds)]
    main()


def main() -> None:
    faulthandler.enable()  # a crash prints every thread's stack: the test reports the learner's lines
    impl, name, seconds = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    from loopkata.testing import Hang, run_bounded

    def scenario():
        service, jobs, tasks = load(impl)

        async def go():
            async with Harness(service, jobs, tasks) as h:
                await SCENARIOS[name](h)

        asyncio.run(go())

    try:
        run_bounded(scenario, what=f"the scenario '{name}'", seconds=seconds)
        out = {"ok": True}
    except Failed as exc:
        out = {"failed": f"{exc.how or HOW[name]}: {exc}"}
    except Hang as exc:
        others = threads_stuck()
        out = {"hang": str(exc), "stacks": "\n".join(s for s in (exc.stacks, others) if s)}
    except Exception as exc:  # noqa: BLE001 - the learner's, said as it is
        out = {"failed": f"{HOW[name]}: the scenario failed with {said(exc)}"}
    print(RESULT + json.dumps(out), flush=True)
    os._exit(0)  # job threads stuck on the learner's locks must not keep the process alive


def threads_stuck() -> str:
    """The learner's lines in every other thread (the job threads), as "a job thread is stuck at" blocks."""
    from loopkata.testing import describe_frames

    out = []
    for thread in threading.enumerate():
        frame = sys._current_frames().get(thread.ident)
        if frame is None or thread is threading.current_thread() or thread.name.startswith("scenario:"):
            continue
        lines = describe_frames([(f.filename, f.lineno, f.name) for f in traceback.extract_stack(frame)],
                                fallback=False)
        if lines:
            out.append("a job thread is stuck at")
            out += [f"    {line}" for line in lines]
    return "\n".join(out)


if __name__ == "__main__":
    main()
