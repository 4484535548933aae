"""The query-embedding cache (kata 03), tested as its team would: warm invocations whose queries contend.

A Lambda container calls `handler` again and again in one process; each call
is one asyncio.run, on a new event loop. Two requests for the same text in one
invocation both miss the cache: one calls the model, the other waits on the lock.
"""
# The bug: LoopLocalLock keeps each loop's asyncio.Lock as the value of a WeakKeyDictionary keyed by the
# loop; a lock that was waited on refers to its loop, so no entry ever goes and every loop stays alive.
BUG = [("03_leaked_loops.py", "get"), ("03_leaked_loops.py", "__init__")]


def test_a_warm_container_answers_repeated_queries(kata):
    """Five invocations, each with a query asked twice at once: one vector per query, the same for both."""
    for n in range(5):
        answer = kata.handler({"queries": [f"invoice {n}", f"invoice {n}", "refund policy"]})
        first, second, third = answer["vectors"]
        assert first == second and len(first) == kata.DIMENSIONS and third != first


def test_the_model_is_called_once_per_text(kata, monkeypatch):
    """Three requests for one new text in one invocation: the model is asked once, the others wait for it."""
    calls = []
    real = kata.embed_remote

    async def counting(text):
        calls.append(text)
        return await real(text)

    monkeypatch.setattr(kata, "embed_remote", counting)
    kata.handler({"queries": ["tax rate"] * 3})
    assert calls == ["tax rate"]
