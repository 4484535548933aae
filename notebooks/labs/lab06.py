"""The harness of notebook 06 (The pooled connection that belongs to another loop).

The orders service and its jobs run against a real PostgreSQL server (the one
`loopkata.services.postgres()` starts on 127.0.0.1), always in a process of its
own: a fresh Python through `run_isolated`, or for the forty runs of `in_flight`
a process forked from a server that imported asyncpg and SQLAlchemy once. Two
threads inside one asyncpg connection can kill the interpreter, and that must
never be the notebook's kernel.

- `fresh_database(server)`: a new database with the kata's two tables, dropped
  when the kernel exits. Admin work runs on a thread of its own, because the
  kernel's main thread already runs an event loop.
- `variant(starter, label)`: the pristine starter with one of the kata's decoys
  (a wrong fix, tests/decoys/cross-loop-pool/) laid over it; `WRONG_FIXES`
  names them.
- `replay(package, server, database, steps, running)`: one process, one API
  event loop, and a sequence of API requests ("r") and jobs ("j"). A job runs
  as the inline dispatcher runs it: the package's own `tasks.refresh_totals`
  on a reused worker thread, which calls `asyncio.run`. With `running=False`
  (slow motion) the API's loop is paused while the job runs and the steps are
  spaced out, so only one thread ever touches a connection and every run goes
  the same way; with `running=True` jobs go through `jobs.dispatch` and the
  API's loop keeps running. Every time a pool lends a connection, the harness
  records which server connection it is (numbered #1, #2, ... by backend pid),
  the loop that opened it and the loop that uses it; after each step it asks
  the server what each connection is doing (pg_stat_activity).
- `report(run)` and `draw_steps(ax, run, title)`: a replay in words and as a strip;
  `draw_strips({label: run}, title)` draws several on shared axes (STRIPS_CAPTION says how to read them).
- `in_flight(package, ...)`: the production shape, many times, a process per
  run: three API clients send requests while five jobs run one after another.
- `run_tests(code, package, ...)`: test functions from the notebook, each in a
  process of its own against a fresh database.
- The twin: `TWIN_SERVER` starts an aiohttp server on 127.0.0.1 inside the child
  process (it dies with it); `twin_timing(code, invocations)` times the
  invocation styles defined in `code` and counts the TCP connections the
  server accepted for each; `draw_twin(result)` plots them.

Nothing here is the kata's fix, and nothing here names where it is: the code
under test is the pristine starter, a decoy laid over it, or (after the check
cell, where the notebook passes it in) the reference fix.
"""
from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import itertools
import json
import multiprocessing
import multiprocessing.forkserver
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path

from loopkata import run_isolated
from loopkata.grading.repro import Outcome
from loopkata.grading.supervise import kill_group_of

NOTEBOOKS = Path(__file__).resolve().parents[1]
ROOT = NOTEBOOKS.parent
DECOYS = ROOT / "tests" / "decoys" / "cross-loop-pool"

SCHEMA = """
CREATE TABLE orders (id serial PRIMARY KEY, customer text NOT NULL, cents integer NOT NULL,
                     served_by integer NOT NULL DEFAULT pg_backend_pid());
CREATE TABLE totals (customer text PRIMARY KEY, cents bigint NOT NULL, orders integer NOT NULL,
                     served_by integer NOT NULL DEFAULT pg_backend_pid());
"""

# What the widget and the figure call each wrong fix -> its decoy folder.
WRONG_FIXES = {
    "dispose() at the start of each job": "dispose_at_job_start",
    "pool_pre_ping=True": "pool_pre_ping",
    "NullPool on the one shared engine": "nullpool_everywhere",
    "a pooled engine per worker thread": "engine_per_thread",
}


# --- the database -------------------------------------------------------------

def _in_a_thread(coro_fn, timeout=30.0):
    """Run `coro_fn()` with asyncio.run on a thread of its own (the kernel's thread has a loop)."""
    box = {}

    def run():
        try:
            box["result"] = asyncio.run(asyncio.wait_for(coro_fn(), timeout))
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout + 1)
    if "error" in box:
        raise box["error"]
    if "result" not in box:
        raise TimeoutError(f"no answer from the database in {timeout:g} s")
    return box["result"]


async def _admin(dsn: str, *statements: str):
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


_names = itertools.count(1)


