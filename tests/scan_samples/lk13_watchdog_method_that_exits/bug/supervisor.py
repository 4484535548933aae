"""A consumer that restarts itself when its event loop gets stuck (the orchestrator starts a new one)."""
import asyncio
import os


class Consumer:
    def __init__(self, stuck_after: float = 10.0):
        self.stuck_after = stuck_after
        self._watchdog: asyncio.Task | None = None

    async def start(self) -> None:
        self._watchdog = asyncio.ensure_future(self._watch())

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            last = loop.time()
            await asyncio.sleep(1)  # expect: LK13
            if loop.time() - last > self.stuck_after:
                os._exit(1)
