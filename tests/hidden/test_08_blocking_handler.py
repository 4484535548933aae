"""Hidden tests for kata 08, blocking-handler.

Every test serves a fresh copy of the package (`kata`) with uvicorn on
127.0.0.1 and talks to it with a real HTTP client, as a liveness probe and a
user would. The app's model is a stand-in for the model's HTTP API
(blocking_handler_harness.ModelAPI), a real server on its own thread whose
answers the test controls: slow, held until released, or a failure. The
access log is read from the logger `drafts.access`, and the server's errors
from every logger. One test gives the served app's threadpool 2 threads (40
by default), has the model hold 2 requests, and only then sends a third, which
waits for a free thread; another sends a request from a raw socket, its
headers and half its body, and stalls. Every request has a timeout, and the
model is released before the server is stopped, so nothing can wait for ever;
the last test reads the app's routes without serving it.
"""
import inspect
import json
import socket
import string
import threading
import time

import httpx
from fastapi.routing import APIRoute, iter_route_contexts  # included routers stay wrapped in app.routes

from blocking_handler_harness import NO_TLS, AccessLines, LoggedTracebacks, ModelAPI, draft_for, served
from loopkata.testing import Deadline, SteppingClock, hang_after

# A liveness probe waits 1 s by default (Kubernetes' timeoutSeconds). The model holds every call
# until the probes are done, so an event loop held by a call gives no answer at all, however long
# a probe waits, and a free one answers well within this even on a busy machine.
PROBE_TIMEOUT = 2.0  # seconds a probe waits for /health
PROBES = 3  # probes that must answer while every call is held at the model
PROBE_EVERY = 0.03  # seconds between two probes of /health
AT_ONCE_WITHIN = 3.0  # seconds for calls sent at once to all reach the model (they are held there)
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


def probe(base: str) -> bool:
    """One GET /health on a fresh connection, as a liveness probe sends it; did it answer in time?"""
    try:
        with httpx.Client(timeout=PROBE_TIMEOUT, verify=NO_TLS) as client:
            r = client.get(f"{base}/health")
    except httpx.TimeoutException:
        return False
    assert r.status_code == 200, f"expected GET /health to answer 200, got {r.status_code} {r.text[:200]} ({HOW})"
    return True


def blocked_at(lines: list[str]) -> str:
    """Where the event loop thread was, in the learner's lines (outermost first), in words."""
    if not lines:
        return ""
    return (": meanwhile the event loop thread was blocked at " + lines[0]
            + (f", inside it at {lines[-1]}" if len(lines) > 1 else ""))


def health_during(app, model, calls: int) -> list[Call]:
    """Send `calls` slow calls at once, which the model holds, and probe /health meanwhile.

    Decided by what happened while the model held the calls, not by how fast: a probe that
    gets no answer in PROBE_TIMEOUT fails, and so do calls that do not all reach the model
    (each waits for the one before it). Once PROBES probes have answered with every call at
    the model, the model answers them all.
    """
    what = ("1 slow model call was held at the model" if calls == 1
            else f"{calls} slow model calls sent at once were held at the model")
    with served(app) as server:
        sent = [Call(server.url, f"hang: reply number {i + 1}", request_id("slow", i), AT_ONCE_WITHIN + 30)
                for i in range(calls)]
        try:
            assert model.wait_for_calls(1, max(hang_after(), AT_ONCE_WITHIN)), (
                f"expected POST /drafts to call the model within {max(hang_after(), AT_ONCE_WITHIN):g} s, it did not "
                f"(the calls got: {'; '.join(c.said() for c in sent)}) ({HOW})"
            )
            answered, since = 0, time.monotonic()
            while answered < PROBES:
                ended = [c for c in sent if c.done]
                assert not ended, (
                    f"expected POST /drafts to wait for the model while it held the call, but it answered first: "
                    f"{ended[0].said()} ({HOW})"
                )
                at = server.loop_lines()  # where the loop is while the probe waits for it
                assert probe(server.url), (
                    f"expected GET /health to answer while {what} (a liveness probe waits {PROBE_TIMEOUT:g} s), "
                    f"it got no answer within {PROBE_TIMEOUT:g} s{blocked_at(at)} ({HOW})"
                )
                if model.working >= calls:
                    answered += 1
                elif time.monotonic() > since + AT_ONCE_WITHIN:
                    most = model.most_at_once
                    waits = ("so each call waits for the one before it to finish" if most == 1 else
                             f"so a call beyond the first {most} waits until one of the calls ahead of it finishes")
                    raise AssertionError(
                        f"expected the {calls} calls sent at once to run at once, but the model never had more than "
                        f"{most} of them at a time in {AT_ONCE_WITHIN:g} s of holding every call it got, {waits} "
                        f"({HOW})"
                    )
                time.sleep(PROBE_EVERY)
        finally:
            model.release()
            for c in sent:
                c.wait(hang_after() + 5)
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
    """/health answers while a slow model call runs, and the call still returns its draft"""
    with ModelAPI() as model:
        calls = health_during(part(kata, "app").create_app(model.url), model, calls=1)
    assert_drafted(calls)


