"""The harness of notebook 02 (The HTTP client cached by id(loop)): a warm container, for real.

Every reproduction of notebook 02 runs in a fresh Python process, through
`run_isolated`: the notebook's kernel already runs an event loop, and leaked
sockets must not pile up in it. Such a script starts with `PRELUDE`, which
imports this module in the child process, so the child has:

- `start_tool_server()`: a real aiohttp tool server on 127.0.0.1, on an
  ephemeral port, on a thread with its own event loop (the code under test
  runs one `asyncio.run` per invocation on the main thread, like a Lambda);
- `open_fds()` and `settle()`: the count of the process's open file
  descriptors, read once it has stopped moving; `tool_sockets(url)`: how
  many of them are sockets to or from the tool server at `url` (both ends
  of each connection, since the server runs in the same process);
- `UnclosedLog`: counts aiohttp's "Unclosed client session" lines;
- `warm_container(...)`: the warm invocations of the notebook's figure, on a
  module loaded from a file by `load_module(path)`.

In the kernel, `simulate(path, ...)` runs `warm_container` on the file given
(the kata's starter, a decoy, your copy) and `draw(...)` plots it.
Nothing here is a fix: the code under test always comes from the notebook.
"""
from __future__ import annotations

import asyncio
import gc
import importlib.util
import itertools
import json
import linecache
import logging
import os
import sys
import threading
import time
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parents[1]

# The start of every reproduction's script: it runs in the child process, which
# starts in a temporary folder, so it puts notebooks/ on the path first.
PRELUDE = (
    f"import sys; sys.path.insert(0, {str(NOTEBOOKS)!r})\n"
    "import asyncio, gc, json, traceback, weakref\n"
    "from labs.lab02 import (CATEGORIES, UnclosedLog, load_module, open_fds, settle, start_tool_server,\n"
    "                        tool_sockets, warm_container)\n"
    "UnclosedLog.install()\n"
)

CATEGORIES = {"coffee": "meals", "taxi": "travel", "printer paper": "office"}


def start_tool_server():
    """A real aiohttp server on 127.0.0.1 (ephemeral port), on its own thread and loop.

    Returns (url, stop). It runs on a thread of its own so that the code under
    test can start and close as many event loops as it likes on the main thread.
    """
    from aiohttp import web

    ready, box = threading.Event(), {}

    async def classify(request):
        body = await request.json()
        return web.json_response({"category": CATEGORIES.get(body["text"], "other")})

    def serve():
        loop = asyncio.new_event_loop()
        app = web.Application()
        app.router.add_post("/classify", classify)
        runner = web.AppRunner(app, access_log=None)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0, shutdown_timeout=0.5)
        loop.run_until_complete(site.start())
        box["url"] = "http://127.0.0.1:%d" % runner.addresses[0][1]
        box["loop"] = loop
        ready.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    ready.wait(10)

    def stop():
        box["loop"].call_soon_threadsafe(box["loop"].stop)
        thread.join(5)

    return box["url"], stop


def open_fds() -> int:
    """Open file descriptors of this process: both ends of every socket to the tool server are in it."""
    return len(os.listdir("/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd"))


def tool_sockets(url: str) -> int | None:
    """Open sockets of this process connected to or from the tool server at `url` (both ends of
    each connection); None where the kernel's table of connections cannot be read (not Linux)."""
    port = int(url.rsplit(":", 1)[1])
    inodes = set()
    try:
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with open(table) as f:
                for line in f.read().splitlines()[1:]:
                    fields = line.split()
                    local, remote = (int(fields[i].rsplit(":", 1)[1], 16) for i in (1, 2))
                    if port in (local, remote) and fields[3] != "0A":  # "0A": the listening socket
                        inodes.add(fields[9])
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return None
    count = 0
    for fd in fds:
        try:
            count += os.readlink(f"/proc/self/fd/{fd}")[len("socket:["):-1] in inodes
        except OSError:
            continue  # closed meanwhile
    return count


def _resolvers_closed() -> bool:
    """pycares closes a DNS resolver's descriptors on a thread of its own, some time after close():
    has that thread finished every resolver handed to it (it waits at its queue again)?"""
    manager = getattr(sys.modules.get("pycares"), "_shutdown_manager", None)
    thread = getattr(manager, "_thread", None)
    if thread is None:
        return True
    frame = sys._current_frames().get(thread.ident)
    waiting = frame is not None and "_queue.get()" in linecache.getline(frame.f_code.co_filename, frame.f_lineno)
    return waiting and manager._queue.empty()


