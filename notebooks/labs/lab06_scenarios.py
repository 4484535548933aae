"""What runs in notebook 06's child processes: the orders service loaded afresh, and a scenario.

labs.lab06 starts each child (a fresh Python through `run_isolated`, or a process forked
from a fork server) with `child(params)`, where `params` (JSON) names the package, the mode
and what to run: the steps of a replay ("steps"), the production shape ("in_flight"), or one
of the notebook's own tests ("test"). A child answers with tagged lines on its standard
output (STEP, STORED, RESULT), one JSON value each. Two threads inside one asyncpg
connection can kill the interpreter, and that must never be the notebook's kernel.

`tidy` and `kind` shorten what a child saw (paths, error messages) for the notebook.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import re
from collections import Counter
from pathlib import Path

from .shared import in_a_thread


def tidy(text: str) -> str:
    """Paths shortened: the kata's own files to name and line, Python's and the libraries' to folder and name.

    The grader builds a decoy from the reference fix or the starter, and names its files from the
    project's folder, or as the decoy's own (<decoy NAME>/db.py) where it changed them: those are
    the kata's own files too, and only their names are shown."""
    text = re.sub(r"(?<![\w./-])(?:(?:solutions|katas)/06_cross_loop_pool|<decoy \w+>)/(?=[\w.]+\.py)", "", text)

    def short(m):
        folder, name, line = m.group(1), m.group(2), m.group(3) or ""
        if Path(folder).name == "06_cross_loop_pool":
            return name + line
        if name == "repro.py" and Path(folder).name.startswith("loopkata-repro-"):
            return "<repro>" + line  # run_isolated's script
        return f"{Path(folder).name}/{name}"
    return re.sub(r"(?<![\w./-])(/[^\s:<>\[\]()'\"]+)/([\w.]+\.py)(:\d+)?", short, text)


def kind(message: str) -> str:
    """An error in a few words."""
    for words in ("attached to a different loop", "another operation is in progress", "bound to a different event loop",
                  "in a manually started transaction", "Event loop is closed", "connection is closed",
                  "no current event loop"):
        if words in message:
            return words
    return tidy(message.splitlines()[0] if message else "no message")[:90]


def _load(package: Path):
    import importlib
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("orders", package / "__init__.py",
                                                  submodule_search_locations=[str(package)])
    sys.modules["orders"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules["orders"])
    return [importlib.import_module(f"orders.{m}") for m in ("service", "jobs", "tasks")]


def child(params: str) -> None:
    """Runs in the child process: the scenario `params` (JSON) names."""
    import faulthandler

    faulthandler.enable()
    p = json.loads(params)
    service, jobs, tasks = _load(Path(p["package"]))
    if p["mode"] == "in_flight":
        _in_flight_child(service, jobs, tasks)
    elif p["mode"] == "test":
        _test_child(service, jobs, tasks, p["code"], p["test"])
    else:
        _steps_child(service, jobs, tasks, p["steps"], p["running"])
    os._exit(0)  # a job thread stuck in a dead loop's connection must not keep the process alive


