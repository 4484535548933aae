"""Hidden tests for kata 10, swallowed-traceback.

Every test gets a fresh copy of the implementation (`kata`) and calls its
`handler(event, context)` as Lambda would: one `asyncio.run` per call, under a
hang guard. The steps are real coroutines. A failing step fails two calls deep,
inside a function of its own (`read_vendor_block`, `parse_line_total`), with a
message no other step shares, so the log can be searched for each failure.

What was logged is read through a real logging handler on the root logger, and
rendered by a standard logging.Formatter, as a terminal or a log shipper would
show it. A record's logger name says which logger made it: the module's own
(`logging.getLogger(__name__)`, named after the module) or another one.
"""
import asyncio
import json
import logging
import time

from loopkata.testing import on_a_virtual_clock, run_bounded

STEP_SECONDS = 0.01  # a tool call of a step that succeeds: the failing steps fail before it returns
FORMAT = logging.Formatter("%(levelname)s %(message)s")


# --- the steps -----------------------------------------------------------------

async def read_vendor_block(receipt: str) -> str:
    await asyncio.sleep(0)
    raise RuntimeError("vendor block unreadable: OCR confidence 0.41 is below 0.60")


async def parse_line_total(receipt: str) -> str:
    await asyncio.sleep(0)
    raise ValueError("line total is not a number: '12,5O'")


async def read_with_the_upload_cancelled(receipt: str) -> str:
    # The vision model's client gave up on the upload: the request the step waits on is cancelled,
    # and the step ends with CancelledError of its own, while the invocation still has time.
    upload = asyncio.ensure_future(asyncio.sleep(10))
    asyncio.get_running_loop().call_later(0.001, upload.cancel)
    return await upload


async def read_with_its_own_task_cancelled(receipt: str) -> str:
    # The step gives up on itself (a client library cancelling the task it runs in, as
    # asyncio.current_task().cancel() does): a CancelledError the invocation did not ask for.
    asyncio.current_task().cancel()
    return await asyncio.sleep(10, "never read")


async def extract_fields(receipt: str, reader) -> str:
    return await reader(receipt)


class Failure:
    """A step that fails: its name, the function it fails in, and the exception it raised (once it ran)."""

    def __init__(self, name: str, inner):
        self.name, self.inner, self.exc = name, inner, None

    @property
    def frame(self) -> str:
        return self.inner.__name__

    @property
    def message(self) -> str:
        return str(self.exc) if self.exc is not None else ""

    @property
    def what(self) -> str:
        return type(self.exc).__name__ if self.exc is not None else "exception"


class Workflow:
    """Layers of receipt steps; `failing` maps a step name to the function it fails in."""

    def __init__(self, sizes: list[int], failing: dict[str, object], slow: int = 0, slow_seconds: float = 0.0,
                 slow_layer: int = 0):
        self.failures = {name: Failure(name, inner) for name, inner in failing.items()}
        self.expected: dict[str, str] = {}
        self.slow = [f"slow-{i + 1}" for i in range(slow)]
        self.slow_state: dict[str, str] = {}  # slow step -> "running", "finished" or "stopped"
        self._slow_tasks: dict[str, tuple] = {}  # slow step -> (its event loop, its task)
        self.layers = []
        number = 0
        for size in sizes:
            layer = {}
            for _ in range(size):
                number += 1
                name = f"receipt-{number:02d}"
                layer[name] = self._step(name)
                if name not in self.failures:
                    self.expected[name] = f"{name}: 3 fields"
            self.layers.append(layer)
        for name in self.slow:
            self.layers[slow_layer][name] = self._sleeper(name, slow_seconds)

    def _step(self, name: str):
        failure = self.failures.get(name)

        async def step():
            if failure is None:
                await asyncio.sleep(STEP_SECONDS)
                return f"{name}: 3 fields"
            try:
                return await extract_fields(name, failure.inner)
            except BaseException as exc:  # CancelledError too: a step that ends cancelled has failed
                failure.exc = exc
                raise

        return step

    def _sleeper(self, name: str, seconds: float):
        async def step():
            self._slow_tasks[name] = (asyncio.get_running_loop(), asyncio.current_task())
            self.slow_state[name] = "running"
            try:
                await asyncio.sleep(seconds)
                self.slow_state[name] = "finished"
                return f"{name}: done"
            finally:
                if self.slow_state[name] == "running":
                    self.slow_state[name] = "stopped"  # cancelled (or interrupted) at its await

        return step

    def still_running(self) -> list[str]:
        """The slow steps that started and have neither finished nor been stopped."""
        return [name for name, state in self.slow_state.items() if state == "running"]

    def stop_leftovers(self, seconds: float = 1.0) -> None:
        """Cancel, in their own event loop, the slow steps an implementation left running, and wait for them
        to end, so that nothing of this test runs on after it."""
        for name in self.still_running():
            loop, task = self._slow_tasks[name]
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:
                pass  # that loop has closed: nothing left to cancel there
        deadline = time.monotonic() + seconds
        while self.still_running() and time.monotonic() < deadline:
            time.sleep(0.01)

    @property
    def event(self) -> dict:
        return {"layers": self.layers}


