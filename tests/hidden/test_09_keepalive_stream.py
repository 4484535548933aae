"""Hidden tests for kata 09, keepalive-stream.

Every test gets a fresh copy of the package (`kata`), serves
`app.create_app(events, keepalive_seconds)` with a real uvicorn server on
127.0.0.1 (an ephemeral port, in a thread of its own, stopped by the test), and
reads `GET /drafts/{id}/events` with httpx as a browser would: every chunk of
bytes timestamped on arrival. The events come from a scripted draft
(`keepalive_stream_harness.Script`): step n sleeps for a set time (0 for a
quick step, which still yields to the event loop once), then yields section
n; every start, finish and cancellation of a step, and the generator's
`finally`, is recorded on the same clock.

Times are scaled down from production (a 25 s keepalive, steps of minutes): the
keepalive interval here is 0.04 s and a quiet step lasts 0.1 to 1 s.

The margins for a busy machine were measured with the reference fix on 2 cores,
beside 3 to 5 processes that spin (or another kata's check): in a quiet step of
0.8 s its longest silence was at most 0.18 s, and it sent at least 14 of the 20
keepalives due. A keepalive that backs off (its gap doubling while a step stays
quiet) leaves a silence of 0.32 s in that step, and sends 4.

Pacing is bounded from above by the clock alone, never by a window: a wrapper
that waits `interval` before each keepalive cannot have sent more than one per
interval of the time since the request (plus a few), and a busy machine only
delays keepalives. A wrapper that loops without waiting exceeds that bound
tenfold within a few milliseconds of its first keepalive, whatever the load.

The server's log is every record at ERROR or above, from any logger, until the
test stops the server: a step's exception must be in it (with its traceback),
and a client that goes away must leave nothing in it.
"""
import importlib
import itertools
import math
import time
import traceback

from keepalive_stream_harness import ENDINGS, Script, Served, read_stream

from loopkata.testing import describe_frames, run_bounded

INTERVAL = 0.04  # the keepalive interval the tests serve the app with
QUIET = 2.5 * INTERVAL  # a step at least this long must see a keepalive go out meanwhile
SLOW = 0.8  # the long quiet step: 20 intervals, so that gaps that grow while it runs show
MARGIN = SLOW / 4  # how much later than the interval a keepalive may come on a busy machine (see above)
FEWEST = 0.5  # the share of a quiet step's keepalives that must arrive on a busy machine (see above)
GRACE = 0.3  # how soon after a client leaves the generator must be closed and nothing left running
PACED = 0.4  # the quiet step whose keepalives are counted against the time they had
SLACK = 3  # keepalives allowed beyond one per interval of the time since the request
QUICK = 12  # sections that come at once before the quiet step: a keepalive before each is a flood too
HOW = "reading the stream through a real uvicorn server"


def app_of(kata):
    return importlib.import_module(f"{kata.__name__}.app")


def stream(kata, script: Script, leave=None):
    """Serve the kata's app over `script` and read one whole stream; (reading, server) after the server stopped."""
    app = app_of(kata).create_app(script.events, INTERVAL)
    deadline = sum(script.seconds) + 1.0
    with Served(app) as server:
        reading = run_bounded(read_stream, f"{server.url}/drafts/d-42/events", deadline=deadline, leave=leave,
                              silence=1.0, what="reading the event stream", seconds=deadline + 3)
    return reading, server


def settle(server, seconds: float = 2.0) -> None:
    """Wait (at most `seconds`) until the server's loop has nothing left pending: the response is done, and
    whatever it logs on the way out is logged. A loop that does not answer, or stays busy, is left as it is."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        if server.pending_tasks(timeout=max(until - time.monotonic(), 0.01)) == []:
            return
        time.sleep(0.01)


def chain(exc: BaseException | None) -> list[BaseException]:
    """`exc`, its causes and contexts, and the exceptions inside exception groups, each once."""
    seen, todo = [], [exc]
    while todo:
        e = todo.pop()
        if e is None or any(e is s for s in seen):
            continue
        seen.append(e)
        todo += [e.__cause__, e.__context__, *getattr(e, "exceptions", ())]
    return seen


def logged(record) -> str:
    """A log record in words: 'RuntimeError: ... (logged by uvicorn.error: "Exception in ASGI application"),
    raised at katas/...py:34 in with_keepalive: await events.aclose()'."""
    exc = record.exc_info[1] if record.exc_info else None
    if exc is None:
        return f"{record.getMessage()!r} (logged by {record.name or 'root'})"
    frames = [(f.filename, f.lineno, f.name) for f in traceback.extract_tb(exc.__traceback__)]
    mine = describe_frames(frames, fallback=False)
    return (f"{type(exc).__name__}: {exc} (logged by {record.name or 'root'}: {record.getMessage().strip()!r})"
            + (f", raised at {mine[-1]}" if mine else ""))


