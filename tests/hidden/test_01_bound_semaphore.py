"""Hidden tests for kata 01, bound-semaphore.

Every test gets a fresh copy of the implementation (`kata`), then plays warm
invocations: each `kata.handler(...)` call is one `asyncio.run`, in one
process, as in a warm Lambda container. Each invocation runs under a hang
guard, so a deadlock is reported in about a second with the stuck lines.

Every step counts its own executions: a step must run exactly once per
invocation, so a fix that retries after "bound to a different event loop"
(and runs the steps that already ran a second time) is caught.

Three tests also run `kata.run_workflow(...)` on event loops that `handler`
did not start: several loops one after another on one thread, as a test
runner makes them, the loop of a worker thread, and the loops of two worker
threads at the same time. The limiter must serve whatever loop is running,
not only a loop that `handler` has prepared the module for.

Every failure message starts with how the test drove the code ("handler call
2 of 3 in one process", "calling run_workflow directly with asyncio.run ...");
the learner's own exception is shown whole, with its type, inside it.
"""
import asyncio
import logging
import threading
import weakref
from collections import Counter

from loopkata.testing import Hang, hang_after, loops_alive, run_bounded

LIMIT = 3
RECEIPT = ["ocr", "vision"]  # the incident's layer: fewer steps than slots
PAGES = ["page1", "page2", "page3", "page4", "page5"]  # more steps than slots: two have to wait
STEP_SECONDS = 0.002  # a tool call: long enough for the steps of a layer to overlap


class Tool:
    """Real steps: each awaits; the tool counts how many run at once and how often each one ran."""

    def __init__(self):
        self.running = 0
        self.most_at_once = 0
        self.loops = []
        self.runs = Counter()  # step name -> executions in the current invocation

    def step(self, name):
        async def call():
            self.runs[name] += 1
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
            self.loops.append(weakref.ref(asyncio.get_running_loop()))
            try:
                await asyncio.sleep(STEP_SECONDS)
            finally:
                self.running -= 1
            return f"{name}: done"

        return call

    def workflow(self, layers):
        """A new invocation's steps, layer by layer; the execution counts start again at zero."""
        self.runs.clear()
        return [[self.step(n) for n in layer] for layer in layers]


def check_outcome(tool, results, layers, what) -> None:
    """Every step ran exactly once and returned its output, in order."""
    names = [n for layer in layers for n in layer]
    wrong = [f"{n} ran {tool.runs[n]} time{'' if tool.runs[n] == 1 else 's'}" for n in names if tool.runs[n] != 1]
    assert not wrong, (
        f"{what}: expected each step to run exactly once, but {', '.join(wrong)}: "
        "a step that runs twice calls its tool twice, and pays for it twice"
    )
    expected = [f"{n}: done" for n in names]
    assert results == expected, f"{what}: expected every step's output {expected}, got {results}"


def handler_call(i, n, how=""):
    """How a test drives the code: call i of n of kata.handler, all in one process (a warm container)."""
    return f"handler call {i} of {n} in one process{how}"


# The forced-id test says what it did, and where the idea comes from.
FORCED_ID = (", with id() forced to return 4242 for every object in the kata (as when a new loop "
             "gets a dead loop's id: notebook 02)")


def step_failed(what, exc, where="") -> AssertionError:
    """The learner's own error, whole, after how the test drove the code."""
    return AssertionError(f"{what}: {where}expected every step's output, but a step failed with "
                          f"{type(exc).__name__}: {exc}")


def invoke_workflow(kata, tool, layers, what):
    """One invocation through handler; a failed step's own error is shown whole, after `what`."""
    event = {"tool": "vision", "layers": tool.workflow(layers)}
    try:
        out = run_bounded(kata.handler, event, what=what)
    except Hang:
        raise
    except Exception as exc:
        raise step_failed(what, exc) from exc
    results = list(out["results"])
    failed = next((r for r in results if isinstance(r, BaseException)), None)
    if failed is not None:
        raise step_failed(what, failed) from failed
    check_outcome(tool, results, layers, what)


def invoke(kata, tool, names, what):
    """One invocation of a single layer through handler."""
    invoke_workflow(kata, tool, [names], what)


def run_workflow_here(kata, tool, layers, what) -> None:
    """asyncio.run(kata.run_workflow(...)) on the calling thread: a loop that handler did not start."""
    run_workflow = getattr(kata, "run_workflow", None)
    assert callable(run_workflow), (
        "calling kata.run_workflow directly: expected the kata to keep its coroutine function "
        "run_workflow(layers, tool): this test runs it on event loops that handler did not start"
    )
    try:
        results = list(asyncio.run(run_workflow(tool.workflow(layers), "vision")))
        failed = next((r for r in results if isinstance(r, BaseException)), None)
        if failed is not None:
            raise failed
    except Exception as exc:
        raise step_failed(what, exc, "on an event loop that handler did not start, ") from exc
    check_outcome(tool, results, layers, what)


