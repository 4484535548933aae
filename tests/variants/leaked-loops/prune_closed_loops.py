"""Variant: one lock per loop, and every closed loop's entry dropped on the next get().

asyncio.run closes its loop when the invocation ends, so the next invocation
removes it and at most the last loop stays alive. Unlike the single slot, this
also gives each of several loops running at once on different threads a lock
of its own.
"""
import asyncio
import hashlib

DIMENSIONS = 8
MAX_CACHED = 1024  # a Lambda has little memory: keep the newest vectors only


class LoopLocalLock:
    """Hands out the asyncio.Lock of the running event loop, one lock per running loop."""

    def __init__(self) -> None:
        # A plain dict: a waited-on lock holds its loop anyway, so weak keys
        # would not help. Entries are dropped once their loop is closed.
        self._locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}

    def get(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        for old in [old for old in self._locks if old.is_closed()]:
            del self._locks[old]
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
