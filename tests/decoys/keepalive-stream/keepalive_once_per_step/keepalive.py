"""Keeps a quiet Server-Sent Events stream alive: one keepalive for each slow step."""
import asyncio
from collections.abc import AsyncIterator

KEEPALIVE = ": keepalive\n\n"


async def with_keepalive(events: AsyncIterator[str], interval: float) -> AsyncIterator[str]:
    """Every event of `events`, and a KEEPALIVE when a step is slower than `interval` seconds."""
    step = None
    try:
        while True:
            step = asyncio.ensure_future(anext(events))
            done, _ = await asyncio.wait({step}, timeout=interval)
            if not done:
                yield KEEPALIVE  # the connection is alive again: now wait for the step
                await asyncio.wait({step})
            finished, step = step, None
            try:
                event = finished.result()
            except StopAsyncIteration:
                return
            yield event
    finally:
        if step is not None and not step.done():
            step.cancel()
            await asyncio.wait({step})
        await events.aclose()
