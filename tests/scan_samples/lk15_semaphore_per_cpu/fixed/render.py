"""PDF rendering, at most one per CPU at once."""
import asyncio
import os

import psutil


class Renderer:
    def __init__(self) -> None:
        # RENDER_SLOTS is set from the pod's CPU limit by the deployment (resourceFieldRef: limits.cpu)
        self._slots = asyncio.Semaphore(int(os.environ.get("RENDER_SLOTS", "2")))

    async def render(self, html: str) -> bytes:
        async with self._slots:
            process = await asyncio.create_subprocess_exec("wkhtmltopdf", "-", "-", stdin=asyncio.subprocess.PIPE,
                                                           stdout=asyncio.subprocess.PIPE)
            out, _ = await process.communicate(html.encode())
            return out


def describe() -> str:
    return f"{psutil.cpu_count()} logical CPUs on this host"