class Context:
    """What Lambda hands the handler: how much time the invocation has left."""

    def __init__(self, remaining_ms: int):
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


class Records(logging.Handler):
    """Keeps every record logged during an invocation, on the root logger."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)

    def __enter__(self):
        logging.getLogger().addHandler(self)
        return self

    def __exit__(self, *exc):
        logging.getLogger().removeHandler(self)


def invoke(kata, workflow: Workflow, remaining_ms: int = 60_000):
    """One invocation through handler: (answer, the exception it raised or None, the records logged)."""
    answer, error = None, None
    with Records() as log:
        try:
            answer = run_bounded(kata.handler, workflow.event, Context(remaining_ms), what="the invocation")
        except (Exception, asyncio.CancelledError) as exc:  # noqa: BLE001 - each test says what it expected instead
            error = exc
    return answer, error, log.records


# --- reading the log -------------------------------------------------------------

def rendered(record: logging.LogRecord) -> str:
    """The record as a standard formatter writes it: the message, then the traceback it carries."""
    return FORMAT.format(record)


def shown(records, whole: bool = False) -> str:
    """Records for an assertion message, one per line: the first line of each, and what its traceback says
    (`whole`: the traceback itself, up to 14 lines)."""
    if not records:
        return "\n    (nothing at WARNING or above)"
    out = []
    for r in records:
        lines = rendered(r).splitlines() or [""]
        if whole:
            out.append("\n    " + "\n      ".join(lines[:14] + (["..."] if len(lines) > 14 else [])))
        elif len(lines) > 1:
            more = len(lines) - 1
            out.append(f"\n    {lines[0]}\n      (and {more} more line{'s' if more > 1 else ''}, the last: {lines[-1].strip()})")
        else:
            out.append(f"\n    {lines[0]}")
    return "".join(out)


_PLAIN = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}


def mentions(record: logging.LogRecord, text: str) -> bool:
    """Does the record's message say `text`, or one of the fields passed with `extra=`?"""
    extras = [str(v) for k, v in vars(record).items() if k not in _PLAIN]
    return text in record.getMessage() or any(text in e for e in extras)


def chain(exc):
    """The exception and every exception it was raised from or during."""
    seen = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


def carries(record: logging.LogRecord, exc) -> bool:
    """Does the record carry this exception (exc_info), itself or as the cause of what it carries?"""
    return bool(record.exc_info) and record.exc_info[1] is not None and any(e is exc for e in chain(record.exc_info[1]))


def about(record: logging.LogRecord, failure: Failure, workflow: Workflow) -> bool:
    """Is the record about this failure: it carries the exception, quotes its message, or names the step alone?"""
    if failure.exc is not None and carries(record, failure.exc):
        return True
    if failure.message and failure.message in rendered(record):
        return True
    others = [n for n in workflow.failures if n != failure.name]
    return mentions(record, failure.name) and not any(mentions(record, n) for n in others)


