"""Decoy: one asyncio.Lock for every loop, made once, as a module-level lock would be.

Since Python 3.10 asyncio.Lock() takes no loop, so this looks safe, and it
keeps at most one loop alive. But the lock binds to the first loop that waits
on it: the next warm invocation whose requests contend fails with
"RuntimeError: <asyncio.locks.Lock ...> is bound to a different event loop".
"""
import asyncio
import hashlib

DIMENSIONS = 8
MAX_CACHED = 1024  # a Lambda has little memory: keep the newest vectors only


class LoopLocalLock:
    """Hands out the one asyncio.Lock of the process."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()

    def get(self) -> asyncio.Lock:
        return self._lock


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
