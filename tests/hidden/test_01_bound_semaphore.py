"""Hidden tests for kata 01, bound-semaphore.

Every test gets a fresh copy of the implementation (`kata`), then plays warm
invocations: each `kata.handler(...)` call is one `asyncio.run`, in one
process, as in a warm Lambda container. Each invocation runs under a hang
guard, so a deadlock is reported in about a second with the stuck lines.
"""
import asyncio
import weakref

from loopkata.testing import loops_alive, run_bounded

LIMIT = 3


class Tool:
    """Real steps: each awaits, and the tool counts how many run at once."""

    def __init__(self):
        self.running = 0
        self.most_at_once = 0
        self.loops = []

    def step(self, name):
        async def call():
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
            self.loops.append(weakref.ref(asyncio.get_running_loop()))
            try:
                await asyncio.sleep(0.01)
            finally:
                self.running -= 1
            return f"{name}: done"

        return call


def invoke(kata, tool, names, invocation=1):
    """One warm invocation of a single layer; raises the first failed step's own error."""
    steps = [tool.step(n) for n in names]
    out = run_bounded(kata.handler, {"tool": "vision", "layers": [steps]}, what=f"invocation {invocation}")
    results = list(out["results"])
    for r in results:
        if isinstance(r, BaseException):
            raise r
    expected = [f"{n}: done" for n in names]
    assert results == expected, (
        f"invocation {invocation}: expected every step's output {expected}, got {results}"
    )


def test_cold_invocation_runs_every_step(kata):
    """a cold invocation runs both steps of the receipt workflow"""
    invoke(kata, Tool(), ["ocr", "vision"])


def test_second_warm_invocation_succeeds(kata):
    """a second and third warm invocation succeed, like the first"""
    tool = Tool()
    for i in (1, 2, 3):
        invoke(kata, tool, ["ocr", "vision"], invocation=i)


def test_warm_invocations_with_more_steps_than_slots(kata):
    """warm invocations with more steps than slots all succeed"""
    tool = Tool()
    for i in (1, 2, 3):
        invoke(kata, tool, ["s1", "s2", "s3", "s4", "s5"], invocation=i)


def test_layer_of_three_on_limit_of_three(kata):
    """a layer of 3 steps on a limit of 3 finishes (no deadlock)"""
    invoke(kata, Tool(), ["ocr", "vision", "layout"])


def test_layer_of_five_on_limit_of_three(kata):
    """a layer of 5 steps on a limit of 3 finishes (no deadlock)"""
    invoke(kata, Tool(), ["a", "b", "c", "d", "e"])


def test_limit_still_holds(kata):
    """the limiter still lets 3 calls of one tool run at once, never more"""
    tool = Tool()
    for i in (1, 2):
        invoke(kata, tool, [f"page{n}" for n in range(8)], invocation=i)
    assert tool.most_at_once == LIMIT, (
        f"expected at most {LIMIT} steps of one tool running at once (and {LIMIT} allowed), "
        f"but saw {tool.most_at_once} at once"
    )


def test_new_loop_recognised_when_it_reuses_a_dead_loops_id(kata):
    """a new loop is recognised even when it gets a dead loop's id()"""
    # CPython may hand a freed loop's id to the next loop; force that here, as
    # the incident's own regression test did, so an id()-based cache is caught.
    kata.id = lambda obj: 4242
    tool = Tool()
    for i in (1, 2, 3):
        invoke(kata, tool, ["s1", "s2", "s3", "s4", "s5"], invocation=i)


def test_limiter_keeps_no_finished_loop_alive(kata):
    """after 10 warm invocations, the limiter keeps at most one finished loop alive"""
    tool = Tool()
    for i in range(1, 11):
        invoke(kata, tool, ["s1", "s2", "s3", "s4", "s5"], invocation=i)
    alive = loops_alive(tool.loops)
    assert alive <= 1, f"expected at most 1 loop alive after 10 invocations and gc.collect(), found {alive}"
