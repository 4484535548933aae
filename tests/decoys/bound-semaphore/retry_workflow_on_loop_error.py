"""Decoy: keep the process-wide limiter; when a step fails with "bound to a
different event loop", drop the limiter and run the whole workflow again.

Every invocation ends with every step's output, so it looks fixed. But the
error only reaches a step that had to wait for a slot: by then the steps that
got a slot at once have already run. The second run calls their tools a
second time: two OCR bills, two writes, for one invocation of a warm container.
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


def _bound_to_an_old_loop(result) -> bool:
    return isinstance(result, RuntimeError) and "bound to a different event loop" in str(result)


def handler(event: dict, context=None) -> dict:
    """Entry point: event = {"tool": name, "layers": [[step, ...], ...]}; a step is an async callable."""
    global _limiter
    layers, tool = event["layers"], event.get("tool", "vision")
    results = asyncio.run(run_workflow(layers, tool))
    if any(_bound_to_an_old_loop(r) for r in results):
        # The limiter still belongs to the previous invocation's loop: drop it
        # and run the workflow again, on a new loop, with a new limiter.
        _limiter = None
        results = asyncio.run(run_workflow(layers, tool))
    failed = [r for r in results if isinstance(r, BaseException)]
    for exc in failed:
        log.error("step failed: %s", type(exc).__name__)
    return {"results": results, "failed": len(failed)}
