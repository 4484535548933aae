"""The document-extraction handler (kata 01), tested as its team would: warm invocations in one process.

A Lambda container calls `handler` again and again in one process; each call
is one asyncio.run, on a new event loop.
"""
import asyncio

# The bug: a limiter built once per process (`_limiter`, handed out by get_concurrency_limiter), whose
# lock and semaphores outlive the loop of the invocation that first used them.
BUG = [("01_bound_semaphore.py", "get_concurrency_limiter")]


def step(name, ran):
    async def call():
        ran.append(name)
        await asyncio.sleep(0.001)  # a tool call
        return f"{name}: done"
    return call


def test_a_warm_container_runs_every_step_of_every_invocation(kata):
    """Three invocations of the receipt workflow in one process: each runs its two steps and returns both outputs."""
    for invocation in range(1, 4):
        ran = []
        answer = kata.handler({"tool": "ocr", "layers": [[step("ocr", ran), step("vision", ran)]]})
        assert answer["failed"] == 0, f"invocation {invocation}: {answer['results']}"
        assert answer["results"] == ["ocr: done", "vision: done"]
        assert sorted(ran) == ["ocr", "vision"]


def test_run_workflow_on_a_loop_of_its_own(kata):
    """run_workflow, as a worker thread or a test runner calls it: asyncio.run without the handler."""
    for _ in range(2):
        ran = []
        results = asyncio.run(kata.run_workflow([[step("ocr", ran), step("vision", ran)]], "ocr"))
        assert results == ["ocr: done", "vision: done"]


def test_a_failed_step_is_counted_and_the_other_returns(kata):
    """A step whose tool fails: the handler counts it and still returns the other step's output."""
    async def broken():
        await asyncio.sleep(0.001)
        raise ConnectionError("the OCR service reset the connection")

    answer = kata.handler({"tool": "ocr", "layers": [[step("vision", []), broken]]})
    assert answer["failed"] == 1
    assert answer["results"][0] == "vision: done" and isinstance(answer["results"][1], ConnectionError)
