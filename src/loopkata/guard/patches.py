"""Attributes the guard replaces, each put back as it was when the guard is removed.

A replacement looks like what it replaces to anything that asks: a library that
dispatches on `inspect.iscoroutinefunction(queue.put)`, reads a signature or a
name, or unwraps a decorated callable sees what it sees without the guard. A
coroutine function is replaced by a coroutine function (an `async def` that
awaits the guard's wrapper), and every replacement carries the original's name,
qualified name, module, doc string, attributes and signature. It has a
`__wrapped__` only where the original has one (then the same): `inspect.unwrap`
of a bound method gives that bound method, as it does unguarded, never the
function beneath it, which would be called without its `self`.
"""
from __future__ import annotations

import functools
import inspect
import types

_MISSING = object()


def looks_like(original, wrapper):
    """`wrapper`, made to look like `original` to introspection; `wrapper` itself when it is not a new
    function of the guard's (a replacement that is the original, or a guarded callable made already)."""
    if not isinstance(wrapper, types.FunctionType) or wrapper is original or getattr(wrapper, "_loopkata_face", False) \
            or not callable(original):
        return wrapper
    if isinstance(original, type):
        return _like_class(original, wrapper)
    if isinstance(original, types.BuiltinFunctionType):
        return _LikeBuiltin(original, wrapper)
    if inspect.iscoroutinefunction(original) and not inspect.iscoroutinefunction(wrapper):
        plain = wrapper

        async def wrapper(*args, **kwargs):
            return await plain(*args, **kwargs)
    functools.update_wrapper(wrapper, original)  # its __dict__ too: the original's own __wrapped__, if any
    if "__wrapped__" in getattr(original, "__dict__", {}):
        wrapper.__wrapped__ = original.__wrapped__
    else:
        del wrapper.__wrapped__
        try:
            wrapper.__signature__ = inspect.signature(original)
        except (TypeError, ValueError):  # a builtin with no signature to tell: none told guarded either
            pass
    wrapper._loopkata_face = True
    return wrapper


class _LikeBuiltin:
    """The replacement of a builtin function (threading.Lock on Python 3.11 and 3.12): called as the guard's
    wrapper, never bound as a method when a class keeps it as an attribute (a builtin is not, a function
    is: `lock_factory = threading.Lock` on a class stays callable with no argument), and as silent about
    its signature as the builtin is."""

    _loopkata_face = True

    def __init__(self, original, wrapper):
        self._original, self._call = original, wrapper
        for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
            if hasattr(original, attr):
                setattr(self, attr, getattr(original, attr))

    def __call__(self, *args, **kwargs):
        return self._call(*args, **kwargs)

    @property
    def __signature__(self):
        return inspect.signature(self._original)  # ValueError where the builtin tells none, as unguarded

    def __repr__(self) -> str:
        return repr(self._original)


def _like_class(original: type, wrapper):
    """The replacement of a class (threading.Lock is one from Python 3.13): calling it calls the guard's
    wrapper, and `isinstance(x, it)` holds for the original's instances and for what the wrapper made."""
    made: set[type] = set()

    class Meta(type):
        def __instancecheck__(cls, obj):
            return isinstance(obj, original) or type(obj) in made

        def __subclasscheck__(cls, sub):
            return issubclass(sub, original) or sub in made

    def __new__(cls, *args, **kwargs):
        obj = wrapper(*args, **kwargs)
        made.add(type(obj))
        return obj

    like = Meta(original.__name__, (), {"__new__": __new__, "_loopkata_face": True, "__doc__": original.__doc__,
                                        "__module__": original.__module__})
    like.__qualname__ = original.__qualname__
    Meta.__name__ = Meta.__qualname__ = type(original).__name__
    try:
        like.__signature__ = inspect.signature(original)
    except (TypeError, ValueError):
        pass
    return like


class Patches:
    def __init__(self) -> None:
        self._undo: list[tuple[object, str, object]] = []

    def replace(self, owner: object, name: str, make) -> None:
        """Set `owner.name` to `make(original)`, looking like the original (`looks_like`); `remove()` restores it."""
        original = owner.__dict__.get(name, _MISSING) if isinstance(owner, type) else getattr(owner, name, _MISSING)
        current = getattr(owner, name, None) if original is _MISSING else original
        setattr(owner, name, looks_like(current, make(current)))
        self._undo.append((owner, name, original))

    def replaced(self) -> list[tuple[object, str, object]]:
        """(owner, name, what it was) of every attribute replaced now, in the order they were."""
        return list(self._undo)

    def remove(self) -> None:
        for owner, name, original in reversed(self._undo):
            if original is _MISSING:
                try:
                    delattr(owner, name)
                except AttributeError:
                    pass
            else:
                setattr(owner, name, original)
        self._undo.clear()
