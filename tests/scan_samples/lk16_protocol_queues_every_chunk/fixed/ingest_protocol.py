"""A raw TCP ingest server: the protocol queues each chunk, a task parses them."""
import asyncio

HIGH = 256  # chunks


class Ingest(asyncio.Protocol):
    def __init__(self):
        self.chunks = asyncio.Queue(maxsize=HIGH)
        self.transport = None
        self.parser = asyncio.get_running_loop().create_task(self.parse())

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.chunks.put_nowait(data)
        if self.chunks.full():
            self.transport.pause_reading()  # TCP pushes back on the sender until the parser catches up

    async def parse(self) -> None:
        while True:
            chunk = await self.chunks.get()
            self.transport.resume_reading()
            await asyncio.sleep(0, chunk)  # parse and store
