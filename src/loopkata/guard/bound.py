"""LG01: a loop-bound object used on a second event loop, caught at the use, even one that did not wait.

asyncio binds a Lock, Semaphore, Event, Condition, Queue or Barrier to a loop
only when a coroutine first has to wait on it, and raises only when a later
wait happens on another loop: a warm invocation whose steps never contend
passes. The guard remembers the loop of each object's first use instead, and
the line that made it. Socket transports and aiohttp sessions carry their loop
from the start; a use from another loop's thread is the same bug.
"""
from __future__ import annotations

import weakref
from asyncio import events, locks, queues, selector_events

from . import sites
from .findings import Collector, Finding
from .patches import Patches

USES = {  # the methods that use an object on the running loop
    locks.Lock: ("acquire", "release"),
    locks.Event: ("wait", "set", "clear"),
    locks.Condition: ("wait", "wait_for", "notify", "notify_all"),
    locks.Semaphore: ("acquire", "release"),
    queues.Queue: ("put", "get", "put_nowait", "get_nowait", "join", "task_done"),
}
if hasattr(locks, "Barrier"):
    USES[locks.Barrier] = ("wait", "reset", "abort")


class BoundObjects:
    def __init__(self, collector: Collector, patches: Patches, describe):
        self.collector, self.patches, self.describe = collector, patches, describe
        self._reported: set[int] = set()

    def install(self) -> None:
        for cls, methods in USES.items():
            self.patches.replace(cls, "__init__", self._remember_site)
            for name in methods:
                self.patches.replace(cls, name, self._checked)
        transport = selector_events._SelectorTransport
        self.patches.replace(transport, "__init__", self._remember_transport)
        for cls, name in ((selector_events._SelectorSocketTransport, "write"), (transport, "close")):
            self.patches.replace(cls, name, self._checked_transport)
        try:
            import aiohttp
        except ImportError:
            return
        self.patches.replace(aiohttp.ClientSession, "_request", self._checked_session)

    def _remember_site(self, original):
        def __init__(obj, *args, **kwargs):
            original(obj, *args, **kwargs)
            obj.__dict__["_loopkata_site"] = sites.made_at(1)
        return __init__

    def _checked(self, original):
        guard = self

        def use(obj, *args, **kwargs):
            loop = events._get_running_loop()
            if loop is not None:
                first = obj.__dict__.get("_loopkata_loop")
                if first is None:
                    obj.__dict__["_loopkata_loop"] = (weakref.ref(loop), getattr(loop, "_loopkata_info", None))
                elif first[0]() is not loop:
                    guard.collector.safely(guard._report, obj, first, loop, original.__name__)
            return original(obj, *args, **kwargs)
        return use

    def _report(self, obj, first, now, method: str) -> None:
        if id(obj) in self._reported:
            return
        self._reported.add(id(obj))
        if _weakrefable(obj):
            weakref.finalize(obj, self._reported.discard, id(obj))  # a later object may get this id
        kind = type(obj).__name__
        ref, info = first
        was = self.describe(ref(), info)
        made = obj.__dict__.get("_loopkata_site") or []
        self._add(f"asyncio.{kind} made at {made[0] if made else 'a line before the guard started'} was first "
                  f"used on {was}, and now {method}() is called on it on {self.describe(now)}", made, 3)

    def _add(self, message: str, made: list[str], skip: int) -> None:
        used = sites.made_at(skip)
        self.collector.add(Finding(  # where: the line that made it and the team's lines that led there
            "LG01", message, where=made + [f"used again at {u}" for u in used[:1]],
            details=[f"used from {u}" for u in used[1:]]))

    def _remember_transport(self, original):
        def __init__(transport, *args, **kwargs):
            original(transport, *args, **kwargs)
            transport._loopkata_site = sites.made_at(1)
        return __init__

    def _checked_transport(self, original):
        def message(transport, owner, now):
            made = getattr(transport, "_loopkata_site", [])
            return (f"a socket transport opened at {made[0] if made else 'a line the guard did not see'} on "
                    f"{self.describe(owner)} is used ({original.__name__}) from {self.describe(now)}: "
                    "a connection belongs to the loop that opened it"), made
        return self._owned_by_one_loop(original, message)

    def _checked_session(self, original):
        def message(session, owner, now):
            return (f"an aiohttp ClientSession made on {self.describe(owner)} sends a request from "
                    f"{self.describe(now)}: a session and its pooled connections belong to the loop they were "
                    "made on"), self.sessions_made_at(session)
        return self._owned_by_one_loop(original, message)

    def _owned_by_one_loop(self, original, message):
        """`original`, checked: a call from a loop other than the object's own `_loop` is LG01, said by
        `message(obj, its loop, the running loop)` -> (text, the lines that made it)."""
        guard = self

        def use(obj, *args, **kwargs):
            loop = events._get_running_loop()
            owner = getattr(obj, "_loop", None)
            if loop is not None and owner is not None and loop is not owner and id(obj) not in guard._reported:
                guard._reported.add(id(obj))
                guard.collector.safely(lambda: guard._add(*message(obj, owner, loop), 4))
            return original(obj, *args, **kwargs)
        return use

    sessions_made_at = staticmethod(lambda session: [])  # set by the unclosed-resource watcher when it runs


def _weakrefable(obj) -> bool:
    try:
        weakref.ref(obj)
    except TypeError:
        return False
    return True

