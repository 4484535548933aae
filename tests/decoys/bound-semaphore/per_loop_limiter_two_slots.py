"""Decoy: a limiter per loop (held weakly, compared with `is`), two slots per step kept.

The warm-invocation error is gone, but the step executor still awaits its
idempotency check and then takes a second slot. With as many steps as slots,
every step holds one slot and waits for another: the layer hangs forever.
"""
import asyncio
import logging
import weakref

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


# One slot: the limiter of the loop that is running now. An asyncio semaphore
# binds to the loop that first waits on it, so a limiter must never outlive its
# loop's invocation. The loop is held weakly and compared by identity: id() of
# a dead loop can be handed to the next one.
_limiter: ConcurrencyLimiter | None = None
_limiter_loop: weakref.ref | None = None


def get_concurrency_limiter() -> ConcurrencyLimiter:
    """The limiter of the running loop, rebuilt when a new loop (invocation) asks."""
    global _limiter, _limiter_loop
    loop = asyncio.get_running_loop()
    if _limiter is None or _limiter_loop is None or _limiter_loop() is not loop:
        _limiter = ConcurrencyLimiter()
        _limiter_loop = weakref.ref(loop)
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
