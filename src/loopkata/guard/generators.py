"""LG08: a timeout that cancelled a step of an async generator, which ends the generator.

`asyncio.wait_for(anext(stream), timeout)` runs the step in a task and cancels
it when the time is up; the cancellation is thrown into the generator at its
`await`, and a generator that does not catch it is closed for good: the next
`anext` says StopAsyncIteration, and the stream ends early with no error. The
guard looks only at wait_for calls whose awaitable is a generator's step, and
reports one when the same generator, closed by that timeout, is stepped again
through wait_for (kata 09's keepalive loop): a timeout that ends the stream on
purpose (an operator whose TimeoutError is the end, `async for` left by the
exception) never steps it again, and is no finding.
"""
from __future__ import annotations

import asyncio
import gc
import types
import weakref
from asyncio import tasks

from . import sites
from .findings import Collector, Finding
from .patches import Patches

STEPS = ("async_generator_asend", "async_generator_athrow", "anext_awaitable")


def _generator_of(step) -> types.AsyncGeneratorType | None:
    """The async generator a step (asend, athrow, anext's awaitable) belongs to, from the step's references."""
    seen = [step]
    for _ in range(2):
        seen = [r for obj in seen for r in gc.get_referents(obj)]
        for obj in seen:
            if isinstance(obj, types.AsyncGeneratorType):
                return obj
    return None


class GeneratorSteps:
    def __init__(self, collector: Collector, patches: Patches):
        self.collector, self.patches = collector, patches
        self.cut: dict[int, tuple[weakref.ref, list[str], float]] = {}  # generators a timeout cancelled a step of

    def install(self) -> None:
        self.patches.replace(tasks, "wait_for", self._wait_for)
        self.patches.replace(asyncio, "wait_for", lambda _original: tasks.wait_for)

    def _wait_for(self, original):
        collector, cut = self.collector, self.cut

        def wait_for(fut, timeout, *args, **kwargs):
            if type(fut).__name__ not in STEPS:
                return original(fut, timeout, *args, **kwargs)
            gen = _generator_of(fut)
            earlier = cut.pop(id(gen), None) if gen is not None else None
            if earlier is not None and earlier[0]() is gen and gen.ag_frame is None:  # closed by that timeout
                collector.safely(collector.add, Finding(
                    "LG08",
                    f"wait_for's timeout ({earlier[2]:g} s) cancelled a step of an async generator, and the "
                    "generator is stepped again: the cancellation was thrown into the generator and closed "
                    "it, so this step ends the stream (StopAsyncIteration) with no error; wait on the pending "
                    "step again instead (asyncio.wait, or asyncio.shield around one task kept across turns)",
                    where=earlier[1] + [f"stepped again at {w}" for w in sites.made_at(1)[:1]]))
            where = sites.made_at(1)

            async def step():
                try:
                    return await original(fut, timeout, *args, **kwargs)
                except TimeoutError:
                    if gen is not None:
                        collector.safely(remember, gen, where, timeout)
                    raise
            return step()

        def remember(gen, where, timeout):
            key = id(gen)
            cut[key] = (weakref.ref(gen, lambda _ref: cut.pop(key, None)), where, timeout)
        return wait_for
