"""Decoy: keep the process-wide limiter; when a layer comes back with "bound to
a different event loop", build a new limiter and run that layer again.

The retry hides the error, and the limit still holds, but the error only
reaches the steps that had to wait for a slot. The steps that got a slot at
once have already run when the layer is retried, so they run a second time:
their tools are called twice in one invocation.
"""
import asyncio
import logging

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


def _bound_to_an_old_loop(result) -> bool:
    return isinstance(result, RuntimeError) and "bound to a different event loop" in str(result)


async def run_layer(steps, tool: str) -> list:
    """Run the steps of one layer at the same time; a failed step becomes its exception."""
    global _limiter

    async def run_one(limiter, step):
        async with await limiter.semaphore(tool):
            return await execute_step(step, tool)

    limiter = get_concurrency_limiter()
    results = await asyncio.gather(*(run_one(limiter, s) for s in steps), return_exceptions=True)
    if any(_bound_to_an_old_loop(r) for r in results):
        # The limiter was built on an earlier invocation's loop: build a new
        # one on this loop and run the layer again.
        _limiter = None
        limiter = get_concurrency_limiter()
        results = await asyncio.gather(*(run_one(limiter, s) for s in steps), return_exceptions=True)
    return results


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