HELD_THREADS = 2  # threads the served app's threadpool gets in the held-threads tests (40 by default)
# Slow calls sent at once: a pool of one thread makes the later ones wait. No more than asyncio's
# default executor has threads on a one-core machine (min(32, cores + 4)), which to_thread uses.
AT_ONCE = 4


def test_health_answers_while_four_slow_calls_run(kata):
    """/health answers while 4 slow model calls run at once, and the 4 run side by side"""
    with ModelAPI() as model:
        calls = health_during(part(kata, "app").create_app(model.url), model, calls=AT_ONCE)
    assert_drafted(calls)


def test_health_answers_while_every_thread_is_held(kata):
    """/health answers while every thread of the server's threadpool is held by a slow call"""
    how = (f"the served app's threadpool limited to {HELD_THREADS} threads, {HELD_THREADS} slow calls held by the "
           f"model first, then GET /health, {HOW}")
    with ModelAPI() as model:
        app = part(kata, "app").create_app(model.url)
        with served(app, threads=HELD_THREADS) as server:
            calls = [Call(server.url, f"hang: a draft that holds a thread, number {i + 1}", request_id("busy", i),
                          AT_ONCE_WITHIN + 30) for i in range(HELD_THREADS)]
            try:
                # Every thread held first: the model's own count of the calls it holds says so, not a clock.
                deadline = time.monotonic() + max(hang_after(), AT_ONCE_WITHIN)
                while not model.wait_for_working(HELD_THREADS, 0.02):
                    if loop_held(server) or time.monotonic() > deadline or any(c.done for c in calls):
                        return  # not this test's failure: the tests of the event loop and of calls at once say it
                answered = probe(server.url)
            finally:
                model.release()
                for c in calls:
                    c.wait(hang_after() + 5)
    assert answered, (
        f"expected GET /health to answer while every thread was held by a slow call (a liveness probe waits "
        f"{PROBE_TIMEOUT:g} s), it got no answer within {PROBE_TIMEOUT:g} s: a health check that needs a thread of "
        f"the pool waits behind the slow calls, and the pod is restarted, as in the incident ({how})"
    )


def wait_for_line(log: AccessLines, request_id: str, status: str, within: Deadline | float) -> list[str]:
    """The request's lines once one names `status`, or its lines once `within` (a Deadline, or seconds) has passed."""
    deadline = within if isinstance(within, Deadline) else Deadline(within)
    while not deadline.passed():
        mine = log.of(request_id)
        if any(status in AccessLines.statuses(line) for line in mine):
            return mine
        time.sleep(0.01)
    return log.of(request_id)


HELD_FOR = 0.3  # seconds the loop thread stays in the code under test, look after look, to count as held


def loop_held(server) -> bool:
    """Is the event loop thread inside the code under test at every look, 20 ms apart, for HELD_FOR
    seconds (moved back by the time this process waited for a CPU)? A call the model holds keeps it
    there for good, and nothing waited for from the loop can come; a loop that is only slow on a busy
    machine (handing a call to a thread, say) moves on. Three looks in 40 ms once took the second for
    the first, for a right fix, in a loaded CI stage."""
    deadline = Deadline(HELD_FOR)
    while server.loop_lines():
        if deadline.passed():
            return True
        time.sleep(0.02)
    return False


def shown(lines: list[str]) -> str:
    return "; ".join(repr(line) for line in lines) if lines else "no line"


HELD = 2  # requests the model holds at once in the hung-requests test
LINE_WITHIN = 2.0  # seconds, at most, for a line due at once to show (a deadline: it is looked for until then)


