"""Batches written with Python 3.12's type parameters; the flush lock is the caller's."""
import asyncio

type Batch[T] = list[T]


def first[T](batch: Batch[T]) -> T:
    return batch[0]


async def flush[T](lock: asyncio.Lock, batch: Batch[T], send) -> None:
    async with lock:
        await send(batch)