def own_loggers(kata) -> set[str]:
    """The names of the module's own loggers: the one named after the module (`logging.getLogger(__name__)`),
    and the logger the module keeps as `log` (or `logger`), unless that is the root logger."""
    names = {kata.__name__}
    for attr in ("log", "logger", "LOG", "LOGGER"):
        found = getattr(kata, attr, None)
        if isinstance(found, logging.Logger) and not isinstance(found, logging.RootLogger):
            names.add(found.name)
    return names


def from_own_logger(record: logging.LogRecord, kata) -> bool:
    """Was the record made by one of the module's own loggers, or by a child of one?"""
    return any(record.name == n or record.name.startswith(n + ".") for n in own_loggers(kata))


def about_slow_steps(records, workflow: Workflow) -> list:
    """Records at WARNING or above that name a step the deadline stopped: the deadline's doing, not a failure."""
    return [r for r in warnings_and_above(records) if any(mentions(r, name) for name in workflow.slow)]


def warnings_and_above(records):
    return [r for r in records if r.levelno >= logging.WARNING]


def what_is_missing(record: logging.LogRecord, failure: Failure) -> str:
    """Why a record that mentions the failure does not carry it."""
    if record.exc_info and record.exc_info[1] is None:
        return ('the record asks for the exception being handled (exc_info), but none was being handled where it '
                'was logged, so it carries none and the formatter printed "NoneType: None"')
    if record.exc_info:
        return f"the record carries another exception, {type(record.exc_info[1]).__name__}"
    if "Traceback (most recent call last)" in record.getMessage():
        return ("the traceback is written into the message as text, and the record itself carries no exception "
                "(exc_info is empty), so a handler that reads exc_info, such as an error tracker, gets none")
    if failure.message and failure.message in record.getMessage():
        return ("the message quotes the error, but the record carries no exception (exc_info is empty): "
                "no traceback, so nothing says where inside the step it was raised")
    return "the record carries neither the error's message nor its traceback"


def names_that_never_raised(names: list[str]) -> str:
    """How an answer's "failed" names steps that did not raise, for an assertion message."""
    listed = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    return (f"names {len(names)} step{'s' if len(names) > 1 else ''} that never raised ({listed}): a step the "
            f"runner cancelled, or whose output it lost, did not fail")


# --- the tests --------------------------------------------------------------------

def receipts() -> Workflow:
    """45 receipts in one layer; two fail two calls deep, each with its own message."""
    return Workflow([45], {"receipt-07": read_vendor_block, "receipt-31": parse_line_total})


def test_a_failed_step_is_logged_with_its_traceback(kata):
    """a failed step is logged at ERROR with its name, its message and its traceback, down to the line that raised"""
    workflow = receipts()
    _, _, records = invoke(kata, workflow)
    logged = warnings_and_above(records)
    for failure in workflow.failures.values():
        assert failure.exc is not None, (
            f"expected step {failure.name} to run and fail, calling handler directly, but it never ran"
        )
        mine = [r for r in logged if about(r, failure, workflow)]
        assert mine, (
            f"expected step {failure.name}'s {failure.what} to be logged at ERROR with its exception attached "
            f"to the record (exc_info), calling handler directly, but no log record mentioned it; "
            f"the log showed:{shown(logged)}"
        )
        carrying = [r for r in mine if carries(r, failure.exc)]
        assert carrying, (
            f"expected step {failure.name}'s {failure.what} to be logged with its exception attached to the "
            f"record (exc_info), calling handler directly: {what_is_missing(mine[0], failure)}; "
            f"the log showed only:{shown(mine)}"
        )
        record = carrying[0]
        assert record.levelno >= logging.ERROR, (
            f"expected step {failure.name}'s failure to be logged at ERROR, calling handler directly, "
            f"but it was logged at {record.levelname}:{shown([record])}"
        )
        assert from_own_logger(record, kata), (
            f"expected step {failure.name}'s failure to be logged on the module's own logger (the starter's "
            f"`log = logging.getLogger(__name__)`; under the tests the module is named {kata.__name__!r}), "
            f"calling handler directly, but the record came from "
            + ("the root logger (a call such as logging.error(...))" if record.name == "root"
               else f"another logger, {record.name!r}")
            + f":{shown([record])}"
        )
        text = rendered(record)
        assert failure.message in text and f"in {failure.frame}" in text and "in extract_fields" in text, (
            f"expected the logged traceback of step {failure.name} to show the error's message, the line "
            f"inside the step that raised it (in {failure.frame}) and the calls that led there (in "
            f"extract_fields), calling handler directly, but the record rendered as:{shown([record], whole=True)}"
        )
        assert failure.name in text or mentions(record, failure.name), (
            f"expected the log record of a failed step to name the step, {failure.name}, calling handler "
            f"directly, but it rendered as:{shown([record])}"
        )


