"""Every event loop made while the guard watches: a number, the line that made it, the test it was made in.

Also finds LG07 for a loop collected without being closed, and LG02 for the
loops a test leaves alive (through `chains`, which says what holds each).
"""
from __future__ import annotations

import gc
import sys
import weakref
from asyncio import base_events, selector_events
from dataclasses import dataclass

from . import chains, sites
from .findings import Collector, Finding
from .patches import Patches

ORIGIN_DEPTH = 6  # frames kept of where each coroutine was made (sys.set_coroutine_origin_tracking_depth)


@dataclass
class LoopInfo:
    number: int
    made_at: list[str]
    test: str  # "" when made outside a test's own code (a fixture wider than one test)
    ref: weakref.ref


class Loops:
    def __init__(self, collector: Collector, patches: Patches):
        self.collector, self.patches = collector, patches
        self.count = 0
        self.infos: dict[int, LoopInfo] = {}  # number -> info, while the loop is alive
        self.charging = True  # False while a fixture wider than one test runs
        self.on_new: list = []  # callables(loop, info) for each selector loop, once its selector is set

    def install(self) -> None:
        sys.set_coroutine_origin_tracking_depth(ORIGIN_DEPTH)
        loops = self

        def init(original):
            def __init__(self, *args, **kwargs):
                original(self, *args, **kwargs)
                loops._register(self)
            return __init__

        def delete(original):
            def describe(self):
                if not self.is_closed() and not self.is_running():
                    info = loops.info(self)
                    loops.collector.add(Finding(
                        "LG07", f"{loops.label(self)} was collected without being closed: its selector and "
                                "its default executor's threads were never released",
                        where=info.made_at if info else [], test=info.test if info else ""))

            def __del__(self, *args, **kwargs):
                loops.collector.safely(describe, self)
                return original(self, *args, **kwargs)
            return __del__

        def selector_init(original):
            def __init__(self, *args, **kwargs):
                original(self, *args, **kwargs)  # calls BaseEventLoop.__init__ (registered), then sets the selector
                info = loops.info(self)
                if info is not None:
                    for hook in loops.on_new:
                        hook(self, info)
            return __init__

        self.patches.replace(base_events.BaseEventLoop, "__init__", init)
        self.patches.replace(selector_events.BaseSelectorEventLoop, "__init__", selector_init)
        self.patches.replace(base_events.BaseEventLoop, "__del__", delete)

    def _register(self, loop) -> None:
        if sys.get_coroutine_origin_tracking_depth() < ORIGIN_DEPTH:
            sys.set_coroutine_origin_tracking_depth(ORIGIN_DEPTH)  # this thread's coroutines too
        self.count += 1
        number = self.count
        info = LoopInfo(number, sites.made_at(3, pythons_own=False), self.collector.current if self.charging else "",
                        weakref.ref(loop, lambda _ref, n=number: self.infos.pop(n, None)))
        self.infos[number] = info
        loop._loopkata_info = info  # on the loop itself: a collected cycle loses its weak references first

    def info(self, loop) -> LoopInfo | None:
        return getattr(loop, "_loopkata_info", None)

    def label(self, loop, info: LoopInfo | None = None) -> str:
        """'event loop #3 (closed, made at file:line in f)'; `loop` may be None (gone) when `info` is given.
        Reads the loop's own state (its attributes, never its methods, which a test may count or mock)."""
        info = info or (self.info(loop) if loop is not None else None)
        if info is None:
            return "an event loop made before the guard started"
        if loop is None:
            state = "gone"
        else:
            state = "closed" if getattr(loop, "_closed", False) else \
                "running" if getattr(loop, "_thread_id", None) is not None else "not running"
        where = f", made at {info.made_at[0]}" if info.made_at else ""
        return f"event loop #{info.number} ({state}{where})"

    def kept_alive(self, test: str, allowed: int) -> list[Finding]:
        """LG02: the loops `test` made that are alive after it, if more than `allowed`."""
        if not any(i.test == test for i in self.infos.values()):
            return []
        gc.collect()
        alive = [(i, i.ref()) for i in list(self.infos.values()) if i.test == test and i.ref() is not None]
        alive = [(i, loop) for i, loop in alive if getattr(loop, "_thread_id", None) is None]  # not running
        if len(alive) <= allowed:
            return []
        held = []
        for info, loop in alive[:-allowed or None]:  # the newest `allowed` may be a cache's last loop
            chain, made = chains.holding(loop)
            if chain:
                held.append((info, chain, made))
        del alive
        if not held:
            return []  # held by nothing that outlives the test (a traceback's frames, a running thread)
        info, chain, made = held[0]
        others = len(held) - 1
        return [Finding(
            "LG02",
            f"{len(held) + allowed} event loops made by this test are still alive after it "
            f"({allowed} allowed: a cache may keep the last one); event loop #{info.number}"
            + (f" and {others} more are" if others else " is") + f" held by {', '.join(chain[:2])}",
            where=[f"holding it: made at {m}" for m in made] + info.made_at,
            details=["held by:"] + [f"  {step}" for step in chain], test=test)]

