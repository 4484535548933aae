"""Hidden tests for kata 03, leaked-loops.

Every test gets a fresh copy of the implementation (`kata`), then plays warm
invocations: each `kata.handler(...)` call is one `asyncio.run`, in one
process, as in a warm Lambda container. "Contended" means that several
requests of one invocation miss the cache at the same time, so some of them
wait on the lock. Each invocation runs under a hang guard.
"""
import asyncio
import weakref
from collections import Counter

from loopkata.testing import loops_alive, run_bounded

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


def invoke(kata, model, queries, invocation=1):
    """One warm invocation; the learner's own exception propagates."""
    out = run_bounded(kata.handler, {"queries": list(queries)}, what=f"invocation {invocation}")
    vectors = list(out["vectors"])
    expected = [model.returned.get(q) for q in queries]
    assert vectors == expected, (
        f"invocation {invocation}: expected one vector per query, in order, as the model returned them; "
        f"got {len(vectors)} vectors for {len(queries)} queries, not matching the model's"
    )


def contended(i):
    """Queries of one contended invocation: two new texts, each requested three times at once."""
    return [f"query {i}a", f"query {i}b"] * 3


def test_cold_invocation_returns_a_vector_per_query(kata):
    """a cold invocation returns one vector per query"""
    model = Model(kata)
    invoke(kata, model, ["red shoes", "blue shirt", "red shoes"])


def test_concurrent_misses_call_the_model_once(kata):
    """requests that miss the cache at the same time send each text to the model once"""
    model = Model(kata)
    invoke(kata, model, ["alpha"] * 4 + ["beta"] * 3 + ["gamma"])
    calls = dict(model.calls)
    assert calls == {"alpha": 1, "beta": 1, "gamma": 1}, (
        f"expected each text to be sent to the model once, got {calls}: "
        "the lock let requests for the same text past the cache check together"
    )


def test_warm_contended_invocations_succeed(kata):
    """a second and third warm invocation with concurrent cache misses succeed"""
    model = Model(kata)
    for i in (1, 2, 3):
        invoke(kata, model, contended(i), invocation=i)


def test_warm_invocations_reuse_the_cache(kata):
    """warm invocations reuse cached vectors: each text reaches the model once in all"""
    model = Model(kata)
    invoke(kata, model, ["alpha", "beta"] * 3, invocation=1)
    invoke(kata, model, ["alpha", "delta", "beta", "delta"], invocation=2)
    invoke(kata, model, ["delta", "alpha", "epsilon", "epsilon"], invocation=3)
    calls = dict(model.calls)
    expected = {"alpha": 1, "beta": 1, "delta": 1, "epsilon": 1}
    assert calls == expected, f"expected model calls {expected} over 3 warm invocations, got {calls}"


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
        run_bounded(asyncio.run, invocation(), what=f"invocation {i}")
        assert seen["most"] == 1, (
            f"invocation {i}: expected at most 1 coroutine holding the lock at once, got {seen['most']} at once"
        )
        assert seen["locks"] == 1, (
            f"invocation {i}: expected get() to hand out the same lock within one loop, "
            f"got {seen['locks']} different locks from 3 calls"
        )


def test_handler_keeps_no_finished_loop_alive(kata):
    """after 50 contended warm invocations, at most one event loop is still alive"""
    model = Model(kata)
    for i in range(1, LEAK_RUNS + 1):
        invoke(kata, model, contended(i), invocation=i)
    alive = loops_alive(model.loops)
    assert alive <= 1, (
        f"expected at most 1 event loop alive after {LEAK_RUNS} contended invocations and gc.collect(), "
        f"found {alive}"
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
    for i in range(1, runs + 1):
        run_bounded(asyncio.run, invocation(), what=f"invocation {i}")
    alive = loops_alive(refs)
    assert alive <= 1, (
        f"expected at most 1 event loop alive after {runs} contended invocations and gc.collect(), found {alive}"
    )
