"""Decoy: keep the WeakKeyDictionary and run gc.collect() after every invocation.

The loops are not garbage waiting for a collection: the module-level
LoopLocalLock holds the dictionary, the dictionary holds each lock, and each
lock that has been waited on holds its loop. Everything is reachable, so the
collector frees nothing and every contended invocation still leaves its loop.
"""
import asyncio
import gc
import hashlib
import weakref

DIMENSIONS = 8
MAX_CACHED = 1024  # a Lambda has little memory: keep the newest vectors only


class LoopLocalLock:
    """Hands out the asyncio.Lock of the running event loop, one lock per loop."""

    def __init__(self) -> None:
        # A weak key: once a loop is finished and nothing else holds it, its
        # entry is supposed to disappear with it.
        self._locks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

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
    gc.collect()  # let the finished loop and its dictionary entry go
    return {"vectors": vectors, "cached": len(_vectors)}
