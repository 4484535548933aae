"""Keeps a quiet Server-Sent Events stream alive through the load balancer.

The load balancer drops a connection that has sent nothing for 350 s (its
idle timeout), and a draft section can take longer than that. So while the
generator is quiet, the stream sends an SSE comment: a line that starts with
':', which every SSE client ignores.
"""
import asyncio
from collections.abc import AsyncIterator

KEEPALIVE = ": keepalive\n\n"


async def with_keepalive(events: AsyncIterator[str], interval: float) -> AsyncIterator[str]:
    """Every event of `events`, and a KEEPALIVE whenever `events` has been quiet for `interval` seconds."""
    step = None  # the task running the generator's current step, kept across keepalives
    try:
        while True:
            if step is None:
                yield KEEPALIVE  # a step may be slow: tell the load balancer at once that the stream lives
                step = asyncio.ensure_future(anext(events))
            # asyncio.wait only watches the step: when the interval is up it says the step is
            # not done and leaves it running. (asyncio.wait_for would cancel it, and a cancelled
            # step closes the generator: the stream then ends as if the draft were complete.)
            done, _ = await asyncio.wait({step}, timeout=interval)
            if not done:
                yield KEEPALIVE
                continue
            finished, step = step, None
            try:
                event = finished.result()
            except StopAsyncIteration:
                return
            yield event
    finally:
        # The client left, or the stream failed: stop the step still running and close the
        # generator, so that its own cleanup runs now and nothing it started keeps going.
        if step is not None and not step.done():
            step.cancel()
            await asyncio.wait({step})
        await events.aclose()
