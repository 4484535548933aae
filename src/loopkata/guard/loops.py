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
        self.judged: set[int] = set()  # loops (by number) LG02 has looked for a holder of
        self.unheld: set[int] = set()  # of those, the ones no global holds
        self.reported: set[str] = set()  # the globals (module, name) LG02 has reported holding loops

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
                        weakref.ref(loop, lambda _ref, n=number: self._gone(n)))
        self.infos[number] = info
        loop._loopkata_info = info  # on the loop itself: a collected cycle loses its weak references first

    def _gone(self, number: int) -> None:
        self.infos.pop(number, None)
        self.judged.discard(number)
        self.unheld.discard(number)

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

    def _alive(self) -> list:
        """(info, loop) of each loop made by a test that is alive and not running, oldest first (but those
        found held by no global: a failed test's traceback, a thread)."""
        return [(i, loop) for i in sorted(self.infos.values(), key=lambda i: i.number)
                if i.test and i.number not in self.unheld and (loop := i.ref()) is not None
                and getattr(loop, "_thread_id", None) is None]

    def kept_alive(self, test: str, allowed: int) -> list[Finding]:
        """LG02: after `test`, a global that holds more than `allowed` event loops made by tests (this one and
        every earlier one), none running: a leak of one loop per test is found at the test that leaves the
        second loop alive. Said once per global.

        Costs nothing when the loops this test made are gone by the time it ends (freed as their last
        reference went). When one is still alive, most often held only by the test's own garbage (an async
        generator in a reference cycle keeps its loop's finalizer hook), the young generations are collected
        first; the whole heap only when more than `allowed` loops are alive still (a global could hold them),
        and the walk from the modules' globals only when that many are alive after it and one was not looked
        at yet."""
        if not any(i.test == test for i in self.infos.values()):
            return []
        for generation in (0, 1):  # the young first: a test's own garbage is young, and costs little to find
            gc.collect(generation)
            if not any(i.test == test for i in self.infos.values()):
                return []
        if len(self._alive()) <= allowed:
            return []  # no global can hold more than allowed yet: the whole heap is not worth collecting
        gc.collect()
        alive = self._alive()
        fresh = {i.number for i, _ in alive if i.number not in self.judged}
        if not fresh or len(alive) <= allowed:
            return []
        self.judged |= fresh
        found = chains.holding_each([loop for _, loop in alive])
        groups: dict[str, list] = {}
        for info, loop in sorted(alive, key=lambda pair: pair[0].number):
            held = found.get(id(loop))
            if held is not None:
                groups.setdefault(held.holder, []).append((info, held))
            else:  # held by nothing that outlives the test (a traceback's frames, a thread)
                self.unheld.add(info.number)
        del alive, found
        out = []
        for holder, members in groups.items():
            if len(members) <= allowed or holder in self.reported or not fresh & {i.number for i, _ in members}:
                continue
            self.reported.add(holder)
            info, held = members[0]  # the oldest: the newest `allowed` may be a cache's last loop
            mine = next((i for i, _ in reversed(members) if i.test == test), info)
            others = len(members) - allowed - 1
            earlier = sorted({i.test for i, _ in members if i.test != test})
            made_by = "this test" + (f" and {len(earlier)} earlier test{'s' if len(earlier) > 1 else ''}"
                                     if earlier else "")
            out.append(Finding(
                "LG02",
                f"{len(members)} event loops made by {made_by} are still alive after it, held by one global "
                f"({allowed} allowed: a cache may keep the last one); event loop #{info.number}"
                + (f" (made in {info.test})" if info.test != test else "")
                + (f" and {others} more are" if others > 0 else " is") + f" held by {', '.join(held.chain[:2])}",
                where=[f"holding it: made at {m}" for m in held.made] + mine.made_at
                + ([f"event loop #{info.number} made at {m}" for m in info.made_at[:1]] if info is not mine else []),
                details=["held by:"] + [f"  {step}" for step in held.chain], test=test))
        return out