def test_every_failure_is_logged_once(kata):
    """every failed step is logged once: not twice, and none left out"""
    workflow = receipts()
    _, _, records = invoke(kata, workflow)
    logged = warnings_and_above(records)
    for failure in workflow.failures.values():
        mine = [r for r in logged if about(r, failure, workflow)]
        assert mine, (
            f"expected step {failure.name}'s failure to be logged once, calling handler directly, "
            f"but nothing at WARNING or above mentioned it; the log showed:{shown(logged)}"
        )
        assert len(mine) == 1, (
            f"expected step {failure.name}'s failure to be logged once, calling handler directly, but "
            f"{len(mine)} records mention it (they carry its exception, quote its message or name the step):"
            f"{shown(mine)}"
        )


def test_one_failed_step_does_not_lose_the_others(kata):
    """the other steps' outputs are all returned when steps fail, in both layers, and "failed" names only the steps that raised"""
    workflow = Workflow([30, 15], {"receipt-07": read_vendor_block, "receipt-38": parse_line_total})
    answer, error, _ = invoke(kata, workflow)
    if error is not None:
        raise AssertionError(
            f"expected handler to return the outputs of the {len(workflow.expected)} steps that succeeded, "
            f"calling handler directly with 2 failing steps, but it raised {type(error).__name__}: {error}"
        ) from error
    outputs = dict(answer.get("outputs", {})) if isinstance(answer, dict) else {}
    lost = [name for name in workflow.expected if outputs.get(name) != workflow.expected[name]]
    failed = list(answer.get("failed", ())) if isinstance(answer, dict) else []
    never_raised = [name for name in dict.fromkeys(failed) if name not in workflow.failures]
    if lost:
        listed = ", ".join(lost[:6]) + (f" and {len(lost) - 6} more" if len(lost) > 6 else "")
        raise AssertionError(
            f"expected the outputs of all {len(workflow.expected)} steps that succeeded, calling handler "
            f"directly with 2 failing steps, but {len(lost)} are missing ({listed}): the steps still running when "
            f"the first step failed were cancelled, or their outputs dropped"
            + (f"; and \"failed\" {names_that_never_raised(never_raised)}" if never_raised else "")
        )
    assert not never_raised, (
        f"expected the answer's \"failed\" to name only the steps that raised, {sorted(workflow.failures)}, "
        f"calling handler directly with 2 failing steps, but it {names_that_never_raised(never_raised)}"
    )
    assert set(failed) == set(workflow.failures), (
        f"expected the answer's \"failed\" to name {sorted(workflow.failures)}, calling handler directly "
        f"with 2 failing steps, got {sorted(set(failed))}"
    )


