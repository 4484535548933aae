"""A raw TCP ingest server: the protocol queues each chunk, a task parses them."""
import asyncio


class Ingest(asyncio.Protocol):
    def __init__(self):
        self.chunks = asyncio.Queue()  # expect: LK16
        self.parser = asyncio.get_running_loop().create_task(self.parse())

    def data_received(self, data: bytes) -> None:
        self.chunks.put_nowait(data)

    async def parse(self) -> None:
        while True:
            chunk = await self.chunks.get()
            await asyncio.sleep(0, chunk)  # parse and store
