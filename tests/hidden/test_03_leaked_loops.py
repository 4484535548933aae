"""Hidden tests for kata 03, leaked-loops.

Every test gets a fresh copy of the implementation (`kata`), then plays warm
invocations: each `kata.handler(...)` call is one `asyncio.run`, in one
process, as in a warm Lambda container. "Contended" means that several
requests of one invocation miss the cache at the same time, so some of them
wait on the lock. Each invocation runs under a hang guard.

Three tests use `LoopLocalLock` directly, without handler: the class itself
must keep its promise. Every failure message starts with how the test drove
the code ("handler call 2 of 3 in one process", "calling LoopLocalLock
directly ..."); the learner's own exception is shown whole inside it.
"""
import asyncio
import weakref
from collections import Counter

from loopkata.testing import Hang, loops_alive, run_bounded

LEAK_RUNS = 50


class Model:
    """Wraps the kata's own embed_remote: counts calls per text and notes each call's loop."""

    def __init__(self, kata):
        self.embed_remote = kata.embed_remote
        self.calls = Counter()
        self.returned = {}
        self.loops = []
        kata.embed_remote = self.embed

    async def embed(self, text):
        self.calls[text] += 1
        self.loops.append(weakref.ref(asyncio.get_running_loop()))
        await asyncio.sleep(0.002)  # long enough for the other requests to reach the lock
        vector = await self.embed_remote(text)
        self.returned[text] = vector
        return vector


def handler_call(i, n, how=""):
    """How a test drives the code: call i of n of kata.handler, all in one process (a warm container)."""
    return f"handler call {i} of {n} in one process{how}"


def bounded(what, fn, *args):
    """run_bounded, with the learner's own exception shown whole after `what`."""
    try:
        return run_bounded(fn, *args, what=what)
    except Hang:
        raise
    except Exception as exc:
        raise AssertionError(f"{what}: expected it to finish, but it raised {type(exc).__name__}: {exc}") from exc


def invoke(kata, model, queries, what):
    """One invocation through handler."""
    out = bounded(what, kata.handler, {"queries": list(queries)})
    vectors = list(out["vectors"])
    expected = [model.returned.get(q) for q in queries]
    assert vectors == expected, (
        f"{what}: expected one vector per query, in order, as the model returned them; "
        f"got {len(vectors)} vectors for {len(queries)} queries, not matching the model's"
    )


CONTENDED = ", some requests waiting on the lock"


def contended(i):
    """Queries of one contended invocation: two new texts, each requested three times at once."""
    return [f"query {i}a", f"query {i}b"] * 3


def test_cold_invocation_returns_a_vector_per_query(kata):
    """a cold invocation returns one vector per query"""
    model = Model(kata)
    invoke(kata, model, ["red shoes", "blue shirt", "red shoes"], handler_call(1, 1))


def test_concurrent_misses_call_the_model_once(kata):
    """requests that miss the cache at the same time send each text to the model once"""
    model = Model(kata)
    what = handler_call(1, 1, ", 8 queries at once (alpha 4 times, beta 3 times, gamma once)")
    invoke(kata, model, ["alpha"] * 4 + ["beta"] * 3 + ["gamma"], what)
    calls = dict(model.calls)
    assert calls == {"alpha": 1, "beta": 1, "gamma": 1}, (
        f"{what}: expected each text to be sent to the model once, got {calls}: "
        "requests for the same text went past the cache check together, none waiting for the first "
        "to fill the cache"
    )


def test_warm_contended_invocations_succeed(kata):
    """a second and third warm invocation with concurrent cache misses succeed"""
    model = Model(kata)
    for i in (1, 2, 3):
        invoke(kata, model, contended(i), handler_call(i, 3, CONTENDED))


def test_warm_invocations_reuse_the_cache(kata):
    """warm invocations reuse cached vectors: each text reaches the model once in all"""
    model = Model(kata)
    invoke(kata, model, ["alpha", "beta"] * 3, handler_call(1, 3))
    invoke(kata, model, ["alpha", "delta", "beta", "delta"], handler_call(2, 3))
    invoke(kata, model, ["delta", "alpha", "epsilon", "epsilon"], handler_call(3, 3))
    calls = dict(model.calls)
    expected = {"alpha": 1, "beta": 1, "delta": 1, "epsilon": 1}
    assert calls == expected, (
        f"over 3 handler calls in one process: expected model calls {expected} (a text cached by an "
        f"earlier call is not sent again), got {calls}"
    )


def test_lock_lets_one_coroutine_in_at_a_time(kata):
    """LoopLocalLock still lets only one coroutine of a loop in at a time"""
    lock = kata.LoopLocalLock()
    seen = {"inside": 0, "most": 0, "locks": 0}

    async def worker():
        async with lock.get():
            seen["inside"] += 1
            seen["most"] = max(seen["most"], seen["inside"])
            await asyncio.sleep(0.002)
            seen["inside"] -= 1

    async def invocation():
        handed_out = [lock.get() for _ in range(3)]  # kept alive, so their ids stay distinct
        seen["locks"] = len({id(x) for x in handed_out})
        await asyncio.gather(*(worker() for _ in range(5)))

    for i in (1, 2, 3):
        what = (f"calling LoopLocalLock directly (no handler), asyncio.run {i} of 3 "
                "with 5 coroutines taking get()'s lock")
        bounded(what, asyncio.run, invocation())
        assert seen["most"] == 1, (
            f"{what}: expected at most 1 coroutine holding the lock at once, got {seen['most']} at once"
        )
        assert seen["locks"] == 1, (
            f"{what}: expected get() to hand out the same lock within one loop, "
            f"got {seen['locks']} different locks from 3 calls"
        )


def test_handler_keeps_no_finished_loop_alive(kata):
    """after 50 contended warm invocations, at most one event loop is still alive"""
    model = Model(kata)
    for i in range(1, LEAK_RUNS + 1):
        invoke(kata, model, contended(i), handler_call(i, LEAK_RUNS, CONTENDED))
    alive = loops_alive(model.loops)
    assert alive <= 1, (
        f"over {LEAK_RUNS} handler calls in one process{CONTENDED}: expected at most 1 event loop alive "
        f"after {LEAK_RUNS} contended invocations and gc.collect(), found {alive}"
    )


def test_lock_keeps_no_finished_loop_alive(kata):
    """LoopLocalLock itself keeps at most one finished event loop alive"""
    lock = kata.LoopLocalLock()
    refs = []

    async def worker():
        async with lock.get():
            await asyncio.sleep(0.001)

    async def invocation():
        refs.append(weakref.ref(asyncio.get_running_loop()))
        await asyncio.gather(worker(), worker())

    runs = 20
    how = "calling LoopLocalLock directly (no handler)"
    for i in range(1, runs + 1):
        bounded(f"{how}, asyncio.run {i} of {runs} with 2 coroutines taking get()'s lock", asyncio.run, invocation())
    alive = loops_alive(refs)
    assert alive <= 1, (
        f"{how} across {runs} asyncio.run calls, 2 coroutines taking get()'s lock in each: expected at most 1 "
        f"event loop alive after {runs} contended invocations and gc.collect(), found {alive}"
    )
