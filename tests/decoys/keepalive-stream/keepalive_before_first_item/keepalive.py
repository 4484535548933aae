"""Keeps a quiet Server-Sent Events stream alive: keepalives until the first event."""
import asyncio
from collections.abc import AsyncIterator

KEEPALIVE = ": keepalive\n\n"


async def with_keepalive(events: AsyncIterator[str], interval: float) -> AsyncIterator[str]:
    """The first event of `events` with keepalives while it is slow, then the others as they come."""
    first = asyncio.ensure_future(anext(events))
    try:
        while True:
            done, _ = await asyncio.wait({first}, timeout=interval)
            if done:
                break
            yield KEEPALIVE
        try:
            yield first.result()
        except StopAsyncIteration:
            return
        # the slow part is the start (the model warming up): from here on, just stream
        async for event in events:
            yield event
    finally:
        if not first.done():
            first.cancel()
            await asyncio.wait({first})
        await events.aclose()
