"""Decoy: one process-wide limiter, whose lock and semaphores have their private `_loop` reset whenever a new loop asks.

Invocations one after another work, on handler's loops and on any other, and
the limit holds. But a worker thread's loop can run the workflow while
another loop runs it too, and then both loops share the same semaphores. A
slot released on one thread wakes a waiter of the other thread's loop
without telling that loop: asyncio's primitives are not thread-safe, so the
waiter's loop sleeps on and its layer never finishes. It also leans on a
private attribute of asyncio that may change in any release.
"""
import asyncio
import logging
import weakref

log = logging.getLogger(__name__)

DEFAULT_LIMIT = 3


class ConcurrencyLimiter:
    """One semaphore per tool, created on first use."""

    def __init__(self, loop: asyncio.AbstractEventLoop, default_limit: int = DEFAULT_LIMIT):
        self.default_limit = default_limit
        # weak, so that a limiter never keeps its finished loop alive
        self.loop_ref = weakref.ref(loop)
        self._lock = asyncio.Lock()
        self._semaphores: dict[str, asyncio.Semaphore] = {}

    async def semaphore(self, key: str) -> asyncio.Semaphore:
        async with self._lock:
            if key not in self._semaphores:
                self._semaphores[key] = asyncio.Semaphore(self.default_limit)
            return self._semaphores[key]


_limiter: ConcurrencyLimiter | None = None


def get_concurrency_limiter() -> ConcurrencyLimiter:
    """The limiter of the running event loop: asyncio primitives belong to one loop,
    so a new loop (a warm invocation, a test, a worker thread) gets a new limiter."""
    global _limiter
    loop = asyncio.get_running_loop()
    limiter = _limiter
    if limiter is None:
        limiter = _limiter = ConcurrencyLimiter(loop)
    elif limiter.loop_ref() is not loop:
        # new loop: unbind the existing primitives so they bind again on next wait
        limiter._lock._loop = None
        for sem in limiter._semaphores.values():
            sem._loop = None
        limiter.loop_ref = weakref.ref(loop)
    return limiter


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
    async def run_one(step):
        # the slot is taken once, in execute_step: taking a second one here
        # deadlocks a layer with as many steps as slots
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
