"""Keeps a quiet Server-Sent Events stream alive, with asyncio.wait."""
import asyncio
from collections.abc import AsyncIterator

KEEPALIVE = ": keepalive\n\n"


async def with_keepalive(events: AsyncIterator[str], interval: float) -> AsyncIterator[str]:
    """Every event of `events`, and a KEEPALIVE whenever `events` has been quiet for `interval` seconds."""
    while True:
        # asyncio.wait does not cancel what it waits for when the time is up
        done, _ = await asyncio.wait({asyncio.ensure_future(anext(events))}, timeout=interval)
        if not done:
            yield KEEPALIVE
            continue
        try:
            event = done.pop().result()
        except StopAsyncIteration:
            return
        yield event
