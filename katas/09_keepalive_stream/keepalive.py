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
    while True:
        try:
            event = await asyncio.wait_for(anext(events), timeout=interval)
        except TimeoutError:
            yield KEEPALIVE
            continue
        except StopAsyncIteration:
            return
        yield event
