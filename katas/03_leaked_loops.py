"""Query-embedding cache for a semantic search function, run as a Lambda-style function.

Every search query is turned into a vector by a remote embedding model. Model
calls are slow and billed, so vectors are cached in the process: a warm
container answers a repeated query without calling the model again. When
several requests miss the cache for the same text at the same time, only one
may call the model; the others wait and then read the cached vector. That is
a double-checked cache with an await inside the lock.

A module-level `asyncio.Lock` cannot do this job: it binds to the first loop
that waits on it, and every warm invocation runs on a new loop. So the cache
takes its lock from `LoopLocalLock`, which hands out one `asyncio.Lock` per
event loop and keeps them in a `weakref.WeakKeyDictionary`, meant to let each
finished loop be garbage-collected.

`handler(event)` is the function entry point. Each call runs one
`asyncio.run(...)`: one invocation. A warm container calls it again and again
in the same process, so module globals outlive every event loop.

Your task: a warm container must not keep the event loops of finished
invocations alive (after any number of invocations, at most one loop may
survive `gc.collect()`), while the lock still lets only one coroutine of a
loop into the cache at a time and each text is still sent to the model once.
Keep the names `handler`, `LoopLocalLock` (with its `get()` method) and
`embed_remote`: the tests use them.
Run `loopkata check leaked-loops` to grade your fix.
"""
import asyncio
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
    return {"vectors": vectors, "cached": len(_vectors)}
