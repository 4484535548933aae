"""Keeps a quiet Server-Sent Events stream alive: the step in a task, shielded from wait_for's timeout."""
import asyncio
from collections.abc import AsyncIterator

KEEPALIVE = ": keepalive\n\n"


async def with_keepalive(events: AsyncIterator[str], interval: float) -> AsyncIterator[str]:
    """Every event of `events`, and a KEEPALIVE whenever `events` has been quiet for `interval` seconds."""
    step = None
    try:
        while True:
            if step is None:
                step = asyncio.ensure_future(anext(events))
            try:
                event = await asyncio.wait_for(asyncio.shield(step), timeout=interval)
            except TimeoutError:
                yield KEEPALIVE
                continue
            except StopAsyncIteration:
                return
            step = None
            yield event
    finally:
        if step is not None and not step.done():
            step.cancel()
            await asyncio.wait({step})
        await events.aclose()