def sections(names: list[str]) -> str:
    numbers = [n.removeprefix("section ") for n in names]
    if len(numbers) == 1:
        return f"section {numbers[0]}"
    return f"sections {', '.join(numbers[:-1])} and {numbers[-1]}"


TIMES = {1: "once", 2: "twice"}


def moments(reading, times: list[float], few: int = 3) -> str:
    """When something happened, on the reading's clock: 'at 0.26 s', 'twice, at 0.26 s and 0.30 s',
    '26 times, from 0.26 s to 1.23 s'. Times that round alike are counted, not repeated."""
    shown = [f"{reading.at(t):.2f} s" for t in times]
    if len(shown) == 1:
        return f"at {shown[0]}"
    count = TIMES.get(len(shown), f"{len(shown)} times")
    if len(shown) > few:
        return f"{count}, from {shown[0]} to {shown[-1]}"
    if len(set(shown)) == 1:
        return f"{count}, {'both' if len(shown) == 2 else 'all'} at {shown[0]}"
    distinct = [s + (f" ({TIMES.get(shown.count(s), f'{shown.count(s)} times')})" if shown.count(s) > 1 else "")
                for s in dict.fromkeys(shown)]
    return f"{count}, at " + (" and ".join(distinct) if len(distinct) <= 2
                              else ", ".join(distinct[:-1]) + " and " + distinct[-1])


def what_the_generator_saw(script: Script, reading, server) -> str:
    """Cancellations of the scripted generator's steps and its closings, on the reading's clock, as a
    sentence or '' (before the test stopped the server: not the server's own teardown)."""
    parts, end = [], server.stopping_at
    for n in range(len(script.seconds)):
        cancelled = [t for t in script.when("cancelled", n) if t <= end]
        if cancelled:
            parts.append(f"step {n} of the generator was cancelled {moments(reading, cancelled)}")
    closed = [t for t in script.when("closed") if t <= end]
    if closed and reading.ended != "complete":
        opened = len([t for t in script.when("opened") if t <= end])
        parts.append("the generator was " + (f"opened {TIMES.get(opened, f'{opened} times')} and " if opened > 1
                                             else "") + f"closed {moments(reading, closed)}")
    text = "; ".join(parts)
    return (text[0].upper() + text[1:] + ".") if text else ""


def assert_every_section(reading, script: Script, server) -> None:
    want, got = script.expected(), reading.items()
    if got == want and reading.ended == "complete":
        return
    if not got:
        received = "got no section"
    elif got == want:
        received = "got every section, but " + {
            "deadline": "the stream was still open when the client stopped reading",
            "broken": "the server broke the response off instead of ending it",
            "silent": "then nothing, not even the end of the stream",
        }.get(reading.ended, f"the stream did not end after the last ({reading.ended})")
    else:
        received = f"got {sections(got)}"
    extra = " ".join(s for s in (
        what_the_generator_saw(script, reading, server),
        f"The server logged {server.error_text()}." if server.error_text() else "",
    ) if s)
    raise AssertionError(
        f"expected {sections(want)} in order, then the end of the stream ({HOW}), "
        f"but {received}: {reading.story()}." + (f" {extra}" if extra else "")
    )


def assert_each_step_started_once(reading, script: Script) -> None:
    twice = {n: c for n, c in script.starts().items() if c > 1}
    if not twice:
        return
    n = next(iter(twice))
    others = f" (and so did step{'s' if len(twice) > 2 else ''} {', '.join(str(m) for m in list(twice)[1:])})" \
        if len(twice) > 1 else ""
    raise AssertionError(
        f"expected each step of the generator to start once ({HOW}), but step {n} started "
        f"{moments(reading, script.when('started', n))}{others}: every restart repeats the model call. "
        f"The client received: {reading.story()}."
    )


def test_every_section_arrives_in_order_with_keepalives_meanwhile(kata):
    """every section arrives, in order, with a keepalive while each slow step runs"""
    script = Script([QUIET, 0.0, QUIET])
    reading, server = stream(kata, script)
    assert_every_section(reading, script, server)
    assert_each_step_started_once(reading, script)
    item_times = [t for t, _ in reading.item_frames()]
    for n, seconds in enumerate(script.seconds):
        if seconds < QUIET:
            continue
        since = item_times[n - 1] if n else 0.0
        between = [t for t in reading.keepalives() if since <= t <= item_times[n]]
        assert between, (
            f"expected a keepalive while step {n} ran ({seconds:.2f} s with nothing to send, keepalive interval "
            f"{INTERVAL:g} s; {HOW}), but none arrived between "
            f"{'section ' + str(n - 1) if n else 'the start'} at {since:.2f} s and section {n} at "
            f"{item_times[n]:.2f} s: {reading.story()}."
        )