def _steps_child(service, jobs, tasks, steps: str, running: bool) -> None:
    import time

    from sqlalchemy import event
    from sqlalchemy.pool import Pool

    loops, backends, used = [], [], []  # loops and backend pids in order of first appearance
    drivers = []  # every asyncpg connection a pool lent, to see whether a reply waits unread

    def loop_name(loop):
        if not any(known is loop for known in loops):
            loops.append(loop)
        i = next(i for i, known in enumerate(loops) if known is loop)
        return "the API's loop" if i == 0 else f"job loop {i}"

    @event.listens_for(Pool, "checkout")
    def lent(dbapi_connection, record, proxy):  # every time a pool lends a connection
        driver = dbapi_connection.driver_connection
        if driver.get_server_pid() not in backends:
            backends.append(driver.get_server_pid())
            drivers.append(driver)
        try:
            running_loop = loop_name(asyncio.get_running_loop())
        except RuntimeError:
            running_loop = "no loop"
        used.append({"connection": backends.index(driver.get_server_pid()) + 1,
                     "opened_on": loop_name(driver._loop), "used_on": running_loop})

    def said(exc):
        return tidy(f"{type(exc).__name__}: {exc}".splitlines()[0])

    customer = f"c{os.getpid()}"

    def emit(record):
        record["used"] = list(used)
        record["states"] = _server_states(backends)
        print("STEP " + json.dumps(record), flush=True)
        used.clear()

    if not running:
        api = asyncio.new_event_loop()
        loop_name(api)
        worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="asyncio")  # reused, as to_thread's is
        for n, step in enumerate(steps, 1):
            record = {"n": n, "step": step}
            if step == "r":
                _settle(api, backends, drivers)
                try:
                    record["id"] = api.run_until_complete(asyncio.wait_for(service.place_order(customer, 100), 5))
                    record["outcome"] = "ok"
                except asyncio.TimeoutError:
                    record["outcome"] = "hung"
                except Exception as exc:  # noqa: BLE001 - shown
                    record["outcome"] = said(exc)
            else:
                box = {}

                def job():
                    try:
                        box["result"] = tasks.refresh_totals(customer)
                    except Exception as exc:  # noqa: BLE001 - shown
                        box["error"] = said(exc)

                try:
                    worker.submit(job).result(5)
                    record["outcome"] = box.get("error", "ok")
                except concurrent.futures.TimeoutError:
                    record["outcome"] = "hung"
            emit(record)
    else:
        async def main():
            loop_name(asyncio.get_running_loop())
            for n, step in enumerate(steps, 1):
                record = {"n": n, "step": step}
                if step == "r":
                    try:
                        record["id"] = await asyncio.wait_for(service.place_order(customer, 100), 5)
                        record["outcome"] = "ok"
                    except asyncio.TimeoutError:
                        record["outcome"] = "hung"
                    except Exception as exc:  # noqa: BLE001 - shown
                        record["outcome"] = said(exc)
                else:
                    job_id = jobs.dispatch(tasks.refresh_totals, customer)
                    deadline = time.monotonic() + 5
                    while jobs.status(job_id)["state"] in ("queued", "running") and time.monotonic() < deadline:
                        await asyncio.sleep(0.003)
                    state = jobs.status(job_id)
                    record["outcome"] = ("ok" if state["state"] == "done" else "hung" if state["state"] != "failed"
                                         else tidy(str(state.get("error", "")).splitlines()[0]))
                emit(record)

        asyncio.run(main())
    print("STORED " + json.dumps(_stored(customer)), flush=True)


def _unread(drivers, loop) -> int:
    """Bytes the server sent on the connections of `loop` that it has not read yet (a
    connection another loop opened is read by that loop only, if it ever runs again)."""
    import fcntl
    import struct
    import termios

    waiting = 0
    for driver in (d for d in drivers if d._loop is loop):
        sock = driver._transport.get_extra_info("socket") if driver._transport is not None else None
        if sock is not None and sock.fileno() >= 0:
            waiting += struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]
    return waiting


def _settle(api, backends: list[int], drivers) -> None:
    """Let the API's loop read everything the server has answered (a job's statement sent on the
    API's connection included) before the next request: the server is done with every statement,
    and no reply waits unread. Decided from the server and the sockets, not from a pause that a
    busy machine could cut short."""
    import time

    deadline = time.monotonic() + 10  # against a hang only
    while time.monotonic() < deadline:
        api.run_until_complete(asyncio.sleep(0.005))
        busy = any(state == "active" for state, _ in _server_states(backends).values())
        if not busy and not _unread(drivers, api):
            return


def _server_states(backends: list[int]) -> dict:
    """What the server says each connection seen so far is doing: (state, its last statement)."""
    import asyncpg

    async def read():
        conn = await asyncpg.connect(os.environ["NB06_DSN"])
        try:
            rows = await conn.fetch("SELECT pid, state, query FROM pg_stat_activity WHERE pid = ANY($1::int[])",
                                    backends)
            return {pid: [state, query] for pid, state, query in rows}
        finally:
            await conn.close()

    found = in_a_thread(read)
    return {str(i): found.get(pid, ["closed", ""]) for i, pid in enumerate(backends, 1)}


def _stored(customer: str) -> list[list[int]]:
    """[id, served_by] of every order of `customer` that another connection can see."""
    import asyncpg

    async def read():
        conn = await asyncpg.connect(os.environ["NB06_DSN"])
        try:
            rows = await conn.fetch("SELECT id, served_by FROM orders WHERE customer = $1 ORDER BY id", customer)
            return [[r[0], r[1]] for r in rows]
        finally:
            await conn.close()

    return in_a_thread(read)


