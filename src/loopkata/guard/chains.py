"""What keeps an object alive: the chain of references from a module's global to it.

A breadth-first walk down from the modules' globals (the team's modules first,
then every other) finds the nearest path to the object. Frames, generators and
coroutines are not walked into: what a running function holds is not what LG02
is about, and on Python 3.12 reading the references of an executing frame can
read past its stack and never return. Nor are module objects (each module's
globals are a start of the walk already).
"""
from __future__ import annotations

import gc
import itertools
import sys
import threading
import types
import weakref
from dataclasses import dataclass

from . import sites

MAX_DEPTH = 14
# Modules are where the walk starts, never a step of it: on Python 3.12 the references of the _asyncio module
# object include freed iterators of its freelist, and reading them can spin or abort.
NOT_WALKED = (types.FrameType, types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType, types.ModuleType)


def holding(target) -> tuple[list[str], list[str]]:
    """('module m', 'global `name`', then '.attribute', '[key]' ..., down to `target`), and where the objects on
    the way were made (for those the guard saw made); ([], []) if no module holds it."""
    found = holding_each([target]).get(id(target))
    return (found.chain, found.made) if found else ([], [])


@dataclass
class Held:
    chain: list[str]  # as `holding` says it
    made: list[str]  # where the objects on the way were made
    holder: str  # the module and global the chain starts from: "module m, global `name`"


def holding_each(targets: list) -> dict[int, Held]:
    """`holding` for each of `targets` at once, by id (one walk for them all); a target no module holds is
    left out. The team's modules are walked first, then every module for the targets not found yet."""
    modules = [(name, m) for name, m in list(sys.modules.items()) if isinstance(m, types.ModuleType)]
    teams = [(n, m) for n, m in modules if sites.is_teams(getattr(m, "__file__", None) or "")]
    wanted = {id(t): t for t in targets}
    out: dict[int, Held] = {}
    came_from: dict[int, object] = {}  # shared: the second walk passes over what the first went through
    for group in (teams, modules):
        if not wanted:
            break
        for key, path in _search(wanted, group, came_from).items():
            del wanted[key]
            made = [site for obj in path[1:] for site in _made_at(obj)[:1]]
            chain = _describe(path, next(n for n, m in group if vars(m) is path[0]))
            out[key] = Held(chain, made, ", ".join(chain[:2]).split("  (")[0] + _per_thread(path))
    return out


def _per_thread(path: list) -> str:
    """'' for a target a global holds for every thread; for one held through a threading.local, which
    thread's storage holds it: each thread's own keeping its last loop is one cache per thread, not a leak."""
    for i, obj in enumerate(path):
        if isinstance(obj, threading.local):
            for inner, after in zip(path[i + 1:], path[i + 2:]):
                if not isinstance(after, (dict, list, tuple, set)):
                    return f", one thread's storage #{id(inner):x}"
    return ""


def _made_at(obj) -> list[str]:
    attrs = getattr(obj, "__dict__", None)
    site = attrs.get("_loopkata_site") if isinstance(attrs, dict) else None
    return list(site) if isinstance(site, list) else []


def _search(targets: dict[int, object], modules, came_from: dict[int, object] | None = None) -> dict[int, list]:
    """The nearest path from a module's globals to each of `targets` (by id), those found within MAX_DEPTH;
    a target is an end, never a step of another's path. An object already in `came_from` (reached by an
    earlier walk, whose targets it did not lead to) is not walked again."""
    came_from = {} if came_from is None else came_from
    get_referents, is_tracked = gc.get_referents, gc.is_tracked
    frontier = []
    found: dict[int, list] = {}
    for _, m in modules:
        d = vars(m)
        if id(d) not in came_from:
            came_from[id(d)] = None
            frontier.append(d)
    for _ in range(MAX_DEPTH):
        reached = []
        add = reached.append
        for obj in frontier:
            for ref in get_referents(obj):
                key = id(ref)
                if key in came_from or not is_tracked(ref):
                    continue
                if key in targets:
                    if key not in found and targets[key] is ref:
                        path = [ref, obj]
                        while came_from[id(path[-1])] is not None:
                            path.append(came_from[id(path[-1])])
                        found[key] = path[::-1]
                        if len(found) == len(targets):
                            return found
                    continue
                if isinstance(ref, NOT_WALKED):
                    continue
                came_from[key] = obj
                add(ref)
        if not reached:
            break
        frontier = reached
    return found


def _describe(path: list, module: str) -> list[str]:
    steps, owner = [f"module {module}"], None
    for holder, held in itertools.pairwise(path):
        step = _step(holder, held, owner)
        if step is not None:
            steps.append(step)
        owner = holder
    if not steps[-1].endswith(f"({_name(path[-1])})"):
        steps.append(f"-> {_name(path[-1])}")
    return steps


def _step(holder, held, owner) -> str | None:
    if isinstance(holder, dict):
        is_attrs = owner is not None and getattr(owner, "__dict__", None) is holder
        for key, value in holder.items():
            if value is held:
                if isinstance(key, str) and (is_attrs or owner is None or isinstance(owner, types.ModuleType)):
                    return f".{key}  ({_said(held)})" if owner is not None else f"global `{key}`  ({_said(held)})"
                return f"[{_key(key)}]  ({_said(held)})"
        if any(key is held for key in holder):
            return f"a key of it  ({_name(held)})"
        return f"[a key]  ({_name(held)})"
    if isinstance(holder, list | tuple):
        for i, value in enumerate(holder):
            if value is held:
                return f"[{i}]  ({_name(held)})"
    attrs = getattr(holder, "__dict__", None)
    if attrs is held:
        return None  # the object's own attributes: named at the next step
    if isinstance(attrs, dict):  # attributes kept inline (Python 3.11+): the object refers to them directly
        for key, value in attrs.items():
            if value is held:
                return f".{key}  ({_said(held)})"
    if isinstance(holder, types.CellType):
        return "(a closure's cell)"
    if isinstance(holder, types.FunctionType):
        return f"(function {holder.__qualname__})"
    for slot in getattr(type(holder), "__slots__", ()):
        if getattr(holder, slot, None) is held:
            return f".{slot}  ({_name(held)})"
    return f"-> {_name(holder)}"


def _said(obj) -> str:
    """The object's type, and the line that made it when the guard saw it made."""
    made = _made_at(obj)
    return f"{_name(obj)}, made at {made[0]}" if made else _name(obj)


def _key(key) -> str:
    if isinstance(key, weakref.ref):
        return f"weak reference to {_name(key())}"
    text = repr(key)
    return text if len(text) <= 60 else text[:57] + "..."


def _name(obj) -> str:
    t = type(obj)
    return t.__name__ if t.__module__ in ("builtins", None) else f"{t.__module__}.{t.__qualname__}"