def test_a_timeout_is_not_logged_as_a_step_failure(kata):
    """when the invocation runs out of time, handler raises TimeoutError, with its steps stopped and none logged as failed"""
    workflow = Workflow([5], {}, slow=3, slow_seconds=5.0)
    # 0.8 s left: with the starter's 0.5 s safety margin, the deadline falls 0.3 s in, while 3 steps still run.
    answer, error, records = invoke(kata, workflow, remaining_ms=800)
    left_running = workflow.still_running()  # read as soon as handler has raised or returned
    named = " and ".join([", ".join(left_running[:-1]), left_running[-1]] if len(left_running) > 1 else left_running)
    try:
        assert isinstance(error, TimeoutError), (
            "expected the invocation's deadline to end it with TimeoutError, calling handler with 0.8 s left "
            "and 3 steps that take 5 s, but "
            + (f"it raised {type(error).__name__}: {error}" if error is not None else f"handler returned {answer!r}")
        )
        cancellations = [
            r for r in warnings_and_above(records)
            if (r.exc_info and isinstance(r.exc_info[1], asyncio.CancelledError)) or "CancelledError" in r.getMessage()
        ]
        assert not cancellations, (
            "expected no step to be logged as failed when the invocation ran out of time (the cancellation of "
            "the steps still running is the deadline's doing, not theirs), calling handler with 0.8 s left, but "
            f"{len(cancellations)} records logged a CancelledError:{shown(cancellations[:3])}"
        )
        named = about_slow_steps(records, workflow)
        assert not named, (
            "expected no step to be logged as failed when the invocation ran out of time, calling handler with "
            f"0.8 s left and 3 steps that take 5 s, but {len(named)} records name the steps the deadline "
            f"stopped:{shown(named[:3])}"
        )
        assert not left_running, (
            "expected the steps still running at the deadline to be stopped (cancelled) by the time handler "
            "raised TimeoutError, calling handler with 0.8 s left and 3 steps that take 5 s, but "
            f"{named} {'were' if len(left_running) > 1 else 'was'} still running after it raised: "
            "the invocation goes on in the background, and whatever its steps log lands in the next invocation's log"
        )
    finally:
        with Records():  # whatever the leftovers log as they stop goes to this handler, not to stderr
            workflow.stop_leftovers()


def test_a_cancelled_step_is_a_failure(kata):
    """a step that ends cancelled, while the invocation still has time, is a failed step: logged with its CancelledError, named in "failed", not an output"""
    cancelled = {"receipt-05": read_with_the_upload_cancelled, "receipt-09": read_with_its_own_task_cancelled}
    workflow = Workflow([12], cancelled)
    answer, error, records = invoke(kata, workflow)
    how = ("calling handler directly with 12 steps, two of which end with CancelledError while the invocation had "
           "60 s left: receipt-05 because the request it waits on was cancelled 1 ms in, receipt-09 because it "
           "cancelled its own task (asyncio.current_task().cancel())")
    if error is not None:
        raise AssertionError(f"expected handler to return its answer, {how}, but it raised "
                             f"{type(error).__name__}: {error}") from error
    outputs = dict(answer.get("outputs", {})) if isinstance(answer, dict) else {}
    failed = list(answer.get("failed", ())) if isinstance(answer, dict) else []
    for name in cancelled:
        assert name not in outputs, (
            f"expected the cancelled step {name} to be no output, {how}, but \"outputs\" holds it: "
            f"{outputs[name]!r} (an exception is not an output: CancelledError is a BaseException, "
            "not an Exception)"
        )
        assert name in failed, f'expected "failed" to name {name}, {how}, got {failed!r}'
    lost = [name for name in workflow.expected if outputs.get(name) != workflow.expected[name]]
    assert not lost, f"expected the other 10 steps' outputs, {how}, but {', '.join(lost)} are missing"
    for name in cancelled:
        failure = workflow.failures[name]
        mine = [r for r in warnings_and_above(records) if about(r, failure, workflow)]
        assert any(r.levelno >= logging.ERROR and from_own_logger(r, kata) for r in mine), (
            f"expected the cancelled step {name} to be logged at ERROR on the module's own logger, naming it, "
            f"{how}, but the log showed:{shown(warnings_and_above(records))}"
        )
        assert len(mine) == 1, (f"expected the cancelled step {name} to be logged once, {how}, but {len(mine)} "
                                f"records mention it:{shown(mine)}")
        carried = mine[0].exc_info[1] if mine[0].exc_info else None
        assert isinstance(carried, asyncio.CancelledError), (
            f"expected the record of the cancelled step {name} to carry its CancelledError (exc_info), with the "
            f"traceback that shows where the step was when it was cancelled, {how}, but "
            + (f"it carries {type(carried).__name__}" if carried is not None else "it carries no exception")
            + f":{shown(mine)}"
        )
    try:
        json.dumps(answer)
    except (TypeError, ValueError) as exc:
        raise AssertionError(f"expected the answer to be JSON, as Lambda sends it back, {how}, but "
                             f"json.dumps(answer) failed: {exc}") from None


