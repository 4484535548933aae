"""The workflow runner (kata 10), tested as its team would: a workflow with a step that fails, run by the handler."""
import asyncio
import logging

# The bug: summarize() logs each failed step by its exception's type name alone; the exception, with its
# message and traceback, is not attached to the log record.
BUG = [("10_swallowed_traceback.py", "summarize")]


async def ocr():
    await asyncio.sleep(0.001)
    return "TOTAL 12.40"


async def vision():
    await asyncio.sleep(0.001)
    raise RuntimeError("the vision model answered 429: rate limited")


async def tables():
    return [["coffee", "3.20"]]


class Context:
    def get_remaining_time_in_millis(self):
        return 5_000


def test_a_failed_step_is_named_and_the_others_are_returned(kata, caplog):
    """One step of the first layer fails: the handler returns the other outputs, names it, and logs an error."""
    caplog.set_level(logging.ERROR)
    answer = kata.handler({"layers": [{"ocr": ocr, "vision": vision}, {"tables": tables}]}, Context())
    assert answer == {"outputs": {"ocr": "TOTAL 12.40", "tables": [["coffee", "3.20"]]}, "failed": ["vision"]}
    assert any("vision" in r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)


def test_a_warm_container_runs_a_clean_workflow(kata):
    """Two invocations of a workflow whose steps all succeed: every output, nothing failed."""
    for _ in range(2):
        assert kata.handler({"layers": [{"ocr": ocr, "tables": tables}]}) == {
            "outputs": {"ocr": "TOTAL 12.40", "tables": [["coffee", "3.20"]]}, "failed": []}
