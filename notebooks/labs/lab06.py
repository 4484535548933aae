"""The harness of notebook 06 (The pooled connection that belongs to another loop).

The orders service and its jobs run against a real PostgreSQL server (the one
`loopkata.services.postgres()` starts on 127.0.0.1), always in a fresh Python
process through `run_isolated`: two threads inside one asyncpg connection can
kill the interpreter, and that must never be the notebook's kernel.

- `fresh_database(server)`: a new database with the kata's two tables, dropped
  when the kernel exits. Admin work runs on a thread of its own, because the
  kernel's main thread already runs an event loop.
- `variant(name)`: the pristine starter with one of the kata's decoys (a wrong
  fix, tests/decoys/cross-loop-pool/NAME) laid over it; `WRONG_FIXES` names them.
- `replay(package, url, steps, running)`: one process, one API event loop, and
  a sequence of API requests ("r") and jobs ("j"). Each job runs as the inline
  dispatcher runs it: the package's own `tasks.refresh_totals` on a worker
  thread, which calls `asyncio.run`. With `running=False` ("slow motion") the
  API's loop is paused while the job runs, so only one thread ever touches a
  connection; with `running=True` the job goes through `jobs.dispatch` and the
  API's loop keeps running. Every checkout from a pool is recorded: which
  server connection (its backend pid, numbered #1, #2, ...), the loop that
  opened it, the loop that used it.
- `in_flight(package, url, runs)`: the production shape, `runs` times, each run
  its own process: three API clients keep sending requests while five jobs run
  one after another; each run ends as "no error", "errors" or "crashed".
- `report(run)`, `draw_steps(ax, run, title)`: a replay in words and as a strip.
- The twin: `twin_failure()` and `twin_timing(invocations)` run a global aiohttp
  session against an aiohttp server on 127.0.0.1, in one child process.

Nothing here is the kata's fix: the code under test is the pristine starter,
or the starter with a decoy over it.
"""
from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import json
import os
import re
import shutil
import signal
import tempfile
import threading
from collections import Counter
from pathlib import Path

from loopkata import run_isolated

NOTEBOOKS = Path(__file__).resolve().parents[1]
ROOT = NOTEBOOKS.parent
DECOYS = ROOT / "tests" / "decoys" / "cross-loop-pool"

SCHEMA = """
CREATE TABLE orders (id serial PRIMARY KEY, customer text NOT NULL, cents integer NOT NULL,
                     served_by integer NOT NULL DEFAULT pg_backend_pid());
CREATE TABLE totals (customer text PRIMARY KEY, cents bigint NOT NULL, orders integer NOT NULL,
                     served_by integer NOT NULL DEFAULT pg_backend_pid());
"""

# label -> decoy folder; the label is what the widget and the figure show.
WRONG_FIXES = {
    "dispose() the shared engine at the start of each job": "dispose_at_job_start",
    "pool_pre_ping=True on the shared engine": "pool_pre_ping",
    "NullPool on the one shared engine": "nullpool_everywhere",
    "a pooled engine per worker thread, never disposed": "engine_per_thread",
}


# --- the database -------------------------------------------------------------

def _in_a_thread(coro_fn, timeout=30.0):
    """Run `coro_fn()` with asyncio.run on a thread of its own (the kernel's thread has a loop)."""
    box = {}

    def run():
        try:
            box["result"] = asyncio.run(asyncio.wait_for(coro_fn(), timeout))
        except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout + 1)
    if "error" in box:
        raise box["error"]
    if "result" not in box:
        raise TimeoutError(f"no answer from the database in {timeout:g} s")
    return box["result"]


