"""Query-embedding cache for a semantic search function, run as a Lambda-style function.

Every search query is turned into a vector by a remote embedding model. Model
calls are slow and billed, so vectors are cached in the process: a warm
container answers a repeated query without calling the model again. When
several requests miss the cache for the same text at the same time, only one
may call the model; the others wait and then read the cached vector. That is
a double-checked cache with an await inside the lock.

A module-level `asyncio.Lock` cannot do this job: it binds to the first loop
that waits on it, and every warm invocation runs on a new loop. So the cache
takes its lock from `LoopLocalLock`, which hands out the lock of the running
loop and lets the loops of finished invocations be garbage-collected.

`handler(event)` is the function entry point. Each call runs one
`asyncio.run(...)`: one invocation. A warm container calls it again and again
in the same process, so module globals outlive every event loop.
"""
import asyncio
import hashlib
import weakref

DIMENSIONS = 8  # pragma: no mutate (the stand-in embedding's size: a demo constant, no lesson is about it)
MAX_CACHED = 1024  # a Lambda has little memory: keep the newest vectors only  # pragma: no mutate (a demo constant)


class LoopLocalLock:
    """Hands out the asyncio.Lock of the running event loop.

    One slot: the loop that asked last and its lock. When another loop asks,
    both are replaced, so a finished invocation's loop is let go as soon as the
    next invocation asks for the lock. This assumes one event loop runs at a
    time, as in a Lambda container, which serves one invocation at a time.
    """

    def __init__(self) -> None:
        # Not a dict of loops: an asyncio.Lock that has been waited on holds a
        # strong reference to its loop, so a lock stored as a WeakKeyDictionary
        # value keeps its own key alive, and no finished loop is ever collected.
        self._loop: weakref.ref | None = None  # weak, and compared with `is`, never id()
        self._lock: asyncio.Lock | None = None

    def get(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._loop is None or self._loop() is not loop:
            # A new invocation: a new lock, and the old one (with the old loop
            # it may reference) becomes garbage.
            self._lock = asyncio.Lock()
            self._loop = weakref.ref(loop)
        return self._lock


async def embed_remote(text: str) -> tuple[float, ...]:
    """Ask the embedding model for one vector (here: a short await, then a hash)."""
    await asyncio.sleep(0.001)  # pragma: no mutate (a sleep that plays the model's network call)
    digest = hashlib.sha256(text.encode()).digest()
    return tuple(b / 255 for b in digest[:DIMENSIONS])  # pragma: no mutate (the stand-in embedding's arithmetic)


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
            while len(_vectors) > MAX_CACHED:  # pragma: no mutate (the stand-in cache's eviction: no lesson is about its size)
                del _vectors[next(iter(_vectors))]
    return vector


async def search(queries: list[str]) -> list[tuple[float, ...]]:
    return list(await asyncio.gather(*(embedding(q) for q in queries)))


def handler(event: dict, context=None) -> dict:
    """Entry point: event = {"queries": [text, ...]}; returns one vector per query."""
    vectors = asyncio.run(search(event["queries"]))
    return {"vectors": vectors, "cached": len(_vectors)}