def fresh_database(server, suffix: str = "") -> str:
    """Create the database nb06_<pid>[_suffix] with the kata's tables; dropped when this process exits."""
    import asyncpg

    name = f"nb06_{os.getpid()}{suffix}"

    async def create():
        admin = await asyncpg.connect(server.dsn)
        try:
            # databases of earlier kernels that did not live to drop theirs
            for (old,) in await admin.fetch(r"SELECT datname FROM pg_database WHERE datname LIKE 'nb06\_%'"):
                pid = old.split("_")[1]
                if old == name or (pid.isdigit() and not Path(f"/proc/{pid}").exists()):
                    await admin.execute(f'DROP DATABASE IF EXISTS "{old}" WITH (FORCE)')
            await admin.execute(f'CREATE DATABASE "{name}"')
            version = await admin.fetchval("SHOW server_version")
        finally:
            await admin.close()
        await _admin(server.with_database(name), SCHEMA)
        return version

    version = _in_a_thread(create)

    def drop_quietly():
        # At exit no new thread may start (3.12+), and no event loop runs in this thread any more.
        try:
            asyncio.run(asyncio.wait_for(_admin(server.dsn, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'), 5))
        except Exception:  # noqa: BLE001 - the server may be gone already
            pass

    atexit.register(drop_quietly)  # runs before the server's own stop: it was registered later
    fresh_database.server_version = version
    return name


def tables(server, database: str) -> list[str]:
    import asyncpg

    async def read():
        conn = await asyncpg.connect(server.with_database(database))
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
    """The pristine starter with the decoy named `label` (a key of WRONG_FIXES) laid over it."""
    if label not in _variants:
        if not _workspace:
            _workspace.append(Path(tempfile.mkdtemp(prefix="loopkata-nb06-")))
            atexit.register(shutil.rmtree, _workspace[0], ignore_errors=True)
        folder = _workspace[0] / WRONG_FIXES[label] / starter.name
        shutil.copytree(starter, folder, ignore=shutil.ignore_patterns("__pycache__"))
        for f in (DECOYS / WRONG_FIXES[label]).glob("*.py"):
            if f.name != "__init__.py":  # a decoy's __init__ is its docstring: why it is wrong
                shutil.copy2(f, folder / f.name)
        _variants[label] = folder
    return _variants[label]


def tidy(text: str) -> str:
    """Paths shortened: the kata's own files to name and line, Python's and the libraries' to folder and name.

    The grader runs a decoy laid over the reference fix's other files, and names them from the
    project's folder: those are the kata's own files too, and only their names are shown."""
    text = re.sub(r"(?<![\w./-])(?:(?:solutions|katas)/06_cross_loop_pool|tests/decoys/cross-loop-pool/\w+)/"
                  r"(?=[\w.]+\.py)", "", text)

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


# --- the child process ------------------------------------------------------------

_CHILD = """
import sys
sys.path.insert(0, {notebooks!r})
from labs.lab06 import _child
_child({params!r})
"""

# The forty runs of `in_flight` are forked from a fork server that imported asyncpg and
# SQLAlchemy once: those imports are most of a fresh interpreter's start-up. The service's
# package is loaded afresh in each run; a run that crashes or hangs takes only its own
# process, which is killed at its deadline with anything it started.
_PRELOAD = ["asyncio", "asyncpg", "sqlalchemy", "sqlalchemy.ext.asyncio", "labs.lab06"]
_FORKS = multiprocessing.get_context("forkserver")
_starting = threading.Lock()


def _forked_child(params: str, env: dict, out: str, err: str) -> None:
    os.setsid()  # a group of its own, killed whole at the end
    for fd, path in ((1, out), (2, err)):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 - line by line: the run ends with os._exit
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    os.environ.update(env)
    _child(params)


def _forked_run(params: str, env: dict, timeout: float = 30.0) -> Outcome:
    """Run the child's scenario `params` in a process forked from the fork server; what it printed and how it ended."""
    with tempfile.TemporaryDirectory(prefix="loopkata-nb06-") as tmp:
        out, err = Path(tmp, "out"), Path(tmp, "err")
        with _starting:
            _FORKS.set_forkserver_preload(_PRELOAD)
            child = _FORKS.Process(target=_forked_child, args=(params, env, str(out), str(err)), daemon=False)
            child.start()
        try:
            child.join(timeout)
            hung = child.exitcode is None
        finally:
            kill_group_of(child.pid, ended=child.exitcode is not None)
            child.join()
        text = [p.read_text(errors="replace") if p.exists() else "" for p in (out, err)]
    return Outcome(stdout=text[0], stderr=text[1], returncode=None if hung else child.exitcode)


def _stop_fork_server() -> None:
    server = getattr(multiprocessing.forkserver, "_forkserver", None)
    stop = getattr(server, "_stop", None)  # private, present on 3.11-3.13; without it the server exits with us
    if stop is not None:
        stop()


atexit.register(_stop_fork_server)


def _load(package: Path):
    import importlib
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("orders", package / "__init__.py",
                                                  submodule_search_locations=[str(package)])
    sys.modules["orders"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules["orders"])
    return [importlib.import_module(f"orders.{m}") for m in ("service", "jobs", "tasks")]


def _child(params: str) -> None:
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

    found = _in_a_thread(read)
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

    return _in_a_thread(read)


def _env(server, database: str) -> dict:
    return {"DATABASE_URL": server.with_database(database), "NB06_DSN": server.with_database(database)}


def _died(out) -> str:
    if out.crashed:
        return signal.Signals(-out.returncode).name
    return "still running at the deadline" if out.hung else f"exit {out.returncode}"


def replay(package: Path, server, database: str, steps: str, running: bool = False, timeout: float = 30.0) -> dict:
    """Run `steps` ("r": an API request, "j": a job) in one fresh process: what happened at each step."""
    params = json.dumps({"package": str(package), "steps": steps, "running": running, "mode": "steps"})
    out = run_isolated(_CHILD.format(notebooks=str(NOTEBOOKS), params=params), timeout=timeout,
                       env=_env(server, database))
    lines = out.stdout.splitlines()
    records = [json.loads(line[5:]) for line in lines if line.startswith("STEP ")]
    stored = [json.loads(line[7:]) for line in lines if line.startswith("STORED ")]
    run = {"steps": steps, "running": running, "records": records, "stored": stored[0] if stored else None,
           "ended": "ok" if stored else _died(out)}
    if not stored and not out.crashed and not out.hung:
        run["ended"] += ": " + (out.stderr.strip().splitlines() or ["no output"])[-1]
    return run


STEP_NAMES = {"r": "API request", "j": "job"}


def report(run: dict, detail: bool = True) -> None:
    """A replay in words: one line per step, then what the orders table holds."""
    stored = {order_id for order_id, _ in run["stored"] or []}
    print("step  what         answer  order in the table  server connection lent")
    for r in run["records"]:
        conns = "; ".join(f"#{u['connection']}, opened on {u['opened_on']}" for u in r["used"]) or "none"
        answer = "ok" if r["outcome"] == "ok" else "FAILED"
        table = ("yes" if r["id"] in stored else "NO") if "id" in r and run["stored"] is not None else "-"
        print(f"{r['n']:>3}   {STEP_NAMES[r['step']]:<12} {answer:<7} {table:<19} {conns}")
        if r["outcome"] != "ok" and detail:
            print(f"        {r['outcome']}")
    if run["ended"] != "ok":
        print(f"{len(run['records']) + 1:>3}   the process died: {run['ended']}")
        return
    answered = sum("id" in r for r in run["records"])
    served = {by for _, by in run["stored"]}
    print(f"the API answered {answered} orders with an id; another connection sees {len(stored)} of them "
          f"in the orders table, written by {len(served)} server connection{'s' if len(served) != 1 else ''}")


def draw_steps(ax, run: dict, title: str, top: int = 1) -> None:
    """One replay as a strip: a column per step, the server connection lent on the y axis.

    Circles are API requests and squares jobs; blue is a connection opened on the
    API's loop, orange one opened on a job's loop; a red cross marks a step that
    failed, a hollow circle an order answered with an id but missing from the table.
    `top`: the highest connection number to leave room for (the same for strips compared side by side).
    """
    stored = {order_id for order_id, _ in run["stored"] or []}
    for r in run["records"]:
        marker = "o" if r["step"] == "r" else "s"
        for u in r["used"]:
            opened_here = u["opened_on"] == "the API's loop"
            ax.scatter(r["n"], u["connection"], marker=marker, s=150, edgecolor="black", zorder=2,
                       color="tab:blue" if opened_here else "tab:orange")
            top = max(top, u["connection"])
        y = r["used"][-1]["connection"] if r["used"] else 0
        if r["outcome"] != "ok":
            ax.scatter(r["n"], y, marker="x", s=220, color="tab:red", linewidths=3, zorder=3)
        elif "id" in r and run["stored"] is not None and r["id"] not in stored:
            ax.scatter(r["n"], y, marker="o", s=420, facecolor="none", edgecolor="tab:red", linewidths=2, zorder=3)
    if run["ended"] != "ok":
        ax.axvline(len(run["records"]) + 0.5, color="black", linestyle="--")
        ax.text(len(run["records"]) + 0.6, 0.1, f"process died\n({run['ended']})", fontsize=9)
    ax.set_xticks(range(1, len(run["steps"]) + 1), [("API" if s == "r" else "job") for s in run["steps"]], fontsize=9)
    ax.set_xlim(0.4, len(run["steps"]) + 0.6)
    ax.set_ylim(-0.5, top + 0.6)
    ax.set_yticks(range(0, top + 1), ["none"] + [f"#{i}" for i in range(1, top + 1)], fontsize=9)
    ax.set_ylabel("server connection lent", fontsize=10)
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)


def legend(fig) -> None:
    from matplotlib.lines import Line2D

    def mark(label, **kw):
        return Line2D([], [], linestyle="", label=label, **kw)

    fig.legend(handles=[
        mark("API request on a connection the API's loop opened", marker="o", markersize=9,
             color="tab:blue", markeredgecolor="black"),
        mark("job on a connection the API's loop opened", marker="s", markersize=9,
             color="tab:blue", markeredgecolor="black"),
        mark("on a connection a job's loop opened", marker="o", markersize=9,
             color="tab:orange", markeredgecolor="black"),
        mark("the step failed", marker="x", markersize=10, color="tab:red", markeredgewidth=3),
        mark("answered with an id, not in the table", marker="o", markersize=13,
             markerfacecolor="none", markeredgecolor="tab:red", markeredgewidth=2),
    ], loc="outside lower center", ncol=3, frameon=False, fontsize=9)


STRIPS_CAPTION = (
    "One column per step, in order (API request or job); the vertical axis is the server connection the pool "
    "lent for that step, numbered in order of first appearance ('none': no connection was lent)."
)


def draw_strips(replays: dict, title: str) -> None:
    """Replays one above the other, {what it is: run}, on shared axes, with one title and one legend."""
    import matplotlib.pyplot as plt

    top = max([1] + [u["connection"] for run in replays.values() for r in run["records"] for u in r["used"]])
    fig, axes = plt.subplots(len(replays), 1, figsize=(9, 1.0 + 2.35 * len(replays) + 0.9), sharex=True,
                             sharey=True, layout="constrained", squeeze=False)
    for ax, (label, run) in zip(axes[:, 0], replays.items()):
        draw_steps(ax, run, label, top=top)
    fig.suptitle(title, fontsize=12)
    legend(fig)


def tally(run: dict) -> dict:
    """A replay in numbers: jobs and requests that succeeded, orders answered and stored, connections."""
    records = run["records"]
    jobs = [r for r in records if r["step"] == "j"]
    requests = [r for r in records if r["step"] == "r"]
    stored = run["stored"] or []
    return {
        "jobs ok": f"{sum(r['outcome'] == 'ok' for r in jobs)}/{len(jobs)}",
        "requests ok": f"{sum(r['outcome'] == 'ok' for r in requests)}/{len(requests)}",
        "orders stored": f"{len(stored)}/{sum('id' in r for r in requests)} answered",
        "server connections lent": len({u["connection"] for r in records for u in r["used"]}),
    }


# --- the production shape, many times --------------------------------------------

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


def in_flight(package: Path, server, database: str, runs: int = 40, at_once: int = 2) -> list[dict]:
    """`runs` runs of the production shape, a process each, `at_once` at a time."""
    params = json.dumps({"package": str(package), "mode": "in_flight"})

    def one(_):
        out = _forked_run(params, _env(server, database))
        result = [json.loads(line[7:]) for line in out.stdout.splitlines() if line.startswith("RESULT ")]
        if out.crashed:
            return {"ended": "crashed", "signal": signal.Signals(-out.returncode).name}
        if not result:
            return {"ended": "hung" if out.hung else f"exit {out.returncode}"}
        jobs, requests = result[0]["jobs"], result[0]["requests"]
        failed = any(k != "ok" for k in (*jobs, *requests))
        return {"ended": "errors" if failed else "no error", "jobs": jobs, "requests": requests}

    with concurrent.futures.ThreadPoolExecutor(at_once) as pool:
        return list(pool.map(one, range(runs)))


def summarize(results: list[dict]) -> Counter:
    """Print how the runs ended, and what failed in those that did not crash; the counts of endings."""
    ended = Counter(r["ended"] for r in results)
    print(f"{len(results)} runs, each in a process of its own:")
    for what, meaning in (("no error", "every job and every request succeeded"),
                          ("errors", "some jobs or requests failed, the process lived"),
                          ("crashed", "the process was killed by a signal"),
                          ("hung", "still running at the deadline")):
        print(f"  {ended.get(what, 0):>3}  {what:<9} ({meaning})")
    signals = Counter(r["signal"] for r in results if r["ended"] == "crashed")
    if signals:
        print("  the crashes: " + ", ".join(f"{s} ({n})" for s, n in signals.items()))
    jobs, requests = Counter(), Counter()
    for r in results:
        jobs.update(r.get("jobs", {}))
        requests.update(r.get("requests", {}))
    for name, seen in (("jobs", jobs), ("API requests", requests)):
        failed = "; ".join(f"{k} ({n})" for k, n in seen.most_common() if k != "ok") or "nothing"
        print(f"{name} in the runs that did not crash: {sum(seen.values())}, ok {seen.get('ok', 0)}, "
              f"failed with: {failed}")
    return ended


# --- tests, each in a process of its own, on a fresh database -------------------------

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


def run_tests(code: str, package: Path, server, detail: bool = True) -> dict:
    """Every `test_*` function in `code`, on `package`, each in its own process with a fresh database."""
    import ast

    names = [n.name for n in ast.parse(code).body
             if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test_")]
    results = {}
    for test in names:
        database = f"nb06_{os.getpid()}_t{next(_names)}"
        _in_a_thread(lambda: _admin(server.dsn, f'CREATE DATABASE "{database}"'))
        try:
            _in_a_thread(lambda: _admin(server.with_database(database), SCHEMA))
            params = json.dumps({"package": str(package), "mode": "test", "code": code, "test": test})
            out = run_isolated(_CHILD.format(notebooks=str(NOTEBOOKS), params=params), timeout=30,
                               env=_env(server, database))
            found = [json.loads(line[7:]) for line in out.stdout.splitlines() if line.startswith("RESULT ")]
            results[test] = found[0] if found else f"FAILED: the process died ({_died(out)})"
        finally:
            _drop(server, database)
    return results


def _drop(server, database: str) -> None:
    _in_a_thread(lambda: _admin(server.dsn, f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))


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

_TWIN_TIMING = """
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


def twin_timing(code: str, invocations: int = 300) -> dict:
    """Time each invocation style in `code` (a dict STYLES: name -> function) in one fresh process.

    For each style: milliseconds per invocation (after a first, untimed one) and the
    TCP connections the server accepted over all `invocations` + 1 of them.
    """
    script = TWIN_SERVER + code + _TWIN_TIMING.format(invocations=invocations)
    out = run_isolated(script, timeout=120)
    found = [json.loads(line[7:]) for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    if not found:
        raise RuntimeError(f"the timing run ended without a result ({_died(out)}):\n{out.stderr[-2000:]}")
    return found[0]


def draw_twin(result: dict, invocations: int) -> None:
    import matplotlib.pyplot as plt

    names = list(result)
    colours = ["tab:red"] + ["tab:green"] * (len(names) - 1)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.4), layout="constrained")
    left.barh(names, [result[n]["ms"] for n in names], color=colours)
    left.set_xlabel("milliseconds per invocation (this machine)")
    left.invert_yaxis()
    right.barh(names, [result[n]["connections"] for n in names], color=colours)
    right.set_xlabel(f"TCP connections the server accepted in {invocations + 1} invocations")
    right.set_yticks(range(len(names)), [""] * len(names))
    right.invert_yaxis()
    for i, n in enumerate(names):
        right.text(result[n]["connections"], i, f" {result[n]['connections']}", va="center", fontsize=9)
    right.set_xlim(0, max(result[n]["connections"] for n in names) * 1.15)
    left.set_title("time per invocation", fontsize=10)
    right.set_title("TCP connections opened", fontsize=10)
    fig.suptitle("The twin: a new loop per invocation opens a new connection every time; one kept loop opens one",
                 fontsize=11)
