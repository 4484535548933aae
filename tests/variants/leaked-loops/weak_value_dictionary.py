"""Variant: the loop is the key, the lock a weak value.

The dictionary does not keep the lock alive; the coroutines that hold or wait
on it do. While any coroutine of a loop is inside or waiting, they all get
the same lock; once none is, the lock is freed, its entry disappears and so
does the dictionary's reference to the loop. No finished loop stays alive.
"""
import asyncio
import hashlib
import weakref

DIMENSIONS = 8
MAX_CACHED = 1024  # a Lambda has little memory: keep the newest vectors only


class LoopLocalLock:
    """Hands out the asyncio.Lock of the running event loop, while anyone uses it."""

    def __init__(self) -> None:
        self._locks: weakref.WeakValueDictionary = weakref.WeakValueDictionary()

    def get(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            lock = self._locks[loop] = asyncio.Lock()
        return lock


async def embed_remote(text: str) -> tuple[float, ...]:
    """Ask the embedding model for one vector (here: a short await, then a hash)."""
    await asyncio.sleep(0.001)
    digest = hashlib.sha256(text.encode()).digest()
    return tuple(b / 255 for b in digest[:DIMENSIONS])


_vectors: dict[str, tuple[float, ...]] = {}
_vectors_lock = LoopLocalLock()


async def embedding(text: str) -> tuple[float, ...]:
    """The vector for `text`: from the cache, or from the model exactly once."""
    vector = _vectors.get(text)
    if vector is not None:
        return vector
    async with _vectors_lock.get():
        vector = _vectors.get(text)  # filled while we waited for the lock?
        if vector is None:
            vector = await embed_remote(text)
            _vectors[text] = vector
            while len(_vectors) > MAX_CACHED:
                del _vectors[next(iter(_vectors))]
    return vector


async def search(queries: list[str]) -> list[tuple[float, ...]]:
    return list(await asyncio.gather(*(embedding(q) for q in queries)))


def handler(event: dict, context=None) -> dict:
    """Entry point: event = {"queries": [text, ...]}; returns one vector per query."""
    vectors = asyncio.run(search(event["queries"]))
    return {"vectors": vectors, "cached": len(_vectors)}
