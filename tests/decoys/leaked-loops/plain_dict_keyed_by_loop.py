"""Decoy: one lock per loop in a plain dict keyed by the loop.

Every invocation works and the lock excludes, but the dict holds every loop
that ever asked, with its lock, for the life of the container: one dead event
loop more per invocation, contended or not.
"""
import asyncio
import hashlib

DIMENSIONS = 8
MAX_CACHED = 1024  # a Lambda has little memory: keep the newest vectors only


class LoopLocalLock:
    """Hands out the asyncio.Lock of the running event loop, one lock per loop."""

    def __init__(self) -> None:
        self._locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}

    def get(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if loop not in self._locks:
            self._locks[loop] = asyncio.Lock()
        return self._locks[loop]


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
