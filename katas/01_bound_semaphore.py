"""Document-extraction workflow, run as a Lambda-style function.

A workflow is a list of layers; the steps of one layer run at the same time
(say OCR and a vision model on the same receipt), and each step calls a tool.
A per-process concurrency limiter keeps at most `DEFAULT_LIMIT` calls per tool
in flight.

`handler(event)` is the function entry point. Each call runs one
`asyncio.run(...)`: one invocation. A warm container calls it again and
again in the same process, so module globals outlive every event loop.

Your task: every invocation, cold or warm, must run every step exactly once,
and a layer must never deadlock, while the limiter still caps concurrent calls
per tool. A step that fails must still be returned in its place and logged
with its traceback, as now, and must not stop the others. Keep the names
`handler` and `run_workflow(layers, tool)`: the tests call both,
`run_workflow` also on event loops that `handler` did not start.
Run `loopkata check bound-semaphore` to grade your fix.
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
    """Run one step's tool call under the limiter."""
    limiter = get_concurrency_limiter()
    await check_idempotency(step)
    async with await limiter.semaphore(tool):
        return await step()


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
