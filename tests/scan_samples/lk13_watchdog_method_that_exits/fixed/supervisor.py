"""A consumer that restarts itself when its event loop gets stuck (the orchestrator starts a new one)."""
import asyncio
import os
import threading
import time


class Consumer:
    def __init__(self, stuck_after: float = 10.0):
        self.stuck_after = stuck_after
        self._last = time.monotonic()

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._beat()
        threading.Thread(target=self._watch, daemon=True).start()

    def _beat(self) -> None:
        self._last = time.monotonic()
        self._loop.call_later(1, self._beat)

    def _watch(self) -> None:
        while True:
            time.sleep(1)
            if time.monotonic() - self._last > self.stuck_after:
                os._exit(1)
