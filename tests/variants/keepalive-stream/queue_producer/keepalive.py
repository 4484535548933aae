"""Keeps a quiet Server-Sent Events stream alive: a producer task, and a queue the stream waits on."""
import asyncio
from collections.abc import AsyncIterator

KEEPALIVE = ": keepalive\n\n"


async def with_keepalive(events: AsyncIterator[str], interval: float) -> AsyncIterator[str]:
    """Every event of `events`, and a KEEPALIVE whenever `events` has been quiet for `interval` seconds."""
    queue: asyncio.Queue = asyncio.Queue(maxsize=1)  # the producer runs at most one event ahead

    async def produce():
        try:
            async for event in events:
                await queue.put(("event", event))
        except Exception as exc:  # noqa: BLE001 - handed to the stream, which raises it
            await queue.put(("error", exc))
        else:
            await queue.put(("end", None))

    producer = asyncio.create_task(produce())
    try:
        while True:
            try:
                # a timeout cancels only this get(): the item stays queued, the producer runs on
                kind, value = await asyncio.wait_for(queue.get(), timeout=interval)
            except TimeoutError:
                yield KEEPALIVE
                continue
            if kind == "end":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        producer.cancel()
        await asyncio.wait({producer})
        await events.aclose()
