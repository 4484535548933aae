"""Decoy: a threading.BoundedSemaphore in place of the asyncio.Semaphore.

A threading semaphore binds to no event loop, so the warm-invocation error is
gone. But it blocks the thread, not the coroutine: all the steps of a layer
run on one thread, the loop's. When a step finds no free slot, `with sem:`
stops that thread, so the steps holding the slots can never resume to give
them back. A layer wider than the limit freezes its loop for good.
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
        # threading primitives belong to no event loop, so the process-wide
        # limiter can outlive every invocation's loop
        self._lock = threading.Lock()
        self._semaphores: dict[str, threading.BoundedSemaphore] = {}

    async def semaphore(self, key: str) -> threading.BoundedSemaphore:
        with self._lock:
            if key not in self._semaphores:
                self._semaphores[key] = threading.BoundedSemaphore(self.default_limit)
            return self._semaphores[key]


_limiter: ConcurrencyLimiter | None = None


def get_concurrency_limiter() -> ConcurrencyLimiter:
    """The process-wide limiter, built once and reused by every invocation."""
    global _limiter
    if _limiter is None:
        _limiter = ConcurrencyLimiter()
    return _limiter


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
        with await limiter.semaphore(tool):
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
