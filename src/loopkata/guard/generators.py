"""LG08: a timeout that cancelled a step of an async generator, which ends the generator.

`asyncio.wait_for(anext(stream), timeout)` runs the step in a task and cancels
it when the time is up; the cancellation is thrown into the generator at its
`await`, and a generator that does not catch it is closed for good: the next
`anext` says StopAsyncIteration, and the stream ends early with no error. The
guard looks only at wait_for calls whose awaitable is a generator's step.
"""
from __future__ import annotations

import asyncio
from asyncio import tasks

from . import sites
from .findings import Collector, Finding
from .patches import Patches

STEPS = ("async_generator_asend", "async_generator_athrow", "anext_awaitable")


class GeneratorSteps:
    def __init__(self, collector: Collector, patches: Patches):
        self.collector, self.patches = collector, patches

    def install(self) -> None:
        self.patches.replace(tasks, "wait_for", self._wait_for)
        self.patches.replace(asyncio, "wait_for", lambda _original: tasks.wait_for)

    def _wait_for(self, original):
        collector = self.collector

        def wait_for(fut, timeout, *args, **kwargs):
            if type(fut).__name__ not in STEPS:
                return original(fut, timeout, *args, **kwargs)
            where = sites.made_at(1)

            async def step():
                try:
                    return await original(fut, timeout, *args, **kwargs)
                except TimeoutError:
                    collector.safely(collector.add, Finding(
                        "LG08",
                        f"wait_for's timeout ({timeout:g} s) cancelled a step of an async generator: the "
                        "cancellation is thrown into the generator and closes it, so the next step ends the "
                        "stream (StopAsyncIteration) with no error; wait on the pending step again instead "
                        "(asyncio.wait, or asyncio.shield around one task kept across turns)",
                        where=where))
                    raise
            return step()
        return wait_for
