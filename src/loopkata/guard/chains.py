"""What keeps an object alive: the chain of references from a module's global to it.

One pass over the garbage collector's objects builds a map from each object to
those that refer to it; a breadth-first walk from the object then finds the
nearest module global. Only a chain that starts at a module counts: an object
held by a frame (a failed test's traceback, a thread still running) is not
what LG02 is about.
"""
from __future__ import annotations

import gc
import itertools
import sys
import types
import weakref

MAX_DEPTH = 14


def holding(target) -> list[str]:
    """'module m, global `name`', then '.attribute', '[key]' ..., down to `target`; [] if no module holds it."""
    modules = {id(vars(m)): name for name, m in list(sys.modules.items()) if isinstance(m, types.ModuleType)}
    referrers: dict[int, list] = {}
    everything = gc.get_objects()
    for obj in everything:
        if type(obj) is types.FrameType:
            continue
        for ref in gc.get_referents(obj):
            referrers.setdefault(id(ref), []).append(obj)
    del everything
    came_from: dict[int, object] = {id(target): None}
    frontier, root = [target], None
    for _ in range(MAX_DEPTH):
        found = []
        for obj in frontier:
            for holder in referrers.get(id(obj), ()):
                if id(holder) in came_from or holder is frontier or holder is found:
                    continue
                came_from[id(holder)] = obj
                if id(holder) in modules:
                    root = holder
                    break
                found.append(holder)
            if root is not None:
                break
        if root is not None or not found:
            break
        frontier = found[:5000]
    if root is None:
        return []
    path = [root]
    while came_from[id(path[-1])] is not None:
        path.append(came_from[id(path[-1])])
    return _describe(path, modules[id(root)])


def _describe(path: list, module: str) -> list[str]:
    steps, owner = [f"module {module}"], None
    for holder, held in itertools.pairwise(path):
        step = _step(holder, held, owner)
        if step is not None:
            steps.append(step)
        owner = holder
    steps.append(f"-> {_name(path[-1])}")
    return steps


def _step(holder, held, owner) -> str | None:
    if isinstance(holder, dict):
        is_attrs = owner is not None and getattr(owner, "__dict__", None) is holder
        for key, value in holder.items():
            if value is held:
                if isinstance(key, str) and (is_attrs or owner is None or isinstance(owner, types.ModuleType)):
                    return f".{key}  ({_name(held)})" if owner is not None else f"global `{key}`  ({_name(held)})"
                return f"[{_key(key)}]  ({_name(held)})"
        return f"[a key]  ({_name(held)})"
    if isinstance(holder, list | tuple):
        for i, value in enumerate(holder):
            if value is held:
                return f"[{i}]  ({_name(held)})"
    if getattr(holder, "__dict__", None) is held:
        return None  # the object's own attributes: named at the next step
    if isinstance(holder, types.CellType):
        return "(a closure's cell)"
    if isinstance(holder, types.FunctionType):
        return f"(function {holder.__qualname__})"
    for slot in getattr(type(holder), "__slots__", ()):
        if getattr(holder, slot, None) is held:
            return f".{slot}  ({_name(held)})"
    return f"-> {_name(holder)}"


def _key(key) -> str:
    if isinstance(key, weakref.ref):
        return f"weak reference to {_name(key())}"
    text = repr(key)
    return text if len(text) <= 60 else text[:57] + "..."


def _name(obj) -> str:
    t = type(obj)
    return t.__name__ if t.__module__ in ("builtins", None) else f"{t.__module__}.{t.__qualname__}"