def test_hung_requests_show_in_the_access_log(kata):
    """every request that hangs has an arrival line while it hangs, and a completion line once it ends"""
    rids = [request_id("hung", i) for i in range(HELD)]
    prompts = {rid: f"hang: a draft the model never finishes, number {i + 1}" for i, rid in enumerate(rids)}
    how = f"{HELD} requests sent at once and held by the model, {HOW}"
    with ModelAPI() as model, AccessLines() as log:
        app = part(kata, "app").create_app(model.url)
        with served(app) as server:
            calls = [Call(server.url, prompts[rid], rid, AT_ONCE_WITHIN + 30) for rid in rids]
            try:
                assert model.wait_for_calls(1, max(hang_after(), AT_ONCE_WITHIN)), (
                    f"expected POST /drafts to call the model within {max(hang_after(), AT_ONCE_WITHIN):g} s, it did "
                    f"not (the calls got: {'; '.join(c.said() for c in calls)}) ({how})"
                )
                # A request the model holds has gone through whatever runs before its handler: an arrival
                # line written as it came in is there already, whatever the machine's load.
                assert any(log.of(rid) for rid in rids), (
                    f"expected an arrival line for each of the {HELD} hung requests while they hung, but the access "
                    "log had no line for any of them: a request stuck in its handler looks exactly like one that "
                    f"never arrived (checked once the model held the first call, {how})"
                )
                since = time.monotonic()  # the other one too, unless the loop is held by the first
                while not model.wait_for_working(HELD, 0.02) and time.monotonic() < since + AT_ONCE_WITHIN:
                    if loop_held(server):
                        break
                at_model = model.held()
                missing = [rid for rid in rids if prompts[rid] in at_model and not log.of(rid)]
                assert not missing, (
                    f"expected an arrival line for each request the model held, but {' and '.join(missing)} had none "
                    f"while the model held it: a request stuck in its handler looks exactly like one that never "
                    f"arrived ({how})"
                )
                done = [line for rid in rids for line in log.of(rid) if AccessLines.statuses(line)]
                assert not done, (
                    "expected no completion line while the requests still hung (an arrival line names no status), "
                    f"but the access log had {shown(done)} before the model had answered ({how})"
                )
            finally:
                model.release()
                for c in calls:
                    c.wait(hang_after() + 5)
            for c in calls:
                assert c.response is not None and c.response.status_code == 200, (
                    f"expected the hung request {c.request_id} to answer 200 once the model answered, it got "
                    f"{c.said()} ({how})"
                )
            deadline = Deadline(LINE_WITHIN)  # one wait for all of them, not one each
            ended = {rid: wait_for_line(log, rid, "200", deadline) for rid in rids}
    for rid, mine in ended.items():
        assert any("200" in AccessLines.statuses(line) for line in mine), (
            f"expected a completion line naming status 200 once the hung request {rid} had answered, but the "
            f"access log had {shown(mine)} for it ({how})"
        )


QUEUED_WITHIN = 10.0  # seconds, at most, for the queued request to show: by its line, or by its wait for a thread


def test_a_request_waiting_for_a_free_thread_has_an_arrival_line(kata):
    """a request that arrives while every thread is held by a slow call has an arrival line while it waits for one"""
    held = [request_id("held", i) for i in range(HELD_THREADS)]
    queued = request_id("queued")
    how = (f"the served app's threadpool limited to {HELD_THREADS} threads, {HELD_THREADS} requests held by the "
           f"model first, then {queued} sent, {HOW}")
    with ModelAPI() as model, AccessLines() as log:
        app = part(kata, "app").create_app(model.url)
        with served(app, threads=HELD_THREADS) as server:
            calls = [Call(server.url, f"hang: a draft that holds a thread, number {i + 1}", rid, QUEUED_WITHIN + 30)
                     for i, rid in enumerate(held)]
            try:
                # First every thread is held: the model's own count of the calls it holds says so, not a clock.
                since = time.monotonic()
                while not model.wait_for_working(HELD_THREADS, 0.02):
                    ended = [c for c in calls if c.done]
                    assert not ended, (
                        f"expected POST /drafts to wait for the model while it held the call, but it answered first: "
                        f"{ended[0].said()} ({how})"
                    )
                    stuck = server.loop_lines() if loop_held(server) else []
                    waited = time.monotonic() - since
                    assert not stuck and waited < max(hang_after(), AT_ONCE_WITHIN), (
                        f"expected the {HELD_THREADS} requests sent first to be held by the model at once (one on "
                        f"each thread of the threadpool), but the model held {model.working} of them"
                        + (blocked_at(stuck) if stuck else f" after {waited:.1f} s") + f" ({how})"
                    )
                calls.append(Call(server.url, "hang: the draft of a request that waits for a thread", queued,
                                  QUEUED_WITHIN + 30))
                # Then the request shows either by its line, or by waiting for a thread: a line written as it
                # came in is there before it waits for anything.
                deadline, waiting = Deadline(QUEUED_WITHIN), 0
                while not (mine := log.of(queued)) and not deadline.passed():
                    waiting = server.threads_waiting()
                    if waiting:
                        mine = log.of(queued)
                        break
                    time.sleep(0.005)
                ended = [c for c in calls[:HELD_THREADS] if c.done]
                assert not ended, (
                    f"expected POST /drafts to wait for the model while it held the call, but it answered first: "
                    f"{ended[0].said()} ({how})"
                )
                assert mine, (
                    f"expected an arrival line for {queued} as soon as it arrived, while the model held "
                    f"{HELD_THREADS} slow calls on the threadpool's {HELD_THREADS} threads, but "
                    + ("it was waiting for a free thread and the access log had no line for it: a request queued "
                       "for a thread looks exactly like one that never arrived" if waiting else
                       f"the access log had no line for it {QUEUED_WITHIN:g} s after it was sent")
                    + f" ({how})"
                )
            finally:
                model.release()
                for c in calls:
                    c.wait(hang_after() + 5)
            last = calls[-1]
            assert last.response is not None and last.response.status_code == 200, (
                f"expected {queued} to answer 200 once a thread was free and the model answered, it got "
                f"{last.said()} ({how})"
            )


