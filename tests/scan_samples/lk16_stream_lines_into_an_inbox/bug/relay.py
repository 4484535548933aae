"""A line relay: reads a TCP feed, hands each line to the parser."""
import asyncio


class Relay:
    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.inbox = asyncio.Queue(maxsize=0)  # expect: LK16

    async def _read(self) -> None:
        reader, writer = await asyncio.open_connection(self.host, self.port)
        while True:
            line = await reader.readline()
            if not line:
                break
            await self.inbox.put(line)
        writer.close()

    async def lines(self):
        while True:
            yield await self.inbox.get()
