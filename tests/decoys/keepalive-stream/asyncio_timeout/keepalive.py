"""Keeps a quiet Server-Sent Events stream alive, with asyncio.timeout."""
import asyncio
from collections.abc import AsyncIterator

KEEPALIVE = ": keepalive\n\n"


async def with_keepalive(events: AsyncIterator[str], interval: float) -> AsyncIterator[str]:
    """Every event of `events`, and a KEEPALIVE whenever `events` has been quiet for `interval` seconds."""
    while True:
        try:
            async with asyncio.timeout(interval):
                event = await anext(events)
        except TimeoutError:
            yield KEEPALIVE
            continue
        except StopAsyncIteration:
            return
        yield event
