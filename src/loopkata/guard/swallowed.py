"""LG06, the other half: an exception returned by gather(return_exceptions=True), then logged without its traceback.

The guard remembers the exceptions a gather returned, and watches every log
record made (Logger.makeRecord, which every level's method reaches through
Logger._log once the caller's file, line and function are found: the guard's
frame is never among the frames that lookup walks, so a record says the
caller's line, guarded as plain). A call that names
one of them (the exception itself, its type, its type's name or its message
among the arguments) without attaching it as exc_info is the finding: the log
says that something failed and drops where. A call that attaches it settles it.
An exception that no log call names is not reported: a caller may re-raise it,
count it or answer with it, and the guard cannot see which. Only what names an
exception is kept (its id, type, text, where it was raised), never the exception
itself: its traceback's frames would keep a test's objects alive.
"""
from __future__ import annotations

import asyncio
import logging
import sys
import threading
from asyncio import tasks
from collections import OrderedDict
from dataclasses import dataclass

from . import sites
from .findings import Collector, Finding
from .patches import Patches

KEPT = 256  # exceptions remembered at most, the newest


@dataclass(frozen=True)
class Gathered:
    """An exception gather(return_exceptions=True) handed back, as far as a log call can name it."""
    kind: type
    text: str
    gathered_at: str
    raised_at: tuple[str, ...]

    def named_by(self, value) -> bool:
        if value is self.kind:
            return True
        if isinstance(value, str):
            return value == self.kind.__name__ or (bool(self.text) and value == self.text)
        return False

    def mentioned_in(self, msg) -> bool:
        """A message formatted before the call (an f-string) that names the exception."""
        return isinstance(msg, str) and (self.kind.__name__ in msg or (len(self.text) > 3 and self.text in msg))


class Swallowed:
    def __init__(self, collector: Collector, patches: Patches):
        self.collector, self.patches = collector, patches
        self.watched: OrderedDict[int, Gathered] = OrderedDict()  # id(exception) -> what names it
        self.settled: OrderedDict[int, type] = OrderedDict()  # exceptions already logged with their traceback
        self._lock = threading.Lock()

    def install(self) -> None:
        self.patches.replace(tasks, "gather", self._gather)
        self.patches.replace(asyncio, "gather", lambda _original: tasks.gather)
        self.patches.replace(logging.Logger, "makeRecord", self._record)

    def forget(self) -> None:
        with self._lock:
            self.watched.clear()
            self.settled.clear()

    def _gather(self, original):
        watch, collector = self._watch, self.collector

        def gather(*aws, return_exceptions=False, **kwargs):
            future = original(*aws, return_exceptions=return_exceptions, **kwargs)
            if return_exceptions:
                where = sites.made_at(1)
                future.add_done_callback(lambda f: collector.safely(watch, f, where[0] if where else ""))
            return future
        return gather

    def _watch(self, future, where: str) -> None:
        if future.cancelled() or future.exception() is not None:
            return
        for outcome in future.result():
            if isinstance(outcome, BaseException):
                if self.settled.get(id(outcome)) is type(outcome):
                    continue  # logged with its traceback where it was caught, before gather handed it back
                seen = Gathered(type(outcome), str(outcome), where, tuple(sites.raised_at(outcome)))
                with self._lock:
                    self.watched[id(outcome)] = seen
                    while len(self.watched) > KEPT:
                        self.watched.popitem(last=False)

    def _record(self, original):
        guard = self

        def makeRecord(logger, name, level, fn, lno, msg, args, exc_info, *rest, **kwargs):
            if exc_info or guard.watched:
                guard.collector.safely(guard._seen, msg, args, exc_info)
            return original(logger, name, level, fn, lno, msg, args, exc_info, *rest, **kwargs)
        return makeRecord

    def _seen(self, msg, args, exc_info) -> None:
        attached = exc_info
        if attached is True:
            attached = sys.exc_info()[1]
        elif isinstance(attached, tuple):
            attached = attached[1] if len(attached) > 1 else None
        with self._lock:
            if isinstance(attached, BaseException):
                self.settled[id(attached)] = type(attached)
                while len(self.settled) > KEPT:
                    self.settled.popitem(last=False)
                if id(attached) in self.watched and self.watched[id(attached)].kind is type(attached):
                    del self.watched[id(attached)]
                return
            values = args.values() if isinstance(args, dict) else (args if isinstance(args, tuple) else (args,))
            named = None
            for key, seen in self.watched.items():
                if any(id(v) == key and type(v) is seen.kind or seen.named_by(v) for v in values) \
                        or (not values and seen.mentioned_in(msg)):
                    named = key, seen
                    break
            if named is None:
                return
            del self.watched[named[0]]
        seen = named[1]
        name = seen.kind.__name__
        self.collector.add(Finding(
            "LG06",
            f"{name} returned by gather(return_exceptions=True) at {seen.gathered_at or 'a gather'} is logged "
            f"here without its traceback: the log says {name} and drops where it was raised "
            "(pass exc_info=the exception)",
            where=sites.made_at(3), details=[f"gathered at {seen.gathered_at}", *seen.raised_at]))

