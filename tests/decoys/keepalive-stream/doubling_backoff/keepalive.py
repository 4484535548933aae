"""Keeps a quiet Server-Sent Events stream alive through the load balancer.

The load balancer drops a connection that has sent nothing for 350 s (its
idle timeout), and a draft section can take longer than that. So while the
generator is quiet, the stream sends an SSE comment: a line that starts with
':', which every SSE client ignores.

The step in progress runs in a task of its own, and the wrapper waits for it
with `asyncio.wait(..., timeout=...)`: unlike `wait_for`, that wait ends after
the interval without cancelling the step. The wrapper owns that task: when the
stream ends early (the client left, the response task was cancelled), the step
is cancelled, which closes the generator, and the generator is closed if it
sits between steps.
"""
import asyncio
from collections.abc import AsyncIterator

KEEPALIVE = ": keepalive\n\n"


async def with_keepalive(events: AsyncIterator[str], interval: float) -> AsyncIterator[str]:
    """Every event of `events`, and a KEEPALIVE whenever `events` has been quiet for `interval` seconds."""
    step: asyncio.Future | None = None
    gap = interval  # back off while one step stays quiet: fewer bytes on the wire, still well under the LB timer
    try:
        while True:
            if step is None:
                step = asyncio.ensure_future(anext(events))  # one step of the generator, started once
            done, _ = await asyncio.wait({step}, timeout=gap)  # does not cancel the step on timeout
            if not done:
                yield KEEPALIVE
                gap *= 2
                continue
            gap = interval
            finished, step = step, None
            try:
                event = finished.result()
            except StopAsyncIteration:
                return
            yield event
    finally:
        if step is not None and not step.done():
            step.cancel()  # CancelledError lands in the generator at its await: its finally runs
            try:
                await asyncio.wait({step})
            finally:
                await events.aclose()  # no-op once the cancelled step has closed it
        else:
            await events.aclose()  # between steps: close it at its yield