def _in_flight_child(service, jobs, tasks) -> None:
    """Three API clients send requests without pause while five jobs run one after another."""
    import time

    seen = {"jobs": Counter(), "requests": Counter()}
    tag = f"c{os.getpid()}"

    async def main():
        stop = asyncio.Event()

        async def client(name):
            while not stop.is_set():
                try:
                    await service.place_order(name, 100)
                    await service.customer_total(name)
                    seen["requests"]["ok"] += 1
                except Exception as exc:  # noqa: BLE001 - counted
                    seen["requests"][kind(f"{type(exc).__name__}: {exc}")] += 1
                await asyncio.sleep(0.001)

        clients = [asyncio.create_task(client(f"{tag}-shop{i}")) for i in range(3)]
        await asyncio.sleep(0.02)  # requests in flight before the first job starts
        for _ in range(5):
            job_id = jobs.dispatch(tasks.refresh_totals, f"{tag}-shop0")
            deadline = time.monotonic() + 3
            while jobs.status(job_id)["state"] in ("queued", "running") and time.monotonic() < deadline:
                await asyncio.sleep(0.003)
            state = jobs.status(job_id)
            seen["jobs"]["ok" if state["state"] == "done" else
                         kind(str(state.get("error", ""))) if state["state"] == "failed" else "still running"] += 1
        stop.set()
        await asyncio.wait(clients, timeout=3)
        # Said, and gone, before asyncio.run's teardown: a client stuck in a connection another
        # loop holds can make that teardown wait for ever, and the teardown is not what is counted.
        print("RESULT " + json.dumps(seen), flush=True)
        os._exit(0)

    asyncio.run(main())


def _test_child(service, jobs, tasks, code: str, test: str) -> None:
    import asyncpg

    async def read(sql, *args):
        """A query on a connection of its own (not the service's): the set of the first column."""
        conn = await asyncpg.connect(os.environ["NB06_DSN"])
        try:
            return {row[0] for row in await conn.fetch(sql, *args)}
        finally:
            await conn.close()

    namespace = {}
    exec(compile(code, "<tests>", "exec"), namespace)
    try:
        asyncio.run(asyncio.wait_for(namespace[test](service, jobs, tasks, read), 10))
        outcome = "passed"
    except AssertionError as exc:
        outcome = f"FAILED: {exc}"
    except Exception as exc:  # noqa: BLE001 - the code under test's own error
        outcome = f"FAILED with {kind(f'{type(exc).__name__}: {exc}')}"
    print("RESULT " + json.dumps(outcome), flush=True)


# --- the twin: a global aiohttp session ---------------------------------------------

# The start of every twin script: an aiohttp server on 127.0.0.1, on a thread of its
# own inside the same process (so it dies with it), counting the TCP connections it
# accepted by their (address, port).
TWIN_SERVER = """
import asyncio, json, threading, time
import aiohttp
from aiohttp import web

peers = set()  # one transport per connection the server accepted, kept so none is counted twice

def start_server():
    ready, box = threading.Event(), {}

    async def hello(request):
        # The transport, not its peer's address: a closed connection's client port is soon reused,
        # and on a busy machine 501 connections showed as 480 addresses.
        peers.add(request.transport)
        return web.Response(text="hello")

    def serve():
        loop = asyncio.new_event_loop()
        app = web.Application()
        app.router.add_get("/", hello)
        runner = web.AppRunner(app, access_log=None)
        loop.run_until_complete(runner.setup())
        loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", 0).start())
        box["url"] = "http://127.0.0.1:%d/" % runner.addresses[0][1]
        ready.set()
        loop.run_forever()

    threading.Thread(target=serve, daemon=True).start()
    ready.wait(10)
    return box["url"]

url = start_server()
"""

TWIN_TIMING = """
results = {{}}
for name, invoke in STYLES.items():
    before = len(peers)
    invoke()                                   # the first invocation: a cold start, not timed
    started = time.perf_counter()
    for _ in range({invocations}):
        invoke()
    per_call = (time.perf_counter() - started) / {invocations}
    results[name] = {{"ms": per_call * 1000, "connections": len(peers) - before}}
print("RESULT " + json.dumps(results), flush=True)
"""