def test_failures_before_the_deadline_are_still_logged(kata):
    """when the deadline ends an invocation, the steps that had already failed are still logged, with their tracebacks"""
    # 0.8 s left: with the starter's 0.5 s safety margin the deadline falls 0.3 s in, while 2 slow steps
    # run; receipt-03 fails at once, about 0.01 s in: in the layer before theirs, or beside them.
    cases = {
        "a first layer of 6 steps where receipt-03 fails at once, and a second layer with 2 steps that take 5 s":
            Workflow([6, 2], {"receipt-03": parse_line_total}, slow=2, slow_seconds=5.0, slow_layer=1),
        "one layer of 6 steps where receipt-03 fails at once, beside 2 steps that take 5 s":
            Workflow([6], {"receipt-03": parse_line_total}, slow=2, slow_seconds=5.0, slow_layer=0),
    }
    for layout, workflow in cases.items():
        how = f"calling handler with 0.8 s left, {layout}"
        answer, error, records = invoke(kata, workflow, remaining_ms=800)
        try:
            # Whether the deadline ends it with TimeoutError is the timeout test's to say; here, what is logged.
            failure = workflow.failures["receipt-03"]
            assert failure.exc is not None, f"expected receipt-03 to run and fail, {how}, but it never ran"
            logged = warnings_and_above(records)
            carrying = [r for r in logged if carries(r, failure.exc)]
            assert carrying, (
                f"expected receipt-03's failure, which happened well before the deadline, to be logged with its "
                f"exception attached (exc_info), {how}: an on-call engineer reads the log of a timed-out invocation "
                f"first; the log showed:{shown(logged)}"
            )
            assert len([r for r in logged if about(r, failure, workflow)]) == 1, (
                f"expected receipt-03's failure to be logged once, {how}, but the log showed:{shown(logged)}"
            )
            cancellations = [r for r in logged if (r.exc_info and isinstance(r.exc_info[1], asyncio.CancelledError))
                             or "CancelledError" in r.getMessage()]
            assert not cancellations, (
                f"expected no step to be logged as failed because of the deadline, {how}, but "
                f"{len(cancellations)} records logged a CancelledError:{shown(cancellations[:3])}"
            )
            named = about_slow_steps(records, workflow)
            assert not named, (
                f"expected no step to be logged as failed because of the deadline, {how}, but {len(named)} "
                f"records name the steps the deadline stopped:{shown(named[:3])}"
            )
        finally:
            with Records():
                workflow.stop_leftovers()


def test_a_warm_invocation_after_a_timed_out_one_logs_like_the_first(kata):
    """in a warm container, an invocation after one that ran out of time logs and answers its failures like any other"""
    timed_out = Workflow([4], {}, slow=2, slow_seconds=5.0)
    _, first_error, _ = invoke(kata, timed_out, remaining_ms=800)
    with Records():
        timed_out.stop_leftovers()
    workflow = Workflow([8], {"receipt-02": parse_line_total, "receipt-06": read_with_the_upload_cancelled})
    answer, error, records = invoke(kata, workflow)
    how = ("calling handler twice in the same module, as a warm Lambda container does: first with 0.8 s left and 2 "
           "steps that take 5 s" + ("" if isinstance(first_error, TimeoutError) else " (it did not raise TimeoutError)")
           + ", then with 60 s left and 8 steps, where receipt-02 fails and receipt-06 ends with CancelledError "
           "because the request it waits on was cancelled")
    if error is not None:
        raise AssertionError(f"expected the second invocation to return its answer, {how}, but it raised "
                             f"{type(error).__name__}: {error}") from error
    failed = sorted(answer.get("failed", ())) if isinstance(answer, dict) else []
    assert failed == ["receipt-02", "receipt-06"], f'expected "failed" to name receipt-02 and receipt-06, {how}, got {failed!r}'
    logged = warnings_and_above(records)
    for failure in workflow.failures.values():
        mine = [r for r in logged if about(r, failure, workflow) and from_own_logger(r, kata)]
        assert len(mine) == 1 and mine[0].levelno >= logging.ERROR, (
            f"expected {failure.name}'s failure to be logged once at ERROR on the module's own logger, {how}, "
            f"but the log showed:{shown(logged)}"
        )



