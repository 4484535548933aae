"""Hidden tests for kata 08, blocking-handler.

Every test serves a fresh copy of the package (`kata`) with uvicorn on
127.0.0.1 and talks to it with a real HTTP client, as a liveness probe and a
user would. The app's model is a stand-in for the model's HTTP API
(blocking_handler_harness.ModelAPI), a real server on its own thread whose
answers the test controls: slow, held until released, or a failure. The
access log is read from the logger `drafts.access`, and the server's errors
from every logger. One test gives the served app's threadpool 2 threads (40
by default) and holds 3 requests, so that one waits for a free thread. Every
request has a timeout, and the model is released before the server is stopped, so nothing
can wait for ever; the last test reads the app's routes without serving it.
"""
import inspect
import string
import threading
import time

import httpx
from fastapi.routing import APIRoute, iter_route_contexts  # included routers stay wrapped in app.routes

from blocking_handler_harness import NO_TLS, SLOW, AccessLines, LoggedTracebacks, ModelAPI, draft_for, served
from loopkata.testing import hang_after

HEALTH_WITHIN = 0.1  # seconds: the liveness probe's budget in these tests
PROBE_TIMEOUT = 0.25  # seconds a probe waits for /health: well past the budget, well short of a slow call
PROBES = 3  # probes that must answer in time while every call is with the model
PROBE_EVERY = 0.03  # seconds between two probes of /health
HOW = "through a real uvicorn server on 127.0.0.1"


def part(kata, name):
    """A module of the package under test (app, access_log, client), from this test's own copy."""
    import importlib

    return importlib.import_module(f"{kata.__name__}.{name}")


def request_id(what: str, number: int = 0) -> str:
    """An X-Request-ID made of letters only, so that no status code can hide in it: "slow-call-b"."""
    return f"{what}-call-{string.ascii_lowercase[number]}"


