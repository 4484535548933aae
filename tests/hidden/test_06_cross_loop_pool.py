"""Hidden tests for kata 06, cross-loop-pool.

A real PostgreSQL server (started by loopkata.services, or $DATABASE_URL)
holds a fresh database per test, with the two tables the orders service uses.
Each test runs one scenario of cross_loop_pool_scenarios.py in a process of
its own: two event loops sharing one asyncpg connection can crash the
interpreter, and a crash must be a verdict, not a dead grader. The processes
are forked from a fork server that has imported asyncpg and SQLAlchemy once
(the learner's package is imported fresh in each). Rows record
the server process that wrote them (pg_backend_pid()), so the tests can count
how many connections the API used without looking at how it pools. A total
below zero is refused (CHECK), so a test can make a job fail for real. One
test sets a short jobs.JOB_TIMEOUT and holds a job inside its statement (a row
lock of the test's own) until the job is reported failed; once the lock is let
go and the job's connection has closed, the row must be as it was.
"""
import asyncio
import itertools
import json
import multiprocessing
import multiprocessing.forkserver
import os
import re
import signal
import tempfile
from pathlib import Path

import asyncpg
import cross_loop_pool_scenarios  # beside this file; stdlib imports only, the kata is loaded per scenario
import pytest

from loopkata import services
from loopkata.grading.supervise import kill_group_of
from loopkata.testing import Hang, describe_frames, hang_after

SCENARIOS = Path(__file__).with_name("cross_loop_pool_scenarios.py")
SCHEMA = """
CREATE TABLE orders (
    id serial PRIMARY KEY,
    customer text NOT NULL,
    cents integer NOT NULL,
    served_by integer NOT NULL DEFAULT pg_backend_pid()
);
CREATE TABLE totals (
    customer text PRIMARY KEY,
    cents bigint NOT NULL CHECK (cents >= 0),
    orders integer NOT NULL,
    served_by integer NOT NULL DEFAULT pg_backend_pid()
);
"""
_names = itertools.count(1)
# Imported once by the fork server, not once per scenario: most of a scenario's start-up.
PRELOAD = ["asyncio", "asyncpg", "sqlalchemy", "sqlalchemy.ext.asyncio", "loopkata.testing", SCENARIOS.stem]
FORKS = multiprocessing.get_context("forkserver")
FORKS.set_forkserver_preload(PRELOAD)


@pytest.fixture(scope="module", autouse=True)
def fork_server():
    """The fork server is stopped, and waited for, when this module's tests are done: left to
    notice its parent's exit, it would outlive the check by however long a busy machine takes."""
    yield
    server = getattr(multiprocessing.forkserver, "_forkserver", None)
    stop = getattr(server, "_stop", None)  # private but present on 3.11-3.13; without it the server exits with us
    if stop is not None:
        stop()


async def _admin(dsn: str, *statements: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


@pytest.fixture
def database():
    """A fresh database with the orders tables, dropped after the test (connections and all)."""
    server = services.postgres()
    name = f"orders_{os.getpid()}_{next(_names)}"
    try:
        asyncio.run(_admin(server.dsn, f'CREATE DATABASE "{name}"'))
        asyncio.run(_admin(server.with_database(name), SCHEMA))
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise services.unreachable(server, exc) from None
    yield server, name
    asyncio.run(_admin(server.dsn, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def crash_lines(stderr: str) -> str:
    """The learner's lines in faulthandler's dump of every thread, as a crash left it."""
    frames = [(m[1], int(m[2]), m[3]) for m in re.finditer(r'File "([^"]+)", line (\d+) in (\S+)', stderr)]
    lines = describe_frames(list(reversed(frames)), fallback=False)
    return "\n".join(f"    {line}" for line in dict.fromkeys(lines))


def run_scenario(kata, database, scenario: str, what: str) -> None:
    """Run `scenario` in a child process on the package under test; raise what it saw."""
    server, name = database
    impl = Path(kata.__file__).parent
    env = {
        **os.environ,
        "DATABASE_URL": server.with_database(name),  # the plain postgresql:// URL a service is given
        "LOOPKATA_DATABASE_DSN": server.with_database(name),
        "LOOPKATA_DATABASE": name,
        "LOOPKATA_ADMIN_DSN": server.dsn,
        "LOOPKATA_IMPL": str(impl),
    }
    seconds = hang_after()
    with tempfile.TemporaryDirectory(prefix="loopkata-scenario-") as tmp:
        out_path, err_path = Path(tmp, "out"), Path(tmp, "err")
        child = FORKS.Process(target=cross_loop_pool_scenarios.forked, args=(str(impl), scenario, seconds, env, str(out_path), str(err_path)),
                              daemon=False)
        child.start()
        try:
            child.join(seconds + 10)
            if child.exitcode is None:
                raise Hang(what, seconds, "the scenario's process stopped answering (it was killed)")
        finally:
            kill_group_of(child.pid, ended=child.exitcode is not None)  # with anything the learner's code started
            child.join()
        returncode = child.exitcode
        out = out_path.read_text(errors="replace") if out_path.exists() else ""
        err = err_path.read_text(errors="replace") if err_path.exists() else ""
    if returncode < 0:
        sig = signal.Signals(-returncode).name
        lines = crash_lines(err)
        raise AssertionError(
            f"the process crashed with {sig} while {what}. Two event loops using one pooled asyncpg connection "
            "at once can do this." + (f" Your code was at\n{lines}" if lines else "")
        )
    results = [line for line in out.splitlines() if line.startswith("RESULT ")]
    if not results:
        tail = "\n".join(err.strip().splitlines()[-6:])
        raise AssertionError(f"the scenario's process ended (exit {returncode}) without a result while {what}:\n{tail}")
    result = json.loads(results[-1].removeprefix("RESULT "))
    if "hang" in result:
        raise Hang(what, seconds, result.get("stacks", ""))
    if "failed" in result:
        raise AssertionError(result["failed"])


def test_a_job_after_an_api_request_succeeds(kata, database):
    """a job that runs after an API request succeeds; dispatch returns at once, and the API answers during and after it"""
    run_scenario(kata, database, "after_request",
                 "one job ran through jobs.dispatch() after two API requests")


def test_jobs_while_requests_are_in_flight_succeed(kata, database):
    """jobs that run while API requests are in flight succeed, five times in a row"""
    run_scenario(kata, database, "in_flight",
                 "jobs ran in a thread while API requests were in flight (five jobs through jobs.dispatch())")


def test_twenty_jobs_in_a_row_succeed(kata, database):
    """twenty jobs in a row succeed"""
    run_scenario(kata, database, "twenty_in_a_row",
                 "twenty jobs ran one after another through jobs.dispatch()")


def test_jobs_leave_no_connection_open(kata, database):
    """after the jobs (ten in a row, two at once, two that fail), the server has no more connections than before them, and each job closed its own cleanly"""
    run_scenario(kata, database, "no_leftover_connections",
                 "jobs ran through jobs.dispatch() after three API requests (ten in a row, two at once, two that fail)")


def test_the_api_keeps_reusing_its_pooled_connections(kata, database):
    """the API keeps reusing its pooled connections, before and after a job"""
    run_scenario(kata, database, "pool_reuse",
                 "twenty API requests and a job (through jobs.dispatch()) ran")


def test_a_job_past_its_timeout_is_cancelled_and_commits_nothing(kata, database):
    """a job still running past jobs.JOB_TIMEOUT is reported failed, and commits nothing, then or later"""
    run_scenario(kata, database, "timed_out_job",
                 "a job through jobs.dispatch() was held inside its statement past jobs.JOB_TIMEOUT")