def test_the_deadline_keeps_the_safety_margin(kata):
    """the invocation stops its safety margin (0.5 s) before Lambda's own deadline, so that handler answers in time"""
    workflow = Workflow([1], {}, slow=1, slow_seconds=0.35)
    # 0.8 s left and the starter's 0.5 s margin: the deadline falls at 0.3 s, before the 0.35 s step ends. Both
    # are timers on one event loop, the deadline's set first, so it fires first however busy the machine is.
    answer, error, records = invoke(kata, workflow, remaining_ms=800)
    try:
        assert isinstance(error, TimeoutError), (
            "expected handler, called with 0.8 s left, to raise TimeoutError 0.3 s in, keeping the starter's 0.5 s "
            "safety margin, before a step that takes 0.35 s ends, but "
            + (f"it raised {type(error).__name__}: {error}" if error is not None else f"it returned {answer!r}")
            + ": an invocation that uses its last half second is stopped by Lambda before it can answer"
        )
    finally:
        with Records():
            workflow.stop_leftovers()


# --- the deadline's arithmetic, at Lambda's longest timeout, on a virtual clock -----------

LONGEST_MS = 900_000  # Lambda's longest timeout, 15 minutes, as get_remaining_time_in_millis() gives it
OFF_BY = 0.1  # seconds either side of the deadline at which a slow step ends


def test_the_deadline_is_the_time_left_less_the_margin_at_the_longest_timeout(kata):
    """with 15 minutes left, a step ending 0.1 s before the deadline (time left less 0.5 s) is waited for, one ending 0.1 s after it is not"""
    deadline = LONGEST_MS / 1000 - 0.5
    outcomes = {}
    for label, seconds in (("before", deadline - OFF_BY), ("after", deadline + OFF_BY)):
        workflow = Workflow([1], {}, slow=1, slow_seconds=seconds)
        with on_a_virtual_clock():
            answer, error, _ = invoke(kata, workflow, remaining_ms=LONGEST_MS)
        workflow.stop_leftovers()
        outcomes[label] = (answer, error, seconds)
    how = (f"handler called with {LONGEST_MS} ms left, the starter's 0.5 s safety margin, so a deadline "
           f"{deadline:g} s in, on an event loop whose clock jumps to its next timer (the order of timers is exact)")
    answer, error, seconds = outcomes["before"]
    assert error is None and (answer or {}).get("outputs", {}).get("slow-1") == "slow-1: done", (
        f"expected the invocation to wait for a step that ends {seconds:g} s in, {OFF_BY:g} s before the deadline, "
        f"and answer with its output, but it "
        + (f"raised {type(error).__name__}: {error}" if error is not None else f"returned {answer!r}")
        + f" ({how}): the deadline came early, and the time left was read in the wrong unit"
    )
    answer, error, seconds = outcomes["after"]
    assert isinstance(error, TimeoutError), (
        f"expected the invocation to raise TimeoutError at the deadline, {OFF_BY:g} s before a step that ends "
        f"{seconds:g} s in, but it "
        + (f"raised {type(error).__name__}: {error}" if error is not None else f"returned {answer!r}")
        + f" ({how}): past the deadline, Lambda stops the invocation before it can answer"
    )