def settle(quiet=0.15, at_most=3.0) -> None:
    """Wait until every resolver handed to pycares is closed and the count of open fds has stopped
    moving: the server thread closes its side of a finished connection a moment after the client does.
    On a busy machine a quiet spell alone came before the resolver's thread ran (1 fd instead of 4)."""
    deadline = time.monotonic() + at_most
    while not _resolvers_closed() and time.monotonic() < deadline:
        time.sleep(0.01)
    last, since = open_fds(), time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - since < quiet:
        time.sleep(0.01)
        now = open_fds()
        if now != last:
            last, since = now, time.monotonic()


class UnclosedLog(logging.Handler):
    """Counts aiohttp's "Unclosed client session" log lines instead of printing them.

    aiohttp reports a session destroyed unclosed through the loop's exception
    handler, which logs to the "asyncio" logger: that is where it is counted.
    """

    count = 0

    def emit(self, record):
        if "Unclosed client session" in record.getMessage():
            UnclosedLog.count += 1

    @classmethod
    def install(cls) -> None:
        logging.getLogger("asyncio").addHandler(cls())
        logging.getLogger("asyncio").propagate = False


def load_module(path):
    """The module in the file `path`, imported under the name "code_under_test"."""
    spec = importlib.util.spec_from_file_location("code_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def warm_container(module: dict, invocations: int, items: int, force_id: bool, pause_gc: bool) -> None:
    """Runs in the child: call module["handler"] once per warm invocation, and print as JSON
    the open fds (+ since the start), how many of them are sockets to or from the tool server
    (None where that cannot be read), and the error of each, and the "Unclosed client session" count.

    force_id makes the module's id() return one constant, as the incident's
    regression test did; pause_gc stops the garbage collector, as between two
    of its passes in a long-lived process.
    """
    if force_id:
        module["id"] = lambda obj: 4242
    if pause_gc:
        gc.disable()
    url, stop = start_tool_server()
    event = {"tool_url": url, "items": [f"item {n}" for n in range(items)]}
    start, rows = open_fds(), []
    for i in range(1, invocations + 1):
        try:
            module["handler"](event)
            error = ""
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
        settle()
        rows.append({"invocation": i, "fds": open_fds() - start, "sockets": tool_sockets(url), "error": error})
    stop()
    print(json.dumps({"rows": rows, "unclosed_logged": UnclosedLog.count}))


def simulate(path, invocations=10, items=3, force_id=False, pause_gc=False) -> dict:
    """Run warm invocations of the module in the file `path`, in a fresh process.

    Returns {"rows": [{"invocation", "fds", "sockets", "error"}, ...], "unclosed_logged": n}.
    """
    from loopkata import run_isolated

    call = (f"warm_container(vars(load_module({str(Path(path).resolve())!r})), "
            f"{int(invocations)}, {int(items)}, {bool(force_id)}, {bool(pause_gc)})\n")
    out = run_isolated(PRELUDE + call, timeout=10 + 0.5 * invocations)
    if out.returncode != 0:
        out.show()
        raise RuntimeError("the simulation did not finish")
    return json.loads(out.stdout)


def draw(ax, result: dict, label: str, colour: str) -> None:
    """Open fds after each invocation as a line; a red cross on each invocation that failed
    (named once in the legend, and only if one failed)."""
    rows = result["rows"]
    xs, ys = [r["invocation"] for r in rows], [r["fds"] for r in rows]
    ax.plot(xs, ys, marker="o", markersize=3, color=colour, label=label)
    failed = [(r["invocation"], r["fds"]) for r in rows if r["error"]]
    if failed:
        named = "failed invocation" in ax.get_legend_handles_labels()[1]
        ax.plot(*zip(*failed), marker="X", markersize=9, color="tab:red", linestyle="none",
                label="_nolegend_" if named else "failed invocation")
    ax.set_xlabel("warm invocation")
    ax.set_ylabel("open file descriptors (+ since the start)")


def split_counts(result: dict) -> tuple[list[int], list[int]] | None:
    """Per invocation, the sockets to or from the tool server and the other open descriptors
    (+ since the start); None where the sockets could not be counted."""
    rows = result["rows"]
    if any(r.get("sockets") is None for r in rows):
        return None
    sockets = [r["sockets"] for r in rows]
    return sockets, [r["fds"] - s for r, s in zip(rows, sockets)]


def drops(counts: list[int]) -> int:
    """How many times a count went down from one invocation to the next."""
    return sum(later < earlier for earlier, later in itertools.pairwise(counts))


def draw_parts(ax, result: dict) -> None:
    """All open fds after each invocation, and the two parts they are made of: the sockets to
    the tool server, and the rest (each session's DNS resolver)."""
    draw(ax, result, "all open file descriptors", "black")
    split = split_counts(result)
    if split is None:
        return
    xs = [r["invocation"] for r in result["rows"]]
    ax.plot(xs, split[0], marker=".", color="tab:blue", label="sockets to the tool server (both ends)")
    ax.plot(xs, split[1], marker=".", color="tab:orange", label="the other descriptors (DNS resolvers)")
