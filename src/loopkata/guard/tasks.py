"""LG03 and half of LG06: what asyncio says of a task only to a loop's exception handler, or not at all.

- A pending task the garbage collector destroys ("Task was destroyed but it is
  pending!"), and the pending tasks asyncio.run's shutdown cancels: LG03.
- A task or future whose exception nothing retrieved: LG06.

The line that made each task is its coroutine's origin, which Python records
once `sys.set_coroutine_origin_tracking_depth` is set (as asyncio's debug mode
does), so the guard needs no debug mode and no task factory.
"""
from __future__ import annotations

from asyncio import base_events, runners, tasks

from . import sites
from .findings import Collector, Finding
from .patches import Patches


def made_at(task) -> list[str]:
    """The team's lines that made `task`'s coroutine, or where it waits now."""
    coro = task.get_coro() if hasattr(task, "get_coro") else None
    origin = getattr(coro, "cr_origin", None)
    if origin:
        return [sites.show(f) for f in sites.ours(list(origin))]
    frame = getattr(coro, "cr_frame", None)
    if frame is not None:
        return [f"waiting at {sites.show(f)}" for f in sites.ours(sites.frames_of(frame))[:1]]
    return []


def _closes_a_generator(task) -> bool:
    """Is this the task asyncio itself makes to aclose() an async generator dropped before its end?"""
    coro = task.get_coro() if hasattr(task, "get_coro") else None
    return type(coro).__name__ == "async_generator_athrow"


def _name(task) -> str:
    coro = task.get_coro() if hasattr(task, "get_coro") else None
    return getattr(coro, "__qualname__", None) or (task.get_name() if hasattr(task, "get_name") else type(task).__name__)


class Tasks:
    def __init__(self, collector: Collector, patches: Patches):
        self.collector, self.patches = collector, patches

    def install(self) -> None:
        self.patches.replace(base_events.BaseEventLoop, "call_exception_handler", self._handler)
        self.patches.replace(runners, "_cancel_all_tasks", self._shutdown)

    def _handler(self, original):
        collector = self.collector

        def call_exception_handler(loop, context):
            collector.safely(describe, context)
            return original(loop, context)

        def describe(context):
            message = str(context.get("message", ""))
            task = context.get("task") or context.get("future")
            if message.startswith("Task was destroyed but it is pending") and task is not None \
                    and not _closes_a_generator(task):
                collector.add(Finding(
                    "LG03",
                    f"a pending task ({_name(task)}) was destroyed by the garbage collector: nothing held a "
                    "reference to it, so its work was dropped half-way, with no error",
                    where=made_at(task)))
            elif message.endswith("exception was never retrieved") and "exception" in context:
                exc = context["exception"]
                collector.add(Finding(
                    "LG06",
                    f"{type(exc).__name__}: {exc} raised in {_name(task) if task is not None else 'a future'} "
                    "was never retrieved: nothing awaited the task or asked for its result",
                    where=made_at(task) if isinstance(task, tasks.Task) else [],
                    details=sites.raised_at(exc)))
        return call_exception_handler

    def _shutdown(self, original):
        collector = self.collector

        def _cancel_all_tasks(loop):
            collector.safely(describe, loop)
            return original(loop)

        def describe(loop):
            pending = [t for t in tasks.all_tasks(loop) if not t.done() and not _closes_a_generator(t)]
            if pending:
                where = [w for t in pending for w in made_at(t)[:1]]
                collector.add(Finding(
                    "LG03",
                    f"asyncio.run's shutdown cancelled {len(pending)} pending task"
                    f"{'s' if len(pending) > 1 else ''} ({', '.join(sorted({_name(t) for t in pending})[:3])}): "
                    "the main coroutine returned before they finished, and nothing awaited them",
                    where=sorted(set(where))[:5]))  # all_tasks() is a set: no order to keep
        return _cancel_all_tasks