def test_cold_invocation_runs_every_step(kata):
    """a cold invocation runs both steps of the receipt workflow"""
    invoke(kata, Tool(), ["ocr", "vision"], handler_call(1, 1))


def test_second_warm_invocation_succeeds(kata):
    """a second and third warm invocation succeed, like the first"""
    tool = Tool()
    for i in (1, 2, 3):
        invoke(kata, tool, ["ocr", "vision"], handler_call(i, 3))


def test_warm_invocations_with_more_steps_than_slots(kata):
    """warm invocations with more steps than slots all succeed"""
    tool = Tool()
    for i in (1, 2, 3):
        invoke(kata, tool, ["s1", "s2", "s3", "s4", "s5"], handler_call(i, 3, " with a layer of 5 steps"))


def test_layer_of_three_on_limit_of_three(kata):
    """a layer of 3 steps on a limit of 3 finishes (no deadlock)"""
    invoke(kata, Tool(), ["ocr", "vision", "layout"], handler_call(1, 1, " with a layer of 3 steps"))


def test_layer_of_five_on_limit_of_three(kata):
    """a layer of 5 steps on a limit of 3 finishes (no deadlock)"""
    invoke(kata, Tool(), ["a", "b", "c", "d", "e"], handler_call(1, 1, " with a layer of 5 steps"))


def test_limit_still_holds(kata):
    """the limiter still lets 3 calls of one tool run at once, never more"""
    tool = Tool()
    for i in (1, 2):
        invoke(kata, tool, [f"page{n}" for n in range(8)], handler_call(i, 2, " with a layer of 8 steps"))
    assert tool.most_at_once == LIMIT, (
        f"over 2 handler calls in one process, a layer of 8 steps each: expected at most {LIMIT} steps "
        f"of one tool running at once (and {LIMIT} allowed), but saw {tool.most_at_once} at once"
    )


def test_new_loop_recognised_when_it_reuses_a_dead_loops_id(kata):
    """a new loop is recognised even when it gets a dead loop's id()"""
    # CPython may hand a freed loop's id to the next loop; force that here, as
    # the incident's own regression test did, so an id()-based cache is caught.
    kata.id = lambda obj: 4242
    tool = Tool()
    for i in (1, 2, 3):
        invoke(kata, tool, ["s1", "s2", "s3", "s4", "s5"], handler_call(i, 3, FORCED_ID))


def test_limiter_keeps_no_finished_loop_alive(kata):
    """after 10 warm invocations, the limiter keeps at most one finished loop alive"""
    tool = Tool()
    for i in range(1, 11):
        invoke(kata, tool, ["s1", "s2", "s3", "s4", "s5"], handler_call(i, 10))
    alive = loops_alive(tool.loops)
    assert alive <= 1, (
        f"after 10 handler calls in one process (each its own asyncio.run, so its own event loop) and "
        f"gc.collect(): expected at most 1 of their event loops alive, found {alive}: something the module "
        "keeps holds them (a semaphore that a step waited on refers to its loop; notebook 03 shows this leak)"
    )


def test_each_step_runs_exactly_once_per_invocation(kata):
    """each step runs exactly once per invocation, also when warm steps wait for a slot"""
    tool = Tool()
    invoke_workflow(kata, tool, [RECEIPT], handler_call(1, 3))
    for i in (2, 3):
        invoke_workflow(kata, tool, [RECEIPT, PAGES, ["merge"]], handler_call(i, 3, " with three layers"))


def test_workflow_runs_on_new_loops_that_handler_did_not_start(kata):
    """the workflow runs on new event loops one after another, also when handler did not start them"""
    # A test runner makes a new loop per test, on one thread; nothing calls handler.
    tool = Tool()
    plan = [[RECEIPT], [RECEIPT, PAGES], [RECEIPT, PAGES]]

    def loops_in_a_row():
        for n, layers in enumerate(plan, 1):
            what = f"calling asyncio.run(run_workflow(...)) directly, run {n} of {len(plan)} in a row on one thread"
            run_workflow_here(kata, tool, layers, what)

    run_bounded(loops_in_a_row,
                what=f"calling asyncio.run(run_workflow(...)) directly, {len(plan)} runs in a row on one thread")


def test_a_worker_threads_loop_runs_the_workflow_between_invocations(kata):
    """a worker thread's own event loop runs the workflow too, between warm invocations"""
    tool = Tool()
    invoke_workflow(kata, tool, [RECEIPT], handler_call(1, 3))
    for n in (1, 2):
        what = f"calling asyncio.run(run_workflow(...)) directly on worker thread {n} of 2, after handler call {n}"
        run_bounded(run_workflow_here, kata, tool, [RECEIPT, PAGES], what, what=what)
        invoke_workflow(kata, tool, [RECEIPT, PAGES], handler_call(n + 1, 3, f", after worker thread {n}"))