class Call:
    """POST /drafts from a client thread of its own; `response`, `error` and `seconds` once it is done."""

    def __init__(self, base: str, prompt: str, request_id: str, timeout: float):
        self.prompt, self.request_id = prompt, request_id
        self.response = self.error = self.seconds = None
        self._args = (base, timeout)
        self.thread = threading.Thread(target=self._run, name=f"client {request_id}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        base, timeout = self._args
        started = time.monotonic()
        try:
            with httpx.Client(timeout=timeout, verify=NO_TLS) as client:
                self.response = client.post(f"{base}/drafts", json={"prompt": self.prompt},
                                            headers={"X-Request-ID": self.request_id})
        except httpx.HTTPError as exc:
            self.error = exc
        self.seconds = time.monotonic() - started

    @property
    def done(self) -> bool:
        return not self.thread.is_alive()

    def wait(self, seconds: float) -> bool:
        self.thread.join(seconds)
        return self.done

    def said(self) -> str:
        """What the call got, in words."""
        if self.error is not None:
            return f"{type(self.error).__name__}: {self.error}"
        if self.response is None:
            return "no answer yet"
        return f"{self.response.status_code} {self.response.text[:200]}"


def probe(base: str) -> float:
    """One GET /health on a fresh connection, as a liveness probe sends it; seconds until it answered."""
    started = time.monotonic()
    try:
        with httpx.Client(timeout=PROBE_TIMEOUT, verify=NO_TLS) as client:
            r = client.get(f"{base}/health")
    except httpx.TimeoutException:
        return float("inf")
    assert r.status_code == 200, f"expected GET /health to answer 200, got {r.status_code} {r.text[:200]} ({HOW})"
    return time.monotonic() - started


def took(seconds: float) -> str:
    return f"it got no answer within {PROBE_TIMEOUT:g} s" if seconds == float("inf") else f"it took {seconds:.2f} s"


def blocked_at(lines: list[str]) -> str:
    """Where the event loop thread was, in the learner's lines (outermost first), in words."""
    if not lines:
        return ""
    return (": meanwhile the event loop thread was blocked at " + lines[0]
            + (f", inside it at {lines[-1]}" if len(lines) > 1 else ""))


def health_during(app, model, calls: int) -> list[Call]:
    """Send `calls` slow calls at once and probe /health while the model holds them.

    Fails at the first probe slower than HEALTH_WITHIN, and as soon as a call answers
    while the others have not all reached the model. Once PROBES probes have answered
    in time with every call at the model, the model is told to answer.
    """
    what = "1 slow model call was running" if calls == 1 else f"{calls} slow model calls sent at once were running"
    with served(app) as server:
        sent = [Call(server.url, f"slow: reply number {i + 1}", request_id("slow", i), SLOW * calls + hang_after())
                for i in range(calls)]
        try:
            assert model.wait_for_calls(1, hang_after()), (
                f"expected POST /drafts to call the model within {hang_after():g} s, it did not "
                f"(the calls got: {'; '.join(c.said() for c in sent)}) ({HOW})"
            )
            answered_in_time = 0
            while not all(c.done for c in sent):
                at = server.loop_lines()  # where the loop is while the probe waits for it
                latency = probe(server.url)
                if latency > HEALTH_WITHIN:
                    raise AssertionError(
                        f"expected GET /health to answer within {HEALTH_WITHIN * 1000:.0f} ms while {what} "
                        f"(the model answers each after {SLOW:g} s), {took(latency)}{blocked_at(at)} ({HOW})"
                    )
                finished = [c for c in sent if c.done]
                if finished and model.most_at_once < calls:
                    most = model.most_at_once
                    waits = ("so each call waits for the one before it to finish" if most == 1 else
                             f"so a call beyond the first {most} waits until one of the calls ahead of it finishes")
                    raise AssertionError(
                        f"expected the {calls} calls sent at once to run at once, but the model never had more than "
                        f"{most} of them at a time: the first answered after {finished[0].seconds:.2f} s "
                        f"while the others still waited to reach the model, {waits} ({HOW})"
                    )
                if model.most_at_once >= calls and model.working >= calls:
                    answered_in_time += 1
                    if answered_in_time >= PROBES:
                        break
                time.sleep(PROBE_EVERY)
        finally:
            model.release()
            for c in sent:
                c.wait(hang_after())
    return sent


def assert_drafted(calls: list[Call]) -> None:
    for c in calls:
        assert c.done, f"expected POST /drafts to answer, it did not within its timeout ({HOW})"
        assert c.error is None and c.response is not None, f"expected POST /drafts to answer, it got {c.said()} ({HOW})"
        assert c.response.status_code == 200, (
            f"expected POST /drafts to answer 200 with the model's draft, got {c.said()} ({HOW})"
        )
        want = {"draft": draft_for(c.prompt)}
        assert c.response.json() == want, f"expected POST /drafts to return {want}, got {c.said()} ({HOW})"


def test_health_answers_while_a_slow_call_runs(kata):
    """/health answers within 100 ms while a slow model call runs, and the call still returns its draft"""
    with ModelAPI() as model:
        calls = health_during(part(kata, "app").create_app(model.url), model, calls=1)
    assert_drafted(calls)


def test_health_answers_while_four_slow_calls_run(kata):
    """/health answers within 100 ms while 4 slow model calls run at once, and the 4 run side by side"""
    with ModelAPI() as model:
        calls = health_during(part(kata, "app").create_app(model.url), model, calls=4)
    assert_drafted(calls)


def wait_for_line(log: AccessLines, request_id: str, status: str, seconds: float) -> list[str]:
    """The request's lines once one names `status`, or its lines after `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        mine = log.of(request_id)
        if any(status in AccessLines.statuses(line) for line in mine):
            return mine
        time.sleep(0.01)
    return log.of(request_id)


def shown(lines: list[str]) -> str:
    return "; ".join(repr(line) for line in lines) if lines else "no line"


HELD_THREADS = 2  # threads the served app's threadpool gets in the hung-requests test (40 by default)
HELD = HELD_THREADS + 1  # requests the model holds at once there: one more than the threadpool has threads
ARRIVAL_WITHIN = 0.2  # seconds after the model took the first held call for every held request to have its line
NO_LINE_WITHIN = 0.05  # seconds after which a test with no arrival line at all stops waiting for one


def test_hung_requests_show_in_the_access_log(kata):
    """every request that hangs has an arrival line while it hangs, one still waiting for a free thread too, and a completion line after"""
    rids = [request_id("hung", i) for i in range(HELD)]
    how = (f"{HELD} requests held by the model at once, the served app's threadpool limited to {HELD_THREADS} "
           f"threads, {HOW}")
    with ModelAPI() as model, AccessLines() as log:
        app = part(kata, "app").create_app(model.url)
        with served(app, threads=HELD_THREADS) as server:
            calls = [Call(server.url, f"hang: a draft the model never finishes, number {i + 1}", rid, hang_after() + 2)
                     for i, rid in enumerate(rids)]
            try:
                assert model.wait_for_calls(1, hang_after()), (
                    f"expected POST /drafts to call the model within {hang_after():g} s, it did not "
                    f"(the calls got: {'; '.join(c.said() for c in calls)}) ({how})"
                )
                # Every line was due as its request came in; a moment for the ones still on their way.
                # The request the model holds went through its arrival line before it got there, so
                # with no line at all after NO_LINE_WITHIN, none is coming: no need to wait longer.
                began = time.monotonic()
                while not all(log.of(rid) for rid in rids) and time.monotonic() < began + ARRIVAL_WITHIN:
                    if time.monotonic() > began + NO_LINE_WITHIN and not any(log.of(rid) for rid in rids):
                        break
                    time.sleep(0.01)
                lined = {rid: log.of(rid) for rid in rids}
                missing = [rid for rid in rids if not lined[rid]]
                assert not missing or len(missing) < HELD, (
                    f"expected an arrival line for each of the {HELD} hung requests while they hung, but the access "
                    "log had no line for any of them: a request stuck in its handler looks exactly like one that "
                    f"never arrived (checked while the model held the calls, {how})"
                )
                others = HELD - len(missing)
                assert not missing, (
                    f"expected an arrival line for each of the {HELD} hung requests while they hung, but "
                    f"{' and '.join(missing)} had none while "
                    f"{'the other one had its own' if others == 1 else f'the other {others} had theirs'}: a request "
                    "held before its handler runs, waiting for a free thread say, looks exactly like one that never "
                    f"arrived (checked {ARRIVAL_WITHIN:g} s after the model took the first call, {how})"
                )
                done = [line for rid in rids for line in lined[rid] if AccessLines.statuses(line)]
                assert not done, (
                    "expected no completion line while the requests still hung (an arrival line names no status), "
                    f"but the access log had {shown(done)} before the model had answered ({how})"
                )
            finally:
                model.release()
                for c in calls:
                    c.wait(hang_after() + 2)
            for c in calls:
                assert c.response is not None and c.response.status_code == 200, (
                    f"expected the hung request {c.request_id} to answer 200 once the model answered, it got "
                    f"{c.said()} ({how})"
                )
            deadline = time.monotonic() + 0.25  # one wait for all of them, not one each
            ended = {rid: wait_for_line(log, rid, "200", deadline - time.monotonic()) for rid in rids}
    for rid, mine in ended.items():
        assert any("200" in AccessLines.statuses(line) for line in mine), (
            f"expected a completion line naming status 200 once the hung request {rid} had answered, but the "
            f"access log had {shown(mine)} for it ({how})"
        )


def test_a_request_whose_handler_raises_gets_a_completion_line(kata):
    """a request whose handler raises gets a completion line with the status the client got (500), and its error still reaches the server's log"""
    rid = request_id("failing")
    with ModelAPI() as model, AccessLines() as log, LoggedTracebacks() as errors:
        app = part(kata, "app").create_app(model.url)
        with served(app, log_level="error") as server:
            call = Call(server.url, "fail: the model is overloaded", rid, hang_after() + 2)
            call.wait(hang_after() + 2)
            assert call.done and call.response is not None, (
                f"expected POST /drafts to answer when the model answered 503, it got {call.said()} ({HOW})"
            )
            status = str(call.response.status_code)
            mine = wait_for_line(log, rid, status, 0.25)
            deadline = time.monotonic() + 0.2  # the server logs the error just after it has answered
            while not errors.naming("ModelError", "503") and time.monotonic() < deadline:
                time.sleep(0.01)
    assert any(status in AccessLines.statuses(line) for line in mine), (
        f"expected a completion line naming status {status} for the request whose handler raised (the model "
        f"answered 503, the client got {status}), but the access log had {shown(mine)} for it ({HOW})"
    )
    assert errors.naming("ModelError", "503"), (
        "expected the handler's error (ModelError: the model answered 503) to reach the server's log with its "
        f"traceback, as it does when nothing catches it, but no log record carried its traceback: the client got "
        f"{status} and the error itself was swallowed (one request whose handler raised, every logger read, {HOW})"
    )


def test_every_async_endpoint_is_reviewed(kata):
    """every async def endpoint of the app, included routers too, is on the reviewed list"""
    app_module = part(kata, "app")
    app = app_module.create_app("http://127.0.0.1:9")  # nothing is served: only its routes are read
    walked = [(rc.path, rc.original_route) for rc in iter_route_contexts(app.routes)
              if isinstance(rc.original_route, APIRoute)]
    paths = {path for path, _ in walked}
    assert {"/drafts", "/health"} <= paths, (
        f"expected the walk of create_app()'s routes to find /drafts and /health, it found {sorted(paths) or 'none'} "
        "(walking app.routes with included routers flattened)"
    )
    reviewed = set(getattr(app_module, "REVIEWED_ASYNC", ()))
    unreviewed = sorted(path for path, route in walked
                        if path not in reviewed and inspect.iscoroutinefunction(route.endpoint))
    assert not unreviewed, (
        f"expected every async def endpoint to be on app.REVIEWED_ASYNC (read by someone who checked that it only "
        f"awaits), but {', '.join(unreviewed)} is an async def endpoint that nobody reviewed, and it runs on the event "
        "loop (walking create_app()'s routes with included routers flattened)"
    )
