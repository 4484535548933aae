"""The lock of the running event loop: one slot, the loop held weakly and compared with `is`."""
import asyncio
import weakref


class PerLoopLock:
    def __init__(self):
        self._loop: weakref.ref | None = None
        self._lock: asyncio.Lock | None = None

    def get(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._loop is None or self._loop() is not loop:
            self._loop, self._lock = weakref.ref(loop), asyncio.Lock()
        return self._lock
