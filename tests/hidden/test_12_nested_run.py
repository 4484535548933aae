"""Hidden tests for kata 12, nested-run.

Most tests serve a fresh copy of the package (`kata`) with uvicorn on
127.0.0.1, lifespan included, and talk to it with a real HTTP client: they
start report jobs with POST /reports and follow them with GET /jobs/{id}. The
jobs call a stand-in for the warehouse's API (nested_run_harness.Warehouse), a
real server on its own thread that can hold a job's call until the test lets
it go: so a test decides from what happened while a job was held (did the
request answer, did /health answer, did the shutdown wait), never from how
fast it went. The shutdown tests stop the server as uvicorn does on
SIGTERM and hold a job longer than any drain with a deadline would wait: they
move the server's event loop clock a week ahead (nested_run_harness.ClockLoop),
and with it the `time` module's clocks as the app's modules see them
(nested_run_harness.MovedClocks), and ask that loop to run a callback. One test narrows the loop's default
executor to a few threads and fills it with held jobs. One test calls jobs.dispatch() directly on an event loop of its
own and counts the jobs' tasks left in memory afterwards. Every wait has a
deadline, and the warehouse lets every call go before the server is stopped.
"""
import asyncio
import gc
import importlib
import re
import sys
import threading
import time
import weakref

import httpx

from loopkata.testing import Deadline, display_path, hang_after, is_learner_file
from nested_run_harness import A_WEEK, NO_TLS, QUIET_TURNS, JobLog, Warehouse, report_for, served

HOW = "through a real uvicorn server on 127.0.0.1"
PROBE_TIMEOUT = 2.0  # seconds a probe of /health waits (a liveness probe waits 1 s by default)
PROBES = 3  # probes that must answer while a job is held at the warehouse
PROBE_EVERY = 0.03  # seconds between two probes
ANSWER_WITHIN = 2.0  # seconds for POST /reports to answer while its job is held (a free loop answers in ms)
ENDED_STATES = ("done", "failed")
LET_GO_JOBS = 4  # jobs dispatched at once in the test that counts the tasks left behind
JOB_THREADS = 3  # threads of the server loop's default executor in the test that fills it with held jobs
TRACE_LINE = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def part(kata, name):
    """A module of the package under test (app, jobs, tasks), from this test's own copy."""
    return importlib.import_module(f"{kata.__name__}.{name}")


def waits() -> float:
    """How long to wait for something due at once (a deadline against a hang, never a verdict on speed)."""
    return max(hang_after(), 3.0)


def join(thread: threading.Thread, seconds: float) -> None:
    """Wait for `thread` to end, at most `seconds` plus the time a busy machine kept this process waiting for a CPU."""
    deadline = Deadline(seconds)
    while thread.is_alive() and not deadline.passed():
        thread.join(min(0.05, max(deadline.left(), 0.0)))


