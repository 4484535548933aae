"""Hidden tests for kata 08, blocking-handler.

Every test serves a fresh copy of the package (`kata`) with uvicorn on
127.0.0.1 and talks to it with a real HTTP client, as a liveness probe and a
user would. The app's model is a stand-in for the model's HTTP API
(blocking_handler_harness.ModelAPI), a real server on its own thread whose
answers the test controls: slow, held until released, or a failure. The
access log is read from the logger `drafts.access`. Every request has a
timeout, and the model is released before the server is stopped, so nothing
can wait for ever; the last test reads the app's routes without serving it.
"""
import inspect
import string
import threading
import time

import httpx
from fastapi.routing import APIRoute, iter_route_contexts  # included routers stay wrapped in app.routes

from blocking_handler_harness import NO_TLS, SLOW, AccessLines, ModelAPI, draft_for, served
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
                    raise AssertionError(
                        f"expected the {calls} calls sent at once to run at once, but the model never had more than "
                        f"{model.most_at_once} of them at a time: the first answered after {finished[0].seconds:.2f} s "
                        f"while the others still waited to reach the model, so each call waits for the ones "
                        f"before it ({HOW})"
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


def test_a_hung_request_shows_in_the_access_log(kata):
    """a request that hangs has an arrival line and no completion line while it hangs, and a completion line after"""
    rid = request_id("hung")
    with ModelAPI() as model, AccessLines() as log:
        app = part(kata, "app").create_app(model.url)
        with served(app) as server:
            call = Call(server.url, "hang: a draft the model never finishes", rid, hang_after() + 2)
            try:
                assert model.wait_for_calls(1, hang_after()), (
                    f"expected POST /drafts to call the model within {hang_after():g} s, it did not "
                    f"(the call got: {call.said()}) ({HOW})"
                )
                deadline = time.monotonic() + 0.05
                while not log.of(rid) and time.monotonic() < deadline:
                    time.sleep(0.01)  # the line was due before the handler ran; a moment for a slow handler
                mine = log.of(rid)
                assert mine, (
                    f"expected an arrival line for the hung request (X-Request-ID {rid}) while it hung, "
                    "but the access log had no line for it: a request stuck in its handler looks exactly like one "
                    f"that never arrived (checked while the model held the call, {HOW})"
                )
                done = [line for line in mine if AccessLines.statuses(line)]
                assert not done, (
                    "expected no completion line while the request still hung (an arrival line names no status), "
                    f"but the access log had {shown(done)} for it before the model had answered ({HOW})"
                )
            finally:
                model.release()
                call.wait(hang_after() + 2)
            assert call.response is not None and call.response.status_code == 200, (
                f"expected the hung request to answer 200 once the model answered, it got {call.said()} ({HOW})"
            )
            mine = wait_for_line(log, rid, "200", 0.25)
    assert any("200" in AccessLines.statuses(line) for line in mine), (
        "expected a completion line naming status 200 once the hung request had answered, but the access log "
        f"had {shown(mine)} for it ({HOW})"
    )


def test_a_request_whose_handler_raises_gets_a_completion_line(kata):
    """a request whose handler raises still gets a completion line, with the status the client got (500)"""
    rid = request_id("failing")
    with ModelAPI() as model, AccessLines() as log:
        app = part(kata, "app").create_app(model.url)
        with served(app) as server:
            call = Call(server.url, "fail: the model is overloaded", rid, hang_after() + 2)
            call.wait(hang_after() + 2)
            assert call.done and call.response is not None, (
                f"expected POST /drafts to answer when the model answered 503, it got {call.said()} ({HOW})"
            )
            status = str(call.response.status_code)
            mine = wait_for_line(log, rid, status, 0.25)
    assert any(status in AccessLines.statuses(line) for line in mine), (
        f"expected a completion line naming status {status} for the request whose handler raised (the model "
        f"answered 503, the client got {status}), but the access log had {shown(mine)} for it ({HOW})"
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
