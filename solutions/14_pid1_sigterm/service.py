"""The export service: answers POST /export/{order} with the order's rows, rendered on demand.

Accepted rows are buffered in memory and written to $EXPORT_STATE/exported.jsonl when the buffer
fills, and once more when the service stops. A spooler child process collects every finished
export and, when its stdin closes, uploads the batch to the archive ($EXPORT_STATE/spool.log here)
and ends.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

from aiohttp import web

STATE = Path(os.environ.get("EXPORT_STATE", "/var/lib/export"))
PORT = int(os.environ.get("PORT", "8080"))
RENDER_SECONDS = 0.5  # an export takes this long to render  # pragma: no mutate (a sleep that plays the warehouse call)
FLUSH_EVERY = 100  # rows  # pragma: no mutate (a demo constant: the batch size is no lesson, the flush at SIGTERM is)

SPOOLER = """
import sys, time
lines = []
for line in sys.stdin:
    lines.append(line)
time.sleep(0.3)  # the upload of the batch to the archive
with open(sys.argv[1], "a") as out:
    out.writelines(lines)
    out.write("spooler: flushed %d exports and ended\\n" % len(lines))
"""


class Exporter:
    def __init__(self, state: Path, spooler: asyncio.subprocess.Process):
        self.state = state
        self.spooler = spooler
        self.pending: list[dict] = []
        self.flushed = 0

    async def export(self, order: str) -> list[dict]:
        print(f"export {order}: rendering", flush=True)
        await asyncio.sleep(RENDER_SECONDS)  # the render, in the real service a call to the warehouse
        rows = [{"order": order, "line": n} for n in range(3)]
        self.pending += rows
        if len(self.pending) >= FLUSH_EVERY:  # pragma: no mutate (batching is no lesson, the flush at SIGTERM is)
            self.flush()
        self.spooler.stdin.write(f"{order}\n".encode())
        await self.spooler.stdin.drain()
        return rows

    def flush(self) -> None:
        with open(self.state / "exported.jsonl", "a") as out:
            out.writelines(json.dumps(row) + "\n" for row in self.pending)
        self.flushed += len(self.pending)
        self.pending.clear()

    async def close(self) -> None:
        """Flush what is pending, then let the spooler flush and end."""
        self.flush()
        self.spooler.stdin.close()
        await self.spooler.wait()
        with open(self.state / "shutdown.log", "a") as out:  # loopkata: ignore[LK05] one line, once, at exit
            out.write(f"clean shutdown: {self.flushed} rows flushed, spooler ended with {self.spooler.returncode}\n")


async def main() -> None:
    spooler = await asyncio.create_subprocess_exec(
        sys.executable, "-c", SPOOLER, str(STATE / "spool.log"), stdin=asyncio.subprocess.PIPE)
    exporter = Exporter(STATE, spooler)

    async def export(request: web.Request) -> web.Response:
        return web.json_response(await exporter.export(request.match_info["order"]))

    app = web.Application()
    app.router.add_post("/export/{order}", export)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", PORT)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    # As PID 1, a signal with no handler is dropped: handle SIGTERM, by cancelling this task.
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, asyncio.current_task().cancel)
    print(f"listening on 127.0.0.1:{port}", flush=True)
    try:
        await asyncio.Event().wait()  # serve until the container is stopped
    except asyncio.CancelledError:
        print("SIGTERM: stopping", flush=True)
    finally:
        await runner.cleanup()  # stops accepting, lets requests in flight finish
        await exporter.close()


if __name__ == "__main__":  # pragma: no mutate (the container runs service.py as a script and never imports it)
    asyncio.run(main())
