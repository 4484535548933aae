"""LG05: a thread asking for a threading.Lock that it holds itself.

A plain Lock is not reentrant: the second acquire waits for a release that
only the waiting thread could make, and the thread (and every other thread or
process waiting behind it) stops for good, with nothing logged. The guard gives
the locks made by code outside Python's own library an owner; a blocking,
untimed acquire by the owner is reported, and raises `LockWaitsOnItself`
rather than hang the test run (a Lock used as a signal between threads is the
one correct use this refuses: use an Event or a Semaphore for that).
"""
from __future__ import annotations

import _thread
import sys
import threading

from . import sites
from .findings import Collector, Finding
from .patches import Patches


class LockWaitsOnItself(RuntimeError):
    """Raised by a guarded Lock whose owner asks for it again without a timeout."""


class OwnedLock:
    """A threading.Lock that knows which thread holds it."""

    __slots__ = ("__weakref__", "_lock", "_made_at", "_owner", "_report", "_taken_at")

    def __init__(self, made_at: list[str], report):
        self._lock, self._owner, self._made_at, self._taken_at, self._report = (
            _thread.allocate_lock(), None, made_at, None, report)  # _taken_at: (file, line, function)

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        me = _thread.get_ident()
        if blocking and timeout < 0 and self._owner == me:
            got = self._lock.acquire(False)  # released meanwhile by another thread: then it is free
            if not got:
                self._report(self)  # made safe by ThreadLocks
                raise LockWaitsOnItself(
                    "this thread already holds this threading.Lock (made at "
                    f"{self._made_at[0] if self._made_at else '?'}, taken at "
                    f"{(self.taken_at() or ['?'])[0]}): waiting for it would never end "
                    "(loopkata guard, LG05)")
        else:
            got = self._lock.acquire(blocking, timeout)
        if got:
            self._owner = me
            f = sys._getframe(1)  # cheap: only the caller, formatted when a finding needs it
            self._taken_at = (f.f_code.co_filename, f.f_lineno, f.f_code.co_name)
        return got

    def taken_at(self) -> list[str]:
        """Where its holder took it, as a finding shows a line (nothing when it was never taken)."""
        return [sites.show(self._taken_at)] if self._taken_at else []

    def release(self) -> None:
        self._lock.release()
        self._owner = None

    def locked(self) -> bool:
        return self._lock.locked()

    __enter__ = acquire

    def __exit__(self, *exc) -> None:
        self.release()

    def _at_fork_reinit(self) -> None:
        self._lock._at_fork_reinit()
        self._owner = None

    def __repr__(self) -> str:
        return f"<{'locked' if self.locked() else 'unlocked'} threading.Lock, watched by loopkata guard>"


class ThreadLocks:
    def __init__(self, collector: Collector, patches: Patches):
        self.collector, self.patches = collector, patches

    def install(self) -> None:
        self.patches.replace(threading, "Lock", self._factory)

    def _factory(self, original):
        report = self._report

        def Lock():
            if sites.is_pythons_own(sites.caller(1)):  # the guard's own frames passed over: what made the lock
                return original()
            return OwnedLock(sites.made_at(1, limit=2), report)
        return Lock

    def _report(self, lock: OwnedLock) -> None:
        self.collector.safely(self._describe, lock)

    def _describe(self, lock: OwnedLock) -> None:
        asked = sites.made_at(1)  # the guard's own frames are left out: the first is the line that asked again
        self.collector.add(Finding(
            "LG05",
            f"a thread asks for a threading.Lock it holds itself (taken at "
            f"{(lock.taken_at() or ['?'])[0]}): the wait can never end, and every thread or process "
            "waiting behind it stops too; make the inner call not take the lock again, or use an RLock",
            where=asked[:1] + [f"taken first at {t}" for t in lock.taken_at()],
            details=[f"asked again at {a}" for a in asked] + [f"the lock was made at {m}" for m in lock._made_at]))