def gaps(marks: list[float]) -> str:
    """The gaps between consecutive times, in words: '0.04, 0.08, 0.16 and 0.32 s' (a few), 'up to 0.06 s (21 gaps)'."""
    seconds = [b - a for a, b in itertools.pairwise(marks)]
    if len(seconds) > 8:
        return f"up to {max(seconds):.2f} s ({len(seconds)} gaps)"
    between = [f"{g:.2f}" for g in seconds]
    return (", ".join(between[:-1]) + " and " + between[-1] if len(between) > 1 else between[0]) + " s"


def test_a_slow_step_runs_once_and_the_stream_never_goes_silent(kata):
    """a slow step runs once, and the stream never goes silent for much longer than the keepalive interval"""
    script = Script([0.0, SLOW])
    reading, server = stream(kata, script)
    assert_each_step_started_once(reading, script)
    assert_every_section(reading, script, server)
    limit = INTERVAL + MARGIN
    longest = max(reading.silences(), key=lambda s: s[1] - s[0], default=(0.0, 0.0))
    assert longest[1] - longest[0] <= limit, (
        f"expected no silence longer than {limit:g} s while step 1 ran for {SLOW:g} s (the keepalive interval, "
        f"{INTERVAL:g} s, plus {MARGIN:g} s for a busy machine; {HOW}), but the stream sent nothing from "
        f"{longest[0]:.2f} s to {longest[1]:.2f} s ({longest[1] - longest[0]:.2f} s): {reading.story()}."
    )
    (since, _), (until, _) = reading.item_frames()
    sent = [t for t in reading.keepalives() if since <= t <= until]
    due = round(SLOW / INTERVAL)
    fewest = math.ceil(FEWEST * due)
    assert len(sent) >= fewest, (
        f"expected a keepalive every {INTERVAL:g} s for as long as step 1 ran ({SLOW:g} s with nothing to send: "
        f"{due} keepalives, at least {fewest} on a busy machine; {HOW}), but {len(sent)} arrived between "
        f"section 0 at {since:.2f} s and section 1 at {until:.2f} s, with gaps of {gaps([since, *sent, until])}: "
        f"{reading.story()}."
    )


def test_a_client_that_leaves_mid_stream_stops_the_generator(kata):
    """when a client leaves mid-stream, the generator is closed at once and nothing it started keeps running"""
    script = Script([0.0, 1.0, 0.0])

    def leave(reading):  # go away at the first keepalive after section 0, while step 1 runs
        return bool(reading.items()) and reading.frames[-1][1].startswith(":")

    app = app_of(kata).create_app(script.events, INTERVAL)
    with Served(app) as server:
        # with no keepalive to leave at, the client stops waiting after 0.3 s of silence, and leaves then
        reading = run_bounded(read_stream, f"{server.url}/drafts/d-42/events", deadline=1.0, leave=leave,
                              silence=0.3, what="reading the event stream", seconds=4)
        left = time.monotonic()
        while time.monotonic() - left < GRACE and (not script.closed() or script.running()):
            time.sleep(0.005)
        closed, running = script.closed(), script.running()
        pending = server.pending_tasks()
        while closed and not running and pending and time.monotonic() - left < 2 * GRACE:
            time.sleep(0.01)  # the server's own tasks for the response may take a moment to finish
            pending = server.pending_tasks()
    if reading.ended in ("left", "silent", "deadline"):
        gone = f"the client left at {reading.ended_at:.2f} s"
    else:
        gone = f"the stream ended at {reading.ended_at:.2f} s ({ENDINGS[reading.ended]})"
    tasks = f"; pending on the server's loop: {'; '.join(pending)}" if pending else ""
    if running or not closed:
        steps = ", ".join(f"step {n} (started at {reading.at(script.when('started', n)[-1]):.2f} s)" for n in running)
        state = (f"{steps} {'was' if len(running) == 1 else 'were'} still running" if running else "")
        if not closed:
            state = "the generator was still open (its finally had not run)" + (f" and {state}" if state else "")
        raise AssertionError(
            f"expected the generator to be closed and its step in progress stopped within {GRACE:g} s after the "
            f"client left mid-stream ({HOW}), but {GRACE:g} s after {gone}, {state}{tasks}. "
            f"The client received: {reading.story()}."
        )
    assert pending is not None, (
        f"expected the server's event loop to answer after the client left ({HOW}), but it did not answer "
        f"within 1 s: something blocks it. The client received: {reading.story()}."
    )
    assert not pending, (
        f"expected no task left pending on the server's loop after the client left mid-stream ({HOW}), "
        f"but {2 * GRACE:g} s after {gone}, {len(pending)} still were: {'; '.join(pending)}."
    )


