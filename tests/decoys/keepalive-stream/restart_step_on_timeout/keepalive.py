"""Keeps a quiet Server-Sent Events stream alive: wait_for, and resume the generator after a timeout."""
import asyncio
from collections.abc import AsyncIterator

KEEPALIVE = ": keepalive\n\n"


async def with_keepalive(open_events, start: int, interval: float) -> AsyncIterator[str]:
    """Events from `open_events(start)` on; a keepalive, then a resumed generator, when a step is slow."""
    position = start
    events = open_events(position)
    deadline = interval
    while True:
        try:
            event = await asyncio.wait_for(anext(events), timeout=deadline)
        except TimeoutError:
            yield KEEPALIVE
            # The timeout closed the generator: resume it at the step it was on, and since the
            # keepalive has gone out, give that step all the time it needs.
            events = open_events(position)
            deadline = None
            continue
        except StopAsyncIteration:
            return
        position += 1
        deadline = interval
        yield event
