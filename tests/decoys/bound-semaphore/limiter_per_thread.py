"""Decoy: one limiter per thread (threading.local), as if each thread ran only one loop.

It survives any test that starts each invocation on a new thread. But a
thread runs loop after loop: the Lambda runtime calls handler on the same
thread every time, and a test runner makes a new loop per test on one thread.
The thread's limiter is bound to the first of those loops that waited on it,
and the next loop fails with "bound to a different event loop" again.
"""
import asyncio
import logging
import threading

log = logging.getLogger(__name__)

DEFAULT_LIMIT = 3


class ConcurrencyLimiter:
    """One semaphore per tool, created on first use."""

    def __init__(self, default_limit: int = DEFAULT_LIMIT):
        self.default_limit = default_limit
        self._lock = asyncio.Lock()
        self._semaphores: dict[str, asyncio.Semaphore] = {}

    async def semaphore(self, key: str) -> asyncio.Semaphore:
        async with self._lock:
            if key not in self._semaphores:
                self._semaphores[key] = asyncio.Semaphore(self.default_limit)
            return self._semaphores[key]


# One limiter per thread: a thread runs one event loop at a time, so each loop has its own.
_local = threading.local()


def get_concurrency_limiter() -> ConcurrencyLimiter:
    """The limiter of the calling thread, built on its first use there."""
    limiter = getattr(_local, "limiter", None)
    if limiter is None:
        limiter = _local.limiter = ConcurrencyLimiter()
    return limiter


async def check_idempotency(step) -> None:
    """Ask the result cache whether this step already ran (a real await)."""
    await asyncio.sleep(0)


async def execute_step(step, tool: str):
    """Run one step's tool call. The layer runner already holds its slot: taking a
    second one here would let a full layer deadlock, each step holding one slot."""
    await check_idempotency(step)
    try:
        return await step()
    except Exception:
        # gather(return_exceptions=True) turns the error into a value; log the
        # traceback first, or all anyone sees is the exception's type.
        log.exception("step failed")
        raise


async def run_layer(steps, tool: str) -> list:
    """Run the steps of one layer at the same time; a failed step becomes its exception."""
    limiter = get_concurrency_limiter()

    async def run_one(step):
        async with await limiter.semaphore(tool):
            return await execute_step(step, tool)

    return await asyncio.gather(*(run_one(s) for s in steps), return_exceptions=True)


async def run_workflow(layers, tool: str) -> list:
    results = []
    for steps in layers:
        results.extend(await run_layer(steps, tool))
    return results


def handler(event: dict, context=None) -> dict:
    """Entry point: event = {"tool": name, "layers": [[step, ...], ...]}; a step is an async callable."""
    results = asyncio.run(run_workflow(event["layers"], event.get("tool", "vision")))
    failed = [r for r in results if isinstance(r, BaseException)]
    for exc in failed:
        log.error("step failed: %s", type(exc).__name__)
    return {"results": results, "failed": len(failed)}
