"""LG10: asyncio patched so that a loop runs inside itself (kata 12, nest_asyncio's `apply()`).

Unpatched, `asyncio.run()` and `run_until_complete()` refuse to start in a
thread whose loop is running. A package such as `nest_asyncio` (or any code)
replaces them, and the loop's `_run_once`, so that they do not: the nested run
then holds the outer loop's thread until it ends, and every other task of that
loop waits. The guard looks for replacements where it costs nothing: when each
event loop is made (the team's line that made it is the finding's line), and at
each test's end. A replacement is a function that no class of the loop's own
defines (`_patch_loop.<locals>.run_until_complete`), or an `asyncio.run` from
outside Python's library. Each replacement is reported once.
"""
from __future__ import annotations

import asyncio

from . import sites
from .findings import Collector, Finding

_RUNS = ("run_until_complete", "run_forever", "_run_once")


def _origin(fn) -> str:
    code = getattr(fn, "__code__", None)
    name = getattr(fn, "__module__", None) or "?"
    if code is not None:
        return f"{sites.show((code.co_filename, code.co_firstlineno, getattr(fn, '__qualname__', code.co_name)))}"
    return f"{name}.{getattr(fn, '__qualname__', '?')}"


class NestedLoops:
    def __init__(self, collector: Collector):
        self.collector = collector
        self.run = None
        self.seen: set[int] = set()  # id of each replacement reported

    def install(self) -> None:
        self.run = asyncio.run

    def on_new_loop(self, loop, _info=None) -> None:
        self.collector.safely(self._check, type(loop), lambda: sites.made_at(3))

    def end_of_test(self) -> None:
        self.collector.safely(self._check, asyncio.SelectorEventLoop, list)

    def _check(self, cls: type, where) -> None:
        found = []
        run = asyncio.run
        if run is not self.run and not sites.is_pythons_own(getattr(getattr(run, "__code__", None), "co_filename", "")):
            found.append(("asyncio.run", run))
        classes = {k.__name__ for k in cls.__mro__}
        for name in _RUNS:
            fn = getattr(cls, name, None)
            qualname = getattr(fn, "__qualname__", "")
            if fn is not None and qualname.split(".")[0] not in classes:
                found.append((f"{cls.__name__}.{name}", fn))
        new = [(what, fn) for what, fn in found if id(fn) not in self.seen]
        if not new:
            return
        self.seen.update(id(fn) for _, fn in found)
        replaced = ", ".join(what for what, _ in new)
        self.collector.add(Finding(
            "LG10", f"{replaced} replaced so that an event loop runs again inside itself: a nested run holds the "
                    "outer loop's thread until it ends, and every other task of that loop waits (run the job as a "
                    "task of the running loop, or in a thread with asyncio.to_thread, instead of nesting loops)",
            where=where(), details=[f"{what} is now {_origin(fn)}" for what, fn in new]))