def test_keepalives_are_paced_not_sent_in_a_loop(kata):
    """keepalives are paced: one per interval while a step runs, never a flood, and none between quick sections"""
    script = Script([0.0] * QUICK + [PACED])  # sections that come at once, then a quiet step
    worst = {"excess": 0}  # the moment when the most keepalives beyond what the time allowed had arrived

    def allowed(seconds: float) -> int:
        return math.floor(seconds / INTERVAL) + SLACK

    def leave(reading):  # checked at every frame; a flood is plain at ten times the allowance: stop reading there
        now, count = time.monotonic() - reading.started, len(reading.keepalives())
        if count - allowed(now) > worst["excess"]:
            worst.update(excess=count - allowed(now), at=now, count=count)
        return count > 10 * allowed(now)

    reading, _ = stream(kata, script, leave=leave)
    assert worst["excess"] <= 0, (
        f"expected at most one keepalive per interval ({INTERVAL:g} s) of the time since the request, plus "
        f"{SLACK}, over {QUICK} sections that came at once and a step of {PACED:g} s after them ({HOW}), but "
        f"{worst['count']} keepalives had arrived "
        f"{worst['at']:.3f} s after the request, where the time allowed {allowed(worst['at'])}"
        + (" (the client stopped reading there)" if reading.ended == "left" else "")
        + f": {reading.story(6)}."
    )


def test_a_step_that_raises_is_logged_and_cuts_the_stream(kata):
    """a step that raises is logged with its traceback, and the stream is cut, not ended as if complete"""
    script = Script([0.0, QUIET], fails=1)
    reading, server = stream(kata, script)
    raised = script.raised[0] if script.raised else None
    error = f"{type(raised or script.failure(1)).__name__}: {raised or script.failure(1)}"
    records = server.error_records()
    ours = [r for r in records if raised is not None and r.exc_info and any(e is raised for e in chain(r.exc_info[1]))]
    others = "; ".join(dict.fromkeys(logged(r) for r in records)) or "nothing"
    saw = what_the_generator_saw(script, reading, server)
    fails = f"step 1 {'raised' if raised else 'was to raise'} {error} after {QUIET:g} s ({HOW})"
    assert reading.ended == "broken", (
        f"expected the response to be cut when {fails}: a stream that ends normally tells the client the draft "
        f"is complete; but "
        + {"complete": "the stream ended as if the draft were complete",
           "silent": "the stream went silent, neither ended nor cut",
           "deadline": "the stream was still open when the client stopped reading"}.get(
            reading.ended, f"it ended with {ENDINGS.get(reading.ended, reading.ended)}")
        + f": {reading.story()}." + (f" {saw}" if saw else "") + f" The server logged {others}."
    )
    assert ours, (
        f"expected the server's log to show the exception when {fails}, with its traceback, but no error record "
        f"carried it. The server logged {others}."
    )


def test_a_client_that_leaves_mid_step_leaves_no_error_in_the_log(kata):
    """a client that leaves in the middle of a step leaves no error in the server's log"""
    script = Script([0.0, 1.0, 0.0])

    def leave(reading):  # go away at the first keepalive after section 0, while step 1 runs
        return bool(reading.items()) and reading.frames[-1][1].startswith(":")

    app = app_of(kata).create_app(script.events, INTERVAL)
    with Served(app) as server:
        reading = run_bounded(read_stream, f"{server.url}/drafts/d-42/events", deadline=1.0, leave=leave,
                              silence=0.3, what="reading the event stream", seconds=4)
        settle(server)
    records = server.error_records()
    if reading.ended in ("left", "silent", "deadline"):
        gone = f"the client left at {reading.ended_at:.2f} s"
    else:
        gone = f"the stream ended at {reading.ended_at:.2f} s ({ENDINGS[reading.ended]})"
    assert not records, (
        f"expected no error in the server's log when a client leaves in the middle of step 1 ({HOW}); "
        f"{gone}, and the server logged {len(records)} error{'s' if len(records) > 1 else ''}: "
        f"{'; '.join(dict.fromkeys(logged(r) for r in records))}. The client received: {reading.story()}."
    )