def fresh_database(server) -> str:
    """Create a database nb06_<pid> with the kata's tables; drop it when this process exits."""
    import asyncpg

    name = f"nb06_{os.getpid()}"

    async def create():
        admin = await asyncpg.connect(server.dsn)
        try:
            # databases of earlier kernels that did not live to drop theirs
            for (old,) in await admin.fetch("SELECT datname FROM pg_database WHERE datname LIKE 'nb06\\_%'"):
                pid = old.removeprefix("nb06_")
                if old == name or (pid.isdigit() and not Path(f"/proc/{pid}").exists()):
                    await admin.execute(f'DROP DATABASE IF EXISTS "{old}" WITH (FORCE)')
            await admin.execute(f'CREATE DATABASE "{name}"')
            version = await admin.fetchval("SHOW server_version")
        finally:
            await admin.close()
        conn = await asyncpg.connect(server.with_database(name))
        try:
            await conn.execute(SCHEMA)
        finally:
            await conn.close()
        return version

    fresh_database.server_version = _in_a_thread(create)

    async def drop():
        admin = await asyncpg.connect(server.dsn)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()

    def drop_quietly():
        # At exit no new thread may start (3.12+) and no loop runs here any more.
        try:
            asyncio.run(asyncio.wait_for(drop(), 5.0))
        except Exception:  # noqa: BLE001 - the server may already be gone
            pass

    atexit.register(drop_quietly)  # runs before the server's own atexit stop: registered later
    return name


def tables(server, name) -> list[str]:
    import asyncpg

    async def read():
        conn = await asyncpg.connect(server.with_database(name))
        try:
            rows = await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")
            return [r[0] for r in rows]
        finally:
            await conn.close()

    return _in_a_thread(read)


# --- the code under test ------------------------------------------------------

_variants: dict[str, Path] = {}
_workspace: list[Path] = []


def variant(starter: Path, label: str) -> Path:
    """The pristine starter with the decoy named by `label` (a key of WRONG_FIXES) laid over it."""
    if label not in _variants:
        if not _workspace:
            _workspace.append(Path(tempfile.mkdtemp(prefix="loopkata-nb06-")))
            atexit.register(shutil.rmtree, _workspace[0], ignore_errors=True)
        folder = _workspace[0] / WRONG_FIXES[label] / starter.name
        shutil.copytree(starter, folder, ignore=shutil.ignore_patterns("__pycache__"))
        for f in (DECOYS / WRONG_FIXES[label]).glob("*.py"):
            if f.name != "__init__.py":  # the decoy's __init__ is its docstring: why it is wrong
                shutil.copy2(f, folder / f.name)
        _variants[label] = folder
    return _variants[label]


def tidy(text: str) -> str:
    """File paths shortened: the kata's own files by name and line, Python's and the libraries' by name."""
    def short(m):
        folder, name, line = m.group(1), m.group(2), m.group(3) or ""
        if Path(folder).name == "06_cross_loop_pool":
            return name + line
        return f"{Path(folder).name}/{name}"
    return re.sub(r"(/[^\s:<>\[\]()'\"]+)/([\w.]+\.py)(:\d+)?", short, text)


def kind(message: str) -> str:
    """What an error is, in a few words."""
    for words in ("attached to a different loop", "another operation is in progress",
                  "in a manually started transaction", "Event loop is closed", "the connection is closed",
                  "There is no current event loop"):
        if words in message:
            return words
    return message.split(":", 1)[0]


# --- one process: an API loop, requests and jobs -------------------------------

_CHILD = """
import sys
sys.path.insert(0, {notebooks!r})
from labs.lab06 import _child
_child({params!r})
"""