def test_a_request_whose_body_never_finishes_has_an_arrival_line(kata):
    """a request whose body never finishes arriving has an arrival line while the server waits for the rest"""
    rid = request_id("stalled")
    body = json.dumps({"prompt": "a long message whose upload stalls halfway"}).encode()
    sent = len(body) // 2
    head = (f"POST /drafts HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nX-Request-ID: {rid}\r\n\r\n").encode()
    how = (f"a client on a raw socket sent POST /drafts, its headers with Content-Length: {len(body)} and "
           f"{sent} bytes of the body, then stalled, {HOW}")
    with ModelAPI() as model, AccessLines() as log:
        app = part(kata, "app").create_app(model.url)
        with served(app) as server:
            with socket.create_connection(("127.0.0.1", server.port), timeout=hang_after() + 5) as client:
                client.sendall(head + body[:sent])
                # The request shows either by its line, or by the app waiting for the rest of its body: a
                # line written as it came in is there before anything waits for the body.
                deadline, reading = Deadline(QUEUED_WITHIN), False
                while not (mine := log.of(rid)) and not deadline.passed():
                    reading = server.reading_body(rid)
                    if reading:
                        mine = log.of(rid)
                        break
                    time.sleep(0.005)
            # The client has given up and closed its connection: let the server finish with the request.
            deadline = Deadline(hang_after() + 2)
            while not server.ended(rid) and not deadline.passed():
                time.sleep(0.005)
    assert mine, (
        f"expected an arrival line for {rid} as soon as its headers had arrived, but "
        + ("the app was waiting for the rest of its body and the access log had no line for it: a request whose "
           "upload stalls, then gives up, looks exactly like one that never arrived" if reading else
           f"the access log had no line for it {QUEUED_WITHIN:g} s after it was sent")
        + f" ({how})"
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
            mine = wait_for_line(log, rid, status, LINE_WITHIN)  # at once when the line is written at all
            deadline = Deadline(LINE_WITHIN)  # the server logs the error just after it has answered
            while not errors.naming("ModelError", "503") and not deadline.passed():
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


def test_a_health_check_is_logged_like_every_request(kata):
    """a liveness probe's GET /health gets an arrival line and a completion line with how long it took, like every other request"""
    rid = request_id("probe")
    access_log = part(kata, "access_log")
    clocked = getattr(access_log, "time", None) is time  # a module that reads the clock through `time.`
    with ModelAPI() as model, AccessLines() as log:
        app = part(kata, "app").create_app(model.url)
        if clocked:
            access_log.time = SteppingClock()
        try:
            with served(app) as server:
                with httpx.Client(timeout=hang_after() + 2, verify=NO_TLS) as client:
                    answer = client.get(f"{server.url}/health", headers={"X-Request-ID": rid})
                mine = wait_for_line(log, rid, "200", LINE_WITHIN)  # at once when the line is written at all
        finally:
            if clocked:
                access_log.time = time
    how = f"one GET /health with X-Request-ID: {rid}, as a liveness probe sends it, {HOW}"
    assert answer.status_code == 200, f"expected GET /health to answer 200, got {answer.status_code} ({how})"
    arrived = [line for line in mine if not AccessLines.statuses(line)]
    ended = [line for line in mine if "200" in AccessLines.statuses(line)]
    assert arrived and ended, (
        "expected an arrival line and a completion line naming status 200 for the health check, but the access "
        f"log had {shown(mine)} for it: the probes are the pod's heartbeat in its log, and the last one that "
        f"completed dates the moment its event loop stopped answering ({how})"
    )
    took = f"{SteppingClock.STEP * 1000:.0f} ms"
    assert not clocked or any(took in line for line in ended), (
        f"expected the completion line to say how long the request took, {took}: access_log.time was given a clock "
        f"that moves on {SteppingClock.STEP:g} s between two readings, but the line reads {shown(ended)} ({how})"
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
