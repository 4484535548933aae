"""Attributes the guard replaces, each put back as it was when the guard is removed."""
from __future__ import annotations

_MISSING = object()


class Patches:
    def __init__(self) -> None:
        self._undo: list[tuple[object, str, object]] = []

    def replace(self, owner: object, name: str, make) -> None:
        """Set `owner.name` to `make(original)`; `remove()` restores the original."""
        original = owner.__dict__.get(name, _MISSING) if isinstance(owner, type) else getattr(owner, name, _MISSING)
        current = getattr(owner, name, None) if original is _MISSING else original
        setattr(owner, name, make(current))
        self._undo.append((owner, name, original))

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
