"""Decoy: keep the process-wide limiter, and set it back to None at the top of handler.

Every invocation through handler gets a new limiter for its new loop, so the
warm Lambda works. But the limiter is still tied to the first loop that waits
on it, not to the running loop: only handler knows a new loop is coming. Run
the workflow on any other new loop (a test runner's loop per test, a worker
thread's asyncio.run) and it fails again with "bound to a different event loop".
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
    global _limiter
    _limiter = None  # every invocation has a new loop: start it with a new limiter
    results = asyncio.run(run_workflow(event["layers"], event.get("tool", "vision")))
    failed = [r for r in results if isinstance(r, BaseException)]
    for exc in failed:
        log.error("step failed: %s", type(exc).__name__)
    return {"results": results, "failed": len(failed)}