def _child(params: str) -> None:
    """Runs in the child process: the scenario named in `params` (JSON)."""
    import faulthandler
    import importlib.util
    import sys
    import time

    faulthandler.enable()
    p = json.loads(params)
    package = Path(p["package"])
    spec = importlib.util.spec_from_file_location("orders", package / "__init__.py",
                                                  submodule_search_locations=[str(package)])
    sys.modules["orders"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules["orders"])
    from orders import jobs, service, tasks
    from sqlalchemy import event
    from sqlalchemy.pool import Pool

    loops, backends, used = [], [], []  # loops and backend pids in order of first appearance

    def loop_name(loop):
        for i, known in enumerate(loops):
            if known is loop:
                return "the API's loop" if i == 0 else f"job loop {i}"
        loops.append(loop)
        return "the API's loop" if len(loops) == 1 else f"job loop {len(loops) - 1}"

    def backend(pid):
        if pid not in backends:
            backends.append(pid)
        return backends.index(pid) + 1

    @event.listens_for(Pool, "checkout")
    def on_checkout(dbapi_connection, record, proxy):  # every time a pool lends a connection
        driver = dbapi_connection.driver_connection
        try:
            running = loop_name(asyncio.get_running_loop())
        except RuntimeError:
            running = "no loop"
        used.append({"connection": backend(driver.get_server_pid()), "opened_on": loop_name(driver._loop),
                     "used_on": running})

    def said(exc):
        return tidy(f"{type(exc).__name__}: {exc}".splitlines()[0])

    def emit(record):
        print("STEP " + json.dumps(record), flush=True)

    tag = f"c{os.getpid()}"
    customer = f"{tag}-ada"

    if p["mode"] == "in_flight":
        _in_flight_child(service, jobs, tasks, tag)
        return

    if not p["running"]:
        api = asyncio.new_event_loop()
        loop_name(api)
        worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="asyncio")
        for n, step in enumerate(p["steps"], 1):
            used.clear()
            record = {"n": n, "step": step}
            if step == "r":
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
                    except BaseException as exc:  # noqa: BLE001 - shown
                        box["error"] = said(exc)

                try:  # on the same worker thread every time, as asyncio.to_thread's executor does
                    worker.submit(job).result(5)
                    record["outcome"] = box.get("error", "ok")
                except concurrent.futures.TimeoutError:
                    record["outcome"] = "hung"
            record["used"] = list(used)
            time.sleep(0.05)  # steps spaced out in time: whatever the server sent has arrived
            record["states"] = _states(backends)
            emit(record)
    else:
        async def main():
            loop_name(asyncio.get_running_loop())
            for n, step in enumerate(p["steps"], 1):
                used.clear()
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
                    record["outcome"] = {"done": "ok", "failed": tidy(str(state.get("error", "")).splitlines()[0])}.get(
                        state["state"], "hung")
                record["used"] = list(used)
                record["states"] = _states(backends)
                emit(record)

        asyncio.run(main())
    print("SERVED " + json.dumps(_served_by(tag)), flush=True)
    os._exit(0)  # a job thread stuck in a dead loop's connection must not keep the process alive


def _states(backends: list[int]) -> dict:
    """What the server says each connection seen so far is doing (pg_stat_activity.state), by number."""
    import asyncpg

    async def read():
        conn = await asyncpg.connect(os.environ["NB06_DSN"])
        try:
            rows = await conn.fetch("SELECT pid, state FROM pg_stat_activity WHERE pid = ANY($1::int[])", backends)
            return {pid: state for pid, state in rows}
        finally:
            await conn.close()

    found = _in_a_thread(read)
    return {str(i): found.get(pid, "closed") for i, pid in enumerate(backends, 1)}


def _served_by(tag: str) -> list[int]:
    """The server connection (pg_backend_pid) that wrote each of this run's orders, in order."""
    import asyncpg

    async def read():
        conn = await asyncpg.connect(os.environ["NB06_DSN"])
        try:
            rows = await conn.fetch("SELECT id, served_by FROM orders WHERE customer LIKE $1 ORDER BY id", f"{tag}-%")
            return [[r[0], r[1]] for r in rows]
        finally:
            await conn.close()

    return _in_a_thread(read)


def _env(server, database: str) -> dict:
    return {"DATABASE_URL": server.url(database), "NB06_DSN": server.with_database(database)}


