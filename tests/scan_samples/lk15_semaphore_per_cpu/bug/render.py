"""PDF rendering, at most one per CPU at once."""
import asyncio

import psutil


class Renderer:
    def __init__(self) -> None:
        self._slots = asyncio.Semaphore(psutil.cpu_count(logical=True))  # expect: LK15

    async def render(self, html: str) -> bytes:
        async with self._slots:
            process = await asyncio.create_subprocess_exec("wkhtmltopdf", "-", "-", stdin=asyncio.subprocess.PIPE,
                                                           stdout=asyncio.subprocess.PIPE)
            out, _ = await process.communicate(html.encode())
            return out


def describe() -> str:
    return f"{psutil.cpu_count()} logical CPUs on this host"
