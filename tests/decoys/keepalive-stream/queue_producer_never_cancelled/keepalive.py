"""Keeps a quiet Server-Sent Events stream alive: a producer task, and a queue the stream waits on."""
import asyncio
from collections.abc import AsyncIterator

KEEPALIVE = ": keepalive\n\n"

_END = object()


async def with_keepalive(events: AsyncIterator[str], interval: float) -> AsyncIterator[str]:
    """Every event of `events`, and a KEEPALIVE whenever `events` has been quiet for `interval` seconds."""
    queue: asyncio.Queue = asyncio.Queue()

    async def produce():
        try:
            async for event in events:
                await queue.put(event)
        finally:
            await queue.put(_END)

    producer = asyncio.create_task(produce())
    while True:
        try:
            # a timeout cancels only this get(): the producer and its step run on
            event = await asyncio.wait_for(queue.get(), timeout=interval)
        except TimeoutError:
            yield KEEPALIVE
            continue
        if event is _END:
            await producer  # raises the generator's error, if it failed
            return
        yield event
