"""LG07 for aiohttp: a ClientSession or connector collected without being closed, with the line that made it.

aiohttp warns of it with a ResourceWarning that names no line (unless the
loop runs in debug mode), from wherever the garbage collector happened to run.
The guard remembers the line that made each session and connector, and looks
at their state when they are collected. (An event loop's own case is in `loops`.)
"""
from __future__ import annotations

from . import sites
from .findings import Collector, Finding
from .patches import Patches


class Unclosed:
    def __init__(self, collector: Collector, patches: Patches):
        self.collector, self.patches = collector, patches
        self.made: dict[int, tuple[list[str], str]] = {}  # id -> (made at, test), until collected

    def install(self) -> None:
        try:
            import aiohttp
        except ImportError:
            return
        for cls, what, is_open in (
            (aiohttp.ClientSession, "an aiohttp ClientSession", lambda s: not s.closed),
            (aiohttp.BaseConnector, "an aiohttp connector", lambda c: not c.closed and bool(getattr(c, "_conns", None))),
        ):
            self.patches.replace(cls, "__init__", self._remember)
            self.patches.replace(cls, "__del__", lambda original, w=what, o=is_open: self._collected(original, w, o))

    def made_at(self, obj) -> list[str]:
        return self.made.get(id(obj), ([], ""))[0]

    def _remember(self, original):
        made, collector = self.made, self.collector

        def __init__(obj, *args, **kwargs):
            original(obj, *args, **kwargs)
            made[id(obj)] = (sites.made_at(1), collector.current)
        return __init__

    def _collected(self, original, what: str, is_open):
        made, collector = self.made, self.collector

        def __del__(obj, *args, **kwargs):
            collector.safely(describe, obj)
            return original(obj, *args, **kwargs)

        def describe(obj):
            where, test = made.pop(id(obj), ([], ""))
            try:
                still_open = is_open(obj)
            except Exception:  # noqa: BLE001 - half-built by a failed __init__: nothing to close
                still_open = False
            if still_open:
                collector.add(Finding(
                    "LG07", f"{what} made at {where[0] if where else 'a line the guard did not see'} was collected "
                            "without being closed: its sockets stayed open until the garbage collector found it "
                            "(close it with `async with` or `await close()` while its loop runs)",
                    where=where, test=test))
        return __del__
