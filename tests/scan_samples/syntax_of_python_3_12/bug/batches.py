"""Batches written with Python 3.12's type parameters."""
import asyncio

_flush = asyncio.Lock()  # expect: LK01

type Batch[T] = list[T]


def first[T](batch: Batch[T]) -> T:
    return batch[0]


async def flush[T](batch: Batch[T], send) -> None:
    async with _flush:
        await send(batch)