def at_the_same_time(first, second):
    """Run two scenarios (fn, args, what) at once, each on its own thread under the hang guard;
    raise the first one's failure, or else the second's. Both have ended when this returns."""
    box = {}

    def run_second():
        fn, args, what = second
        try:
            run_bounded(fn, *args, what=what)
        except BaseException as exc:  # noqa: BLE001 - handed back below
            box["error"] = exc

    other = threading.Thread(target=run_second, name="second scenario", daemon=True)
    other.start()
    try:
        fn, args, what = first
        run_bounded(fn, *args, what=what)
    finally:
        other.join(hang_after() + 2)
    if "error" in box:
        raise box["error"]


def test_two_threads_loops_run_the_workflow_at_the_same_time(kata):
    """two worker threads, each with its own event loop, run the workflow at the same time"""
    started = [threading.Event(), threading.Event()]
    plan = [RECEIPT, PAGES, ["merge"]]

    class MeetingTool(Tool):
        """The first layer's steps wait (awaiting, 0.2 s at most) until the other thread's steps
        have started too, so that both loops use the limiter at once."""

        def __init__(self, me):
            super().__init__()
            self.me = me

        def step(self, name):
            call = super().step(name)

            async def meet_then_call():
                started[self.me].set()
                for _ in range(200):
                    if started[1 - self.me].is_set():
                        break
                    await asyncio.sleep(0.001)
                return await call()

            return meet_then_call if name in RECEIPT else call

    how = "calling asyncio.run(run_workflow(...)) directly on two worker threads at the same time"

    def worker(n):
        tool = MeetingTool(n - 1)
        for run in (1, 2):
            run_workflow_here(kata, tool, plan, f"{how}, thread {n}, run {run} of 2")

    # Each thread alone first, one after the other: a limiter that cannot serve two loops even
    # in turn fails here, the same way on every run, before any timing between threads matters.
    for n in (1, 2):
        what = f"calling asyncio.run(run_workflow(...)) directly on worker thread {n} of 2 alone, before both at once"
        run_bounded(run_workflow_here, kata, Tool(), plan, what, what=what)
    at_the_same_time((worker, (1,), f"{how}, thread 1"), (worker, (2,), f"{how}, thread 2"))


class Unreadable(Exception):
    """What the failing step of test_a_failed_step_is_logged_and_the_others_still_run raises."""


def test_a_failed_step_is_logged_and_the_others_still_run(kata):
    """a step that fails is returned in its place and logged with its traceback, and every other step still runs"""
    tool = Tool()
    layers = [["ocr", "vision", "layout"], ["merge"]]
    steps = tool.workflow(layers)
    problem = Unreadable("receipt 7 is unreadable")

    async def fails():
        tool.runs["vision"] += 1
        await asyncio.sleep(STEP_SECONDS)
        raise problem

    steps[0][1] = fails
    what = (f"{handler_call(1, 1)}, the step 'vision' of the first of 2 layers raising "
            f"{type(problem).__name__}('{problem}')")
    records: list[logging.LogRecord] = []
    kept = logging.Handler(logging.ERROR)
    kept.emit = records.append
    root = logging.getLogger()
    root.addHandler(kept)
    try:
        out = run_bounded(kata.handler, {"tool": "vision", "layers": steps}, what=what)
    except Hang:
        raise
    except Exception as exc:
        raise AssertionError(
            f"{what}: expected handler to return the failed step's exception in its place, as the starter does, but "
            f"handler raised {type(exc).__name__}: {exc}: one failed step must not lose the others' results"
        ) from exc
    finally:
        root.removeHandler(kept)
    results = list(out["results"])
    wrong = [f"{n} ran {tool.runs[n]} times" for layer in layers for n in layer if tool.runs[n] != 1]
    assert not wrong and results[1] is problem and out.get("failed") == 1, (
        f"{what}: expected every step to run once, the exception as the second result and failed=1, but "
        f"{', '.join(wrong) or 'every step ran once'}; results {results}, failed={out.get('failed')!r}"
    )
    traced = [r for r in records if r.exc_info and r.exc_info[1] is problem]
    named = [r for r in records if type(problem).__name__ in r.getMessage()]
    assert traced and named, (
        f"{what}: expected the failure logged at ERROR as the starter logs it: once with its traceback (the "
        f"exception as the record's exc_info) and once by the handler naming its type, but the records were "
        f"{[(r.levelname, r.getMessage(), bool(r.exc_info)) for r in records]}: a failed step's traceback is "
        f"what its owner needs, and gather(return_exceptions=True) keeps only the exception"
    )
