"""Decoy: one module-level threading.Lock in place of the per-loop asyncio.Lock.

A threading lock binds to no event loop, so no loop is kept alive and no
warm invocation fails on a dead one. But it is held across an await (the call
to the model), and it blocks the thread, not the coroutine. When a second
request of the same loop misses the cache, acquire() stops the loop's thread
while the first request, which holds the lock, waits for its vector on that
very loop: neither can ever go on, and the invocation never returns.
"""
import asyncio
import hashlib
import threading

DIMENSIONS = 8
MAX_CACHED = 1024  # a Lambda has little memory: keep the newest vectors only


# One lock for the whole process. A threading.Lock belongs to no event loop:
# nothing can be bound to a dead loop, and nothing keeps a finished loop alive.
_process_lock = threading.Lock()


class LoopLocalLock:
    """Hands out the process-wide lock, to be used with `async with`."""

    def get(self) -> "LoopLocalLock":
        return self

    async def __aenter__(self) -> "LoopLocalLock":
        _process_lock.acquire()
        return self

    async def __aexit__(self, *exc) -> None:
        _process_lock.release()


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
