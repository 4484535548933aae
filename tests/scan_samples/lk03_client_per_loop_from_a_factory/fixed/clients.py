"""The client of the running event loop: one slot, the loop held weakly, so a finished loop is let go."""
import asyncio
import weakref


class PerLoopClient:
    def __init__(self, factory):
        self._factory = factory
        self._loop: weakref.ref | None = None
        self._client = None

    async def get(self):
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is None or self._loop() is not loop:
            self._loop, self._client = weakref.ref(loop), self._factory()
        return self._client
