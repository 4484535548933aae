"""One lock per event loop, stored under the loop's id."""
import asyncio


class PerLoopLock:
    def __init__(self):
        self._locks: dict[int, asyncio.Lock] = {}

    def get(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if id(loop) not in self._locks:  # expect: LK02
            self._locks[id(loop)] = asyncio.Lock()  # expect: LK02, LK03
        return self._locks[id(loop)]  # expect: LK02