class Post:
    """POST /reports for `customer` from a client thread of its own; `response`, `error` once it is done."""

    def __init__(self, base: str, customer: str, timeout: float = 60):
        self.customer = customer
        self.response = self.error = None
        self._args = (base, timeout)
        self.thread = threading.Thread(target=self._run, name=f"client {customer}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        base, timeout = self._args
        try:
            with httpx.Client(timeout=timeout, verify=NO_TLS) as client:
                self.response = client.post(f"{base}/reports", json={"customer": self.customer})
        except httpx.HTTPError as exc:
            self.error = exc

    @property
    def done(self) -> bool:
        return not self.thread.is_alive()

    def wait(self, seconds: float) -> bool:
        join(self.thread, seconds)
        return self.done

    def job_id(self) -> str | None:
        try:
            return self.response.json()["job_id"] if self.response is not None else None
        except (ValueError, KeyError, TypeError):
            return None

    def said(self) -> str:
        if self.error is not None:
            return f"{type(self.error).__name__}: {self.error}"
        if self.response is None:
            return "no answer yet"
        return f"{self.response.status_code} {self.response.text[:200]}"


def job_state(base: str, job_id: str) -> dict:
    """GET /jobs/{job_id}: the job's status as the API reports it."""
    with httpx.Client(timeout=PROBE_TIMEOUT, verify=NO_TLS) as client:
        r = client.get(f"{base}/jobs/{job_id}")
    return r.json() if r.status_code == 200 else {"state": f"HTTP {r.status_code}", "error": r.text[:200]}


def wait_for_end(base: str, job_id: str, seconds: float) -> dict:
    """The job's status once it has ended (done or failed), or as it is after `seconds`."""
    deadline = Deadline(seconds)
    while True:
        try:
            found = job_state(base, job_id)
        except httpx.TimeoutException:
            found = {"state": "unknown: GET /jobs got no answer"}
        if found.get("state") in ENDED_STATES or deadline.passed():
            return found
        time.sleep(0.01)


def wait_until(predicate, seconds: float) -> bool:
    """Poll `predicate` until it is true, at most `seconds`; is it?"""
    deadline = Deadline(seconds)
    while not predicate():
        if deadline.passed():
            return False
        time.sleep(0.01)
    return True


def where_it_failed(log: JobLog) -> str:
    """The lines of the code under test in the last traceback the jobs' log carried, in words."""
    for _, trace in reversed(log.records):
        frames = [(f, int(n), fn) for f, n, fn in TRACE_LINE.findall(trace) if is_learner_file(f)]
        if frames:
            return "; the log's traceback ends in your code at " + ", then ".join(
                f"{display_path(f)}:{n} in {fn}" for f, n, fn in frames[-2:])
    return ""


def server_error(server) -> str:
    """The last error the server logged for the app, in words (empty if none)."""
    # The server answers 500 first and logs the error just after: give the record a moment to arrive.
    wait_until(lambda: server.errors.tracebacks, 1.0)
    if not server.errors.tracebacks:
        return ""
    trace = server.errors.tracebacks[-1]
    frames = [(f, int(n), fn) for f, n, fn in TRACE_LINE.findall(trace) if is_learner_file(f)]
    where = f" at {display_path(frames[-1][0])}:{frames[-1][1]} in {frames[-1][2]}" if frames else ""
    return f"; the server logged {trace.strip().splitlines()[-1]}{where}"


def outcome(job: dict, log: JobLog) -> str:
    """What became of a job, in words."""
    if job.get("state") == "failed":
        return f"it failed with {job.get('error')}{where_it_failed(log)}"
    if job.get("state") == "done":
        return f"it finished with {job.get('result')!r}"
    return f"it was still {job.get('state')!r}"


def blocked_at(lines: list[str]) -> str:
    if not lines:
        return ""
    return (": meanwhile the event loop thread was blocked at " + lines[0]
            + (f", inside it at {lines[-1]}" if len(lines) > 1 else ""))


def probe(base: str) -> bool:
    """One GET /health on a fresh connection, as a liveness probe sends it; did it answer in time?"""
    try:
        with httpx.Client(timeout=PROBE_TIMEOUT, verify=NO_TLS) as client:
            r = client.get(f"{base}/health")
    except httpx.TimeoutException:
        return False
    assert r.status_code == 200, f"expected GET /health to answer 200, got {r.status_code} {r.text[:200]} ({HOW})"
    return True


def start_held_job(server, warehouse: Warehouse, log: JobLog, customer: str, step: str) -> Post:
    """POST /reports for a customer the warehouse holds at `step`; return once the job is held there.

    Fails if the job ends before it gets there, or if neither the request answers nor the job arrives.
    """
    post = Post(server.url, customer)
    deadline = Deadline(hang_after())
    while not warehouse.holds(customer) and not deadline.passed():
        if post.done and post.job_id():
            try:
                job = job_state(server.url, post.job_id())
            except httpx.TimeoutException:
                if warehouse.holds(customer):
                    # The job got there while the answer was waiting: whether a loop held by a job still answers
                    # is for the tests of a free loop to say, so the verdict does not hang on which came first.
                    break
                raise AssertionError(
                    f"expected GET /jobs/{{id}} to answer while the report job for {customer} ran, it got no answer "
                    f"within {PROBE_TIMEOUT:g} s{blocked_at(server.loop_held())} ({HOW})"
                ) from None
            assert job.get("state") not in ENDED_STATES, (
                f"expected the report job for {customer} to run until the warehouse answered its {step} call, "
                f"but {outcome(job, log)} ({HOW})"
            )
        elif post.done:
            raise AssertionError(f"expected POST /reports to answer 202 with a job id, it got {post.said()}{server_error(server)} ({HOW})")
        time.sleep(0.01)
    if not warehouse.holds(customer):
        stuck = server.loop_held()
        others = warehouse.held_customers()
        raise AssertionError(
            f"expected the report job for {customer} to reach the warehouse's {step} call within {hang_after():g} s, "
            f"it did not (POST /reports got {post.said()})"
            + (f", while the warehouse held the job{'s' if len(others) > 1 else ''} of {', '.join(others)}: "
               f"it waits for them, so jobs do not run at once" if others and not stuck else "")
            + f"{blocked_at(stuck)} ({HOW})"
        )
    return post


def test_a_report_job_finishes_with_its_report(kata):
    """a report job started with POST /reports finishes with the customer's report"""
    customer = "ada"
    with Warehouse() as warehouse, JobLog() as log:
        with served(part(kata, "app").create_app(warehouse.url)) as server:
            post = Post(server.url, customer)
            assert post.wait(waits() + 5) and post.job_id(), (
                f"expected POST /reports to answer 202 with a job id, it got {post.said()}{server_error(server)} ({HOW})"
            )
            assert post.response.status_code == 202, (
                f"expected POST /reports to answer 202 with a job id, it got {post.said()}{server_error(server)} ({HOW})"
            )
            job = wait_for_end(server.url, post.job_id(), waits())
            seen, ended = "", True
            if job.get("state") == "done":
                seen = server.shut_down(hang_after())
                ended = server.shutdown_finished(hang_after())
    assert job.get("state") == "done", (
        f"expected the report job dispatched from POST /reports to finish with its report, but {outcome(job, log)} "
        f"(one POST /reports, then GET /jobs/{{id}} until the job ended, {HOW})"
    )
    assert ended, (
        f"expected the app's shutdown to end once its only job had finished, but it had not {hang_after():g} s later: "
        f"jobs.drain() was still waiting ({'the event loop thread held in your code' if seen == 'blocked' else 'the event loop still turning'}): "
        f"something still counts a finished job as running (one POST /reports, the job done, then the server "
        f"stopped, {HOW})"
    )
    assert job.get("result") == report_for(customer), (
        f"expected the job's result to be the report {report_for(customer)}, got {job.get('result')!r} ({HOW})"
    )
    assert warehouse.reports.get(customer) == report_for(customer), (
        f"expected the job to store its report in the warehouse, but the warehouse got "
        f"{warehouse.reports.get(customer)!r} ({HOW})"
    )


def test_a_job_id_never_given_is_not_found(kata):
    """GET /jobs/{id} answers 404 for a job id the API never gave"""
    never = "00000000-0000-4000-8000-000000000000"
    with Warehouse() as warehouse, served(part(kata, "app").create_app(warehouse.url)) as server:
        with httpx.Client(timeout=PROBE_TIMEOUT, verify=NO_TLS) as client:
            r = client.get(f"{server.url}/jobs/{never}")
    assert r.status_code == 404, (
        f"expected GET /jobs/{never}, a job id the API never gave, to answer 404, as the starter does, it answered "
        f"{r.status_code} {r.text[:200]}: a client polling a mistyped or expired id must be told it does not exist, "
        f"not wait for it ({HOW})"
    )


def test_post_answers_while_its_job_runs(kata):
    """POST /reports answers with the job id while the job is still running"""
    customer = "held-store-bo"
    how = f"the warehouse held the job's store call until the test let it go, {HOW}"
    with Warehouse() as warehouse, JobLog() as log:
        with served(part(kata, "app").create_app(warehouse.url)) as server:
            post = None
            try:
                post = start_held_job(server, warehouse, log, customer, "store")
                if not post.wait(ANSWER_WITHIN):
                    stuck = server.loop_held()
                    raise AssertionError(
                        f"expected POST /reports to answer with its job id while the job ran, but it got no answer "
                        f"within {ANSWER_WITHIN:g} s of the job reaching the warehouse, which held it"
                        + (blocked_at(stuck) if stuck else
                           ": the event loop was free, so the request itself was waiting for the job to finish")
                        + f" ({how})"
                    )
                assert post.response is not None and post.response.status_code == 202 and post.job_id(), (
                    f"expected POST /reports to answer 202 with a job id, it got {post.said()}{server_error(server)} ({how})"
                )
            finally:
                warehouse.release()
                if post is not None:
                    post.wait(waits())
            job = wait_for_end(server.url, post.job_id(), waits())
    assert job.get("state") == "done", (
        f"expected the job to finish with its report once the warehouse answered, but {outcome(job, log)} ({how})"
    )


def test_health_answers_while_a_job_runs(kata):
    """/health answers while a job runs (the job is held until the probes have answered)"""
    customer = "held-store-cy"
    how = f"the warehouse held the job's store call until {PROBES} probes had answered, {HOW}"
    with Warehouse() as warehouse, JobLog() as log:
        with served(part(kata, "app").create_app(warehouse.url)) as server:
            post = None
            try:
                post = start_held_job(server, warehouse, log, customer, "store")
                for _ in range(PROBES):
                    at = server.loop_lines()  # where the loop is while the probe waits for it
                    assert probe(server.url), (
                        f"expected GET /health to answer while a report job ran (this probe waits "
                        f"{PROBE_TIMEOUT:g} s, a liveness probe 1 s by default), it got no answer within {PROBE_TIMEOUT:g} s{blocked_at(at)} ({how})"
                    )
                    time.sleep(PROBE_EVERY)
            finally:
                warehouse.release()
                if post is not None:
                    post.wait(waits())
            job = wait_for_end(server.url, post.job_id(), waits()) if post.job_id() else {"state": "never started"}
    assert job.get("state") == "done", (
        f"expected the job to finish with its report once the warehouse answered, but {outcome(job, log)} ({how})"
    )


def test_jobs_started_together_finish_in_any_order(kata):
    """three jobs started together run at once, and each finishes as soon as the warehouse answers it"""
    customers = [f"held-orders-dee-{i}" for i in (1, 2, 3)]
    order = [customers[0], customers[2], customers[1]]  # the first one started is let go first
    how = (f"3 POST /reports, each job held at the warehouse's orders call until the test let it go, in the "
           f"order job 1, job 3, job 2, {HOW}")
    with Warehouse() as warehouse, JobLog() as log:
        with served(part(kata, "app").create_app(warehouse.url)) as server:
            posts = []
            try:
                for customer in customers:
                    posts.append(start_held_job(server, warehouse, log, customer, "orders"))
                ids = {}
                for post in posts:
                    assert post.wait(waits()) and post.job_id(), (
                        f"expected POST /reports to answer 202 with a job id, it got {post.said()}{server_error(server)} ({how})"
                    )
                    ids[post.customer] = post.job_id()
                for n, customer in enumerate(order):
                    still = [c for c in order[n + 1:]]
                    warehouse.release(customer)
                    job = wait_for_end(server.url, ids[customer], waits())
                    number = customers.index(customer) + 1
                    assert job.get("state") == "done", (
                        f"expected job {number} to finish once the warehouse answered it"
                        + (f", with job{'s' if len(still) > 1 else ''} "
                           f"{' and '.join(str(customers.index(c) + 1) for c in still)} still held" if still else "")
                        + f", but {outcome(job, log)} {waits():g} s later"
                        + (": it cannot return before a job started after it, which is still held"
                           if job.get("state") == "running" else "")
                        + blocked_at(server.loop_held()) + f" ({how})"
                    )
            finally:
                warehouse.release()
                for post in posts:
                    post.wait(waits())


def test_finished_jobs_are_let_go(kata):
    """every job dispatched at once finishes, drain() waits for them all, and no finished job stays in memory"""
    jobs, tasks = part(kata, "jobs"), part(kata, "tasks")
    customers = [f"let-go-{chr(ord('a') + i)}" for i in range(LET_GO_JOBS)]
    how = (f"{LET_GO_JOBS} jobs dispatched at once with jobs.dispatch(tasks.build_report, ...) from a running "
           "event loop, then `await jobs.drain()`")

    async def scenario(url):
        box["threads before"] = {id(o) for o in gc.get_objects() if isinstance(o, threading.Thread)}
        before = asyncio.all_tasks()
        ids = [jobs.dispatch(tasks.build_report, url, customer) for customer in customers]
        box["ids"] = ids
        made = [weakref.ref(t) for t in asyncio.all_tasks() - before]
        await jobs.drain()
        return ids, made, [jobs.status(i) for i in ids]

    box = {}

    def run(url):
        try:
            box["value"] = asyncio.run(scenario(url))
        except BaseException as exc:  # noqa: BLE001 - raised again in the test below
            box["error"] = exc

    # Not run_bounded: a right fix may run its jobs on threads the loop does not know about (a pool of its
    # own), so a loop with nothing ready is not proof of a hang here; only the deadline is.
    with Warehouse() as warehouse, JobLog() as log:
        thread = threading.Thread(target=run, args=(warehouse.url,), name="scenario: let go", daemon=True)
        thread.start()
        join(thread, waits())
        if thread.is_alive():
            states = [jobs.status(i).get("state") for i in box.get("ids", [])]
            ended_all = states and all(state in ENDED_STATES for state in states)
            raise AssertionError(
                f"expected the jobs to finish and `await jobs.drain()` to return, it had not after {waits():g} s"
                + (f", although every job's status said it had ended: drain() waits for something that a finished "
                   f"job leaves behind" if ended_all else "") + f" ({how})"
            )
        if "error" in box:
            raise box["error"]
        ids, made, ended = box["value"]
        # Jobs that drain() did not wait for still run: let them end before anything is reported.
        wait_until(lambda: all(jobs.status(i).get("state") in ENDED_STATES for i in ids), waits())
    not_done = [(c, s) for c, s in zip(customers, ended) if s.get("state") != "done"]
    unfinished = [c for c, s in not_done if s.get("state") not in ENDED_STATES]
    assert not not_done, (
        f"expected every job to have finished with its report once drain() returned, but {len(not_done)} of "
        f"{LET_GO_JOBS} had not: {not_done[0][0]}: {outcome(not_done[0][1], log)}"
        + (f": jobs.drain() returned while {len(unfinished)} of them still ran. Either the runner keeps no "
           f"reference to a job it started, so drain() found none to wait for, or drain() stopped waiting "
           f"before the jobs ended" if unfinished else "")
        + f" ({how})"
    )
    gc.collect()
    threads_left = [o for o in gc.get_objects() if isinstance(o, threading.Thread)
                    and id(o) not in box["threads before"] and not o.is_alive()]
    assert not threads_left, (
        f"expected the job runner to let go of each job once it had finished, but {len(threads_left)} finished "
        f"threading.Thread objects made while the jobs ran were still in memory after drain() and gc.collect(): "
        f"whatever keeps a job's thread while it runs must drop it when the job ends ({how})"
    )
    alive = [r() for r in made if r() is not None]
    assert not alive, (
        f"expected the job runner to let go of each job's task once the job had finished, but {len(alive)} of the "
        f"{len(made)} tasks dispatch() made were still in memory after drain() and gc.collect(): whatever keeps a "
        f"task while its job runs must drop it when the job ends ({how})"
    )


def let_go(warehouse: Warehouse, jobs, job_id: str) -> str:
    """The job's state while the warehouse holds it; then let it go, and give it time to end before a failure is reported."""
    state = jobs.status(job_id).get("state")
    warehouse.release()
    wait_until(lambda: jobs.status(job_id).get("state") in ENDED_STATES, waits())
    return state


def test_shutdown_waits_for_a_running_job(kata):
    """the app's shutdown waits, without blocking the event loop, for a job held longer than any deadline, and the job finishes before the server stops"""
    customer = "held-store-eve"
    how = (f"the warehouse held the job's store call while the server shut down as on SIGTERM (listeners closed, "
           f"then the app's lifespan, which calls jobs.drain()), until the event loop's clock, and time.monotonic(), "
           f"time.time() and time.perf_counter() as the app's modules see them, had moved a week ahead (so every "
           f"deadline set on them had passed), then let it go, {HOW}")
    jobs = part(kata, "jobs")
    with Warehouse() as warehouse, JobLog() as log:
        with served(part(kata, "app").create_app(warehouse.url)) as server:
            post = None
            try:
                post = start_held_job(server, warehouse, log, customer, "store")
                assert post.wait(waits()) and post.job_id(), (
                    f"expected POST /reports to answer 202 with a job id, it got {post.said()}{server_error(server)} ({how})"
                )
                job_id = post.job_id()
                seen = server.shut_down(waits(), record=lambda: jobs.status(job_id))
                if seen == "done":
                    state = let_go(warehouse, jobs, job_id)
                    raise AssertionError(
                        f"expected the app's shutdown to wait for the job still running, but it finished shutting "
                        f"down within {QUIET_TURNS} turns of the event loop, while the warehouse held the job (still "
                        f"{state!r}): jobs.drain() returned at once. Either the runner keeps no reference to a job "
                        f"it started, so drain() found none to wait for, or drain() stopped waiting before the job "
                        f"ended ({how})"
                    )
                # drain() has been waiting since before now: move the event loop's clock a week ahead, so that any
                # deadline drain() set itself on the loop is past, and look again, a callback the loop must run.
                if seen == "waiting":
                    seen = server.look(waits(), ahead=A_WEEK)
                assert seen != "blocked", (
                    f"expected the event loop to keep running while jobs.drain() waited for the job, but a callback "
                    f"scheduled on it did not run: its thread was held in your code at {server.held_at[0]}"
                    + (f", inside it at {server.held_at[-1]}" if len(server.held_at) > 1 else "")
                    + ". drain() runs on the API's event loop, so a wait that blocks there (thread.join(), "
                    f"future.result(), time.sleep()) stops the loop for the whole shutdown ({how})"
                )
                assert seen != "stuck", (
                    f"expected the event loop to run a callback while jobs.drain() waited for the job, or the "
                    f"shutdown to finish; in {waits():g} s it did neither ({how})"
                )
                if seen == "done":
                    state = let_go(warehouse, jobs, job_id)
                    raise AssertionError(
                        f"expected the app's shutdown to wait for the job still running, however long it runs, but "
                        f"jobs.drain() returned while the warehouse still held the job (still {state!r}), once the "
                        f"event loop's clock had moved a week ahead: drain() waited for the job a while, then stopped "
                        f"waiting before it ended, as a wait with a deadline does (asyncio.wait(..., timeout=...), "
                        f"asyncio.timeout(), asyncio.wait_for(), a loop until time.monotonic() passes a deadline), "
                        f"however long the deadline; the platform stops the "
                        f"process when its grace period ends, and a job still running then dies with it ({how})"
                    )
            finally:
                warehouse.release()
            assert server.shutdown_finished(waits()), (
                f"expected the app's shutdown to finish once the job had, it did not within {waits():g} s ({how})"
            )
            job = server.at_end or {"state": "not recorded"}
    assert job.get("state") == "done", (
        f"expected the job to have finished with its report by the time the app's shutdown ended, but when it "
        f"ended {outcome(job, log)} ({how})"
    )


def job_thread(customer: str) -> threading.Thread | None:
    """The thread running the report job for `customer` now (its build_report call), if one is."""
    for ident, frame in sys._current_frames().items():
        while frame is not None:
            if frame.f_code.co_name == "build_report" and frame.f_locals.get("customer") == customer:
                return next((t for t in threading.enumerate() if t.ident == ident), None)
            frame = frame.f_back
    return None


def through_with_job(thread: threading.Thread | None) -> bool:
    """Has `thread` finished the job it ran, down to telling the event loop (a pool's thread back at its queue)?"""
    if thread is None or not thread.is_alive():
        return True
    frame = sys._current_frames().get(thread.ident)
    while frame is not None:
        code = frame.f_code
        if is_learner_file(code.co_filename) or code.co_name == "build_report" or (
                code.co_name == "run" and code.co_filename.endswith(("concurrent/futures/thread.py",
                                                                     "concurrent\\futures\\thread.py"))):
            return False
        frame = frame.f_back
    return True


def end_held_job(server, warehouse: Warehouse, jobs, customer: str, job_id: str) -> dict:
    """Let the warehouse answer the held job for `customer`; its status once it has ended and its thread has told the loop."""
    thread = job_thread(customer)
    warehouse.release(customer)
    wait_until(lambda: jobs.status(job_id).get("state") in ENDED_STATES and through_with_job(thread), waits())
    return jobs.status(job_id)


def shutdown_not_blocked(server, seen: str, how: str) -> None:
    assert seen != "blocked", (
        f"expected the event loop to keep running while jobs.drain() waited, but a callback scheduled on it did "
        f"not run: its thread was held in your code at {server.held_at[0]}"
        + (f", inside it at {server.held_at[-1]}" if len(server.held_at) > 1 else "")
        + f". drain() runs on the API's event loop: it must wait with an await ({how})"
    )
    assert seen != "stuck", (
        f"expected the event loop to run a callback while jobs.drain() waited, or the shutdown to finish; in "
        f"{waits():g} s it did neither ({how})"
    )


def test_a_failed_job_does_not_end_the_shutdown(kata):
    """a job that fails while the app shuts down does not end the wait: a job still running finishes before the server stops"""
    held, failing = "held-store-gus", "held-orders-broken-hal"
    how = (f"two jobs, one held at the warehouse's store call, one held at its orders call and then answered 503 "
           f"while the server shut down as on SIGTERM (the app's lifespan calls jobs.drain()), {HOW}")
    jobs = part(kata, "jobs")
    with Warehouse() as warehouse, JobLog() as log:
        with served(part(kata, "app").create_app(warehouse.url)) as server:
            posts = []
            try:
                for customer, step in ((held, "store"), (failing, "orders")):
                    posts.append(start_held_job(server, warehouse, log, customer, step))
                for post in posts:
                    assert post.wait(waits()) and post.job_id(), (
                        f"expected POST /reports to answer 202 with a job id, it got {post.said()}"
                        f"{server_error(server)} ({how})"
                    )
                held_id, failing_id = (post.job_id() for post in posts)
                seen = server.shut_down(waits(), record=lambda: jobs.status(held_id))
                shutdown_not_blocked(server, seen, how)
                assert seen == "waiting", (
                    f"expected the app's shutdown to wait for the two jobs still running, but it finished within "
                    f"{QUIET_TURNS} turns of the event loop: jobs.drain() returned at once, so drain() found none "
                    f"to wait for ({how})"
                )
                failed = end_held_job(server, warehouse, jobs, failing, failing_id)
                seen = server.look(waits())
                shutdown_not_blocked(server, seen, how)
                if seen == "done":
                    state = let_go(warehouse, jobs, held_id)
                    raise AssertionError(
                        f"expected the app's shutdown to go on waiting for the job still held at the warehouse "
                        f"once the other job had failed, but jobs.drain() returned when that job ended "
                        f"({outcome(failed, log)}), with the held job still {state!r}: drain() stopped waiting "
                        f"before the jobs ended. asyncio.gather() raises the first error of what it awaits and "
                        f"stops there; a failed job is one more job that has ended, and the others still run ({how})"
                    )
                assert seen == "waiting", f"expected the app's shutdown to be waiting, it was {seen!r} ({how})"
                end_held_job(server, warehouse, jobs, held, held_id)
                seen = server.look(waits(), ahead=A_WEEK)  # a drain that polls looks again once the clock has moved
                shutdown_not_blocked(server, seen, how)
                assert seen == "done", (
                    f"expected the app's shutdown to end once both jobs had ended, but it still waited after "
                    f"{QUIET_TURNS} turns of the event loop, and after its clock had moved a week ahead: jobs.drain() "
                    f"waits for something the failed job left behind. The runner must forget a job however it "
                    f"ends, failed as well as done ({how})"
                )
            finally:
                warehouse.release()
            job = server.at_end or {"state": "not recorded"}
    assert job.get("state") == "done", (
        f"expected the held job to have finished with its report by the time the app's shutdown ended, but when "
        f"it ended {outcome(job, log)} ({how})"
    )


def test_a_failed_job_is_not_waited_for(kata):
    """once its only job has failed, the app's shutdown has nothing to wait for, and ends at once"""
    customer = "held-orders-broken-ivy"
    how = (f"one job, held at the warehouse's orders call and then answered 503; once it had failed, the server "
           f"shut down as on SIGTERM (the app's lifespan calls jobs.drain()), {HOW}")
    jobs = part(kata, "jobs")
    with Warehouse() as warehouse, JobLog() as log:
        with served(part(kata, "app").create_app(warehouse.url)) as server:
            try:
                post = start_held_job(server, warehouse, log, customer, "orders")
                assert post.wait(waits()) and post.job_id(), (
                    f"expected POST /reports to answer 202 with a job id, it got {post.said()}{server_error(server)} ({how})"
                )
                job = end_held_job(server, warehouse, jobs, customer, post.job_id())
                assert job.get("state") == "failed", (
                    f"expected the job to be marked failed with the warehouse's error, but {outcome(job, log)} ({how})"
                )
                seen = server.shut_down(waits())
                if seen == "waiting":
                    # A drain that polls (asyncio.sleep in a loop) looks again once the loop's clock has moved on.
                    seen = server.look(waits(), ahead=A_WEEK)
                shutdown_not_blocked(server, seen, how)
            finally:
                warehouse.release()
    assert seen == "done", (
        f"expected the app's shutdown to end at once, its only job having failed, but it still waited after "
        f"{2 * QUIET_TURNS} turns of the event loop, and after its clock had moved a week ahead: jobs.drain() "
        f"waits for something a failed job leaves behind. The runner must forget a job however it ends, "
        f"failed as well as done ({how})"
    )


def test_a_job_has_its_status_while_it_waits_for_a_thread(kata):
    """with every job thread busy (3 jobs held, on a default executor of 3 threads), a job posted then has its status at once, "queued", and runs once a thread is free"""
    held = [f"held-orders-jo-{i}" for i in range(1, JOB_THREADS + 1)]
    extra = "kay"
    how = (f"the server's event loop given a default executor of {JOB_THREADS} threads (asyncio.to_thread's: "
           f"min(32, cores + 4) of them by default, six on a two-core pod), {JOB_THREADS} jobs held at the "
           f"warehouse's orders call, then one more POST /reports, {HOW}")
    with Warehouse() as warehouse, JobLog() as log:
        with served(part(kata, "app").create_app(warehouse.url), job_threads=JOB_THREADS) as server:
            posts = []
            try:
                for customer in held:
                    posts.append(start_held_job(server, warehouse, log, customer, "orders"))
                post = Post(server.url, extra)
                posts.append(post)
                assert post.wait(waits()) and post.job_id(), (
                    f"expected POST /reports to answer 202 with a job id, it got {post.said()}{server_error(server)} ({how})"
                )
                first = job_state(server.url, post.job_id())
                assert first.get("state") in ("queued", "running", "done"), (
                    f"expected GET /jobs/{{id}} to know the job from the moment POST /reports gave its id (\"queued\" "
                    f"while it waits for a thread), but it got {first.get('state')} {first.get('error', '')}: "
                    f"the job's status appears only when a thread starts it, and while every thread is busy, a job "
                    f"whose id the client holds is unknown. Record it in dispatch(), before the job is handed on ({how})"
                )
                warehouse.release(held[0])
                job = wait_for_end(server.url, post.job_id(), waits())
                assert job.get("state") == "done", (
                    f"expected the job that waited for a thread to run once the warehouse had let one held job go, "
                    f"but {outcome(job, log)} ({how})"
                )
            finally:
                warehouse.release()
                for post in posts:
                    post.wait(waits())


def test_a_failing_job_reports_its_error(kata):
    """a job whose warehouse call fails is marked failed with its error, and its traceback reaches the log"""
    customer = "broken-fay"
    how = f"one POST /reports for a customer the warehouse answers 503 for, {HOW}"
    with Warehouse() as warehouse, JobLog() as log:
        with served(part(kata, "app").create_app(warehouse.url)) as server:
            post = Post(server.url, customer)
            assert post.wait(waits() + 5) and post.job_id(), (
                f"expected POST /reports to answer 202 with a job id, it got {post.said()}{server_error(server)} ({how})"
            )
            job = wait_for_end(server.url, post.job_id(), waits())
    assert job.get("state") == "failed" and "503" in str(job.get("error")), (
        f"expected the job to be marked failed with the warehouse's error (503 Service Unavailable), but "
        f"{outcome(job, log)} ({how})"
    )
    traces = [trace for _, trace in log.records if "503" in trace and "fetch_orders" in trace]
    assert traces, (
        "expected the job's error to reach the logger reports.jobs with its traceback (down to fetch_orders, where "
        f"the warehouse's 503 was raised), but no record carried it; the log had "
        f"{[text for text, _ in log.records] or 'no record'} ({how})"
    )
