"""A client per event loop, made by whatever factory the app hands in."""
import asyncio
import weakref


class PerLoopClient:
    def __init__(self, factory):
        self._factory = factory
        self._clients = weakref.WeakKeyDictionary()

    def get(self):
        loop = asyncio.get_running_loop()
        if loop not in self._clients:
            self._clients[loop] = self._factory()  # expect: LK03
        return self._clients[loop]