def replay(package: Path, server, database: str, steps: str, running: bool = False, timeout: float = 30.0) -> dict:
    """Run `steps` ("r": an API request, "j": a job) in one fresh process; what happened, step by step."""
    params = json.dumps({"package": str(package), "steps": steps, "running": running, "mode": "steps"})
    out = run_isolated(_CHILD.format(notebooks=str(NOTEBOOKS), params=params), timeout=timeout,
                       env=_env(server, database))
    records = [json.loads(line[5:]) for line in out.stdout.splitlines() if line.startswith("STEP ")]
    served = [json.loads(line[7:]) for line in out.stdout.splitlines() if line.startswith("SERVED ")]
    run = {"steps": steps, "running": running, "records": records, "served_by": served[0] if served else None,
           "ended": "ok" if served else ("hung" if out.hung else
                                         signal.Signals(-out.returncode).name if out.crashed else
                                         f"exit {out.returncode}"),
           "stderr": out.stderr}
    if not served and not out.crashed and not out.hung:
        run["ended"] += ": " + (out.stderr.strip().splitlines() or ["no output"])[-1]
    return run


STEP_NAMES = {"r": "API request", "j": "job"}


def report(run: dict, detail: bool = True) -> None:
    """A replay in words: one line per step, then what the API's requests were served by."""
    for r in run["records"]:
        conns = ", ".join(
            f"#{u['connection']} (opened on {u['opened_on']})" for u in r["used"]) or "none"
        mark = "ok    " if r["outcome"] == "ok" else "FAILED"
        print(f"{r['n']:>2} {STEP_NAMES[r['step']]:<11} {mark} server connection {conns}")
        if r["outcome"] != "ok" and detail:
            print(f"      {r['outcome']}")
    if run["ended"] != "ok":
        n = len(run["records"]) + 1
        print(f"{n:>2} {STEP_NAMES[run['steps'][n - 1]] if n <= len(run['steps']) else '':<11} "
              f"the process died: {run['ended']}")
        return
    served = run["served_by"] or []
    print(f"the API's {len(served)} stored orders were written by {len(set(served))} server "
          f"connection{'s' if len(set(served)) != 1 else ''} (served_by)")


_LOOP_COLOURS = {"the API's loop": "tab:blue"}


def draw_steps(ax, run: dict, title: str) -> None:
    """One replay as a strip: a step per column, the server connection it was lent on the y axis.

    Circles are API requests, squares jobs; the fill is the loop that opened the
    connection (blue: the API's loop, orange: a job's loop); a red cross marks
    a step that failed.
    """
    top = 1
    for r in run["records"]:
        marker = "o" if r["step"] == "r" else "s"
        for u in r["used"]:
            colour = _LOOP_COLOURS.get(u["opened_on"], "tab:orange")
            ax.scatter(r["n"], u["connection"], marker=marker, s=140, color=colour, edgecolor="black", zorder=2)
            top = max(top, u["connection"])
        if r["outcome"] != "ok":
            y = r["used"][-1]["connection"] if r["used"] else 0
            ax.scatter(r["n"], y, marker="x", s=220, color="tab:red", linewidths=3, zorder=3)
    if run["ended"] != "ok":
        ax.axvline(len(run["records"]) + 0.5, color="black", linestyle="--")
        ax.text(len(run["records"]) + 0.6, 0.2, f"process died ({run['ended']})", fontsize=8)
    ax.set_xticks(range(1, len(run["steps"]) + 1),
                  [("API" if s == "r" else "job") for s in run["steps"]], fontsize=8)
    ax.set_xlim(0.4, len(run["steps"]) + 0.6)
    ax.set_ylim(-0.5, top + 0.7)
    ax.set_yticks(range(0, top + 1), ["none"] + [f"#{i}" for i in range(1, top + 1)], fontsize=8)
    ax.set_ylabel("server connection")
    ax.set_title(title, fontsize=9)
    ax.grid(axis="y", alpha=0.3)


def legend(fig) -> None:
    from matplotlib.lines import Line2D

    handles = [
        Line2D([], [], marker="o", linestyle="", markersize=9, color="tab:blue", markeredgecolor="black",
               label="API request, connection opened on the API's loop"),
        Line2D([], [], marker="s", linestyle="", markersize=9, color="tab:blue", markeredgecolor="black",
               label="job, connection opened on the API's loop"),
        Line2D([], [], marker="o", linestyle="", markersize=9, color="tab:orange", markeredgecolor="black",
               label="connection opened on a job's loop"),
        Line2D([], [], marker="x", linestyle="", markersize=10, color="tab:red", markeredgewidth=3,
               label="the step failed"),
    ]
    fig.legend(handles=handles, loc="lower center", ncol=2, frameon=False, fontsize=8)


# --- the production shape, many times ------------------------------------------

def _in_flight_child(service, jobs, tasks, tag: str) -> None:
    """Three API clients send requests without pause while five jobs run one after another."""
    import time

    seen = {"jobs": Counter(), "requests": Counter()}

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
        await asyncio.sleep(0.02)
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

    asyncio.run(main())
    print("RESULT " + json.dumps(seen), flush=True)
    os._exit(0)


def in_flight(package: Path, server, database: str, runs: int = 40, at_once: int = 2) -> list[dict]:
    """`runs` runs of the production shape, each in its own process, `at_once` at a time."""
    params = json.dumps({"package": str(package), "steps": "", "running": True, "mode": "in_flight"})
    code = _CHILD.format(notebooks=str(NOTEBOOKS), params=params)

    def one(_):
        out = run_isolated(code, timeout=30, env=_env(server, database))
        result = [json.loads(line[7:]) for line in out.stdout.splitlines() if line.startswith("RESULT ")]
        if out.crashed:
            return {"ended": "crashed", "signal": signal.Signals(-out.returncode).name}
        if out.hung or not result:
            return {"ended": "hung" if out.hung else f"exit {out.returncode}"}
        jobs, requests = result[0]["jobs"], result[0]["requests"]
        failed = any(k != "ok" for k in (*jobs, *requests))
        return {"ended": "errors" if failed else "no error", "jobs": jobs, "requests": requests}

    with concurrent.futures.ThreadPoolExecutor(at_once) as pool:
        return list(pool.map(one, range(runs)))


def summarize(results: list[dict]) -> None:
    ended = Counter(r["ended"] for r in results)
    print(f"{len(results)} runs of the production shape (3 API clients, 5 jobs), each in its own process:")
    for what in ("no error", "errors", "crashed", "hung"):
        print(f"  {what:<9} {ended.get(what, 0):>3}")
    signals = Counter(r["signal"] for r in results if r["ended"] == "crashed")
    if signals:
        print("  crashes: " + ", ".join(f"{n} x {s}" for s, n in signals.items()))
    jobs, requests = Counter(), Counter()
    for r in results:
        jobs.update(r.get("jobs", {}))
        requests.update(r.get("requests", {}))
    print("in the runs that did not crash:")
    print(f"  jobs:         {sum(jobs.values())}, of which ok: {jobs.get('ok', 0)}; failed with: "
          + ("; ".join(f"{k} ({n})" for k, n in jobs.most_common() if k != 'ok') or "nothing"))
    print(f"  API requests: {sum(requests.values())}, of which ok: {requests.get('ok', 0)}; failed with: "
          + ("; ".join(f"{k} ({n})" for k, n in requests.most_common() if k != 'ok') or "nothing"))


# --- the twin: one global aiohttp session, one asyncio.run per invocation --------

_TWIN_SERVER = """
import asyncio, threading
from aiohttp import web

peers = set()     # (host, port) of every TCP connection the server accepted

def start_server():
    ready, box = threading.Event(), {}

    async def hello(request):
        peers.add(request.transport.get_extra_info("peername"))
        return web.Response(text="hello")

    def serve():
        loop = asyncio.new_event_loop()
        runner = web.AppRunner(web.Application(), access_log=None)
        runner.app.router.add_get("/", hello)
        loop.run_until_complete(runner.setup())
        loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", 0).start())
        box["url"] = "http://127.0.0.1:%d/" % runner.addresses[0][1]
        ready.set()
        loop.run_forever()

    threading.Thread(target=serve, daemon=True).start()   # dies with this process
    ready.wait(10)
    return box["url"]
"""
