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
  (a wrong fix) laid over it: the files where it differs from the reference fix;
  `WRONG_FIXES` names them.
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
  `draw_strips({label: run}, title)` draws several on one step axis (STRIPS_CAPTION says how to read them).
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

What the child processes run is labs.lab06_scenarios; what several labs share (scratch
folders, a decoy laid over a starter, the fork server) is labs.shared.
"""
from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import functools
import itertools
import json
import os
import signal
from collections import Counter
from pathlib import Path

from loopkata import run_isolated

from .lab06_scenarios import TWIN_SERVER, TWIN_TIMING, child, tidy  # noqa: F401  (TWIN_SERVER and tidy: for the notebook)
from .shared import decoy_over, ended, forked_run, in_a_thread

NOTEBOOKS = Path(__file__).resolve().parents[1]
ROOT = NOTEBOOKS.parent

SCHEMA = """
CREATE TABLE orders (id serial PRIMARY KEY, customer text NOT NULL, cents integer NOT NULL,
                     served_by integer NOT NULL DEFAULT pg_backend_pid());
CREATE TABLE totals (customer text PRIMARY KEY, cents bigint NOT NULL, orders integer NOT NULL,
                     served_by integer NOT NULL DEFAULT pg_backend_pid());
"""

# What the widget and the figure call each wrong fix -> the kata's decoy of that name.
WRONG_FIXES = {
    "dispose() at the start of each job": "dispose_at_job_start",
    "pool_pre_ping=True": "pool_pre_ping",
    "NullPool on the one shared engine": "nullpool_everywhere",
    "a pooled engine per worker thread": "engine_per_thread",
}


# --- the database -------------------------------------------------------------

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

    version = in_a_thread(create)

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

    return in_a_thread(read)


# --- the code under test ------------------------------------------------------

@functools.cache
def variant(starter: Path, label: str) -> Path:
    """The pristine starter with the decoy named `label` (a key of WRONG_FIXES) laid over it."""
    return decoy_over(starter, "cross-loop-pool", WRONG_FIXES[label], "loopkata-nb06-")


# --- the child process ------------------------------------------------------------

_CHILD = """
import sys
sys.path.insert(0, {notebooks!r})
from labs.lab06_scenarios import child
child({params!r})
"""

# The forty runs of `in_flight` are forked from a fork server that imported asyncpg and
# SQLAlchemy once: those imports are most of a fresh interpreter's start-up. The service's
# package is loaded afresh in each run; a run that crashes or hangs takes only its own
# process, which is killed at its deadline with anything it started.
_PRELOAD = ["asyncio", "asyncpg", "sqlalchemy", "sqlalchemy.ext.asyncio", "labs.lab06_scenarios", "labs.shared"]


def _env(server, database: str) -> dict:
    return {"DATABASE_URL": server.with_database(database), "NB06_DSN": server.with_database(database)}


def replay(package: Path, server, database: str, steps: str, running: bool = False, timeout: float = 30.0) -> dict:
    """Run `steps` ("r": an API request, "j": a job) in one fresh process: what happened at each step."""
    params = json.dumps({"package": str(package), "steps": steps, "running": running, "mode": "steps"})
    out = run_isolated(_CHILD.format(notebooks=str(NOTEBOOKS), params=params), timeout=timeout,
                       env=_env(server, database))
    lines = out.stdout.splitlines()
    records = [json.loads(line[5:]) for line in lines if line.startswith("STEP ")]
    stored = [json.loads(line[7:]) for line in lines if line.startswith("STORED ")]
    run = {"steps": steps, "running": running, "records": records, "stored": stored[0] if stored else None,
           "ended": "ok" if stored else ended(out)}
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


OPENED_BY = {"the API's loop": "tab:blue", "a job's loop": "tab:orange"}
NO_CONNECTION = "tab:gray"


def _rows(run: dict) -> list[int]:
    """The server connections a replay was lent (0: a step lent none), in order."""
    lent = {u["connection"] for r in run["records"] for u in r["used"]}
    none = any(not r["used"] for r in run["records"]) or run["ended"] != "ok"
    return ([0] if none else []) + sorted(lent)


def opened(run: dict) -> int:
    """How many server connections a replay opened: each is a connect and a backend process on the server."""
    return len({u["connection"] for r in run["records"] for u in r["used"]})


def draw_steps(ax, run: dict, title: str) -> None:
    """One replay as a strip: a column per step, the server connection lent on the y axis.

    One encoding per meaning: the column says which step it is (API request or job),
    the colour which loop opened the connection, the shape how the step ended (a dot:
    it worked; a cross: it failed; a ring: answered with an id that is not in the table).
    The title counts the connections opened, what each step costs when none is kept.
    """
    stored = {order_id for order_id, _ in run["stored"] or []}
    rows = _rows(run)
    for r in run["records"]:
        lost = r["outcome"] == "ok" and "id" in r and run["stored"] is not None and r["id"] not in stored
        shape = {"marker": "X", "s": 190} if r["outcome"] != "ok" else {"marker": "o", "s": 150}
        for u in r["used"] or [{"connection": 0, "opened_on": None}]:
            colour = (NO_CONNECTION if u["opened_on"] is None else
                      OPENED_BY["the API's loop" if u["opened_on"] == "the API's loop" else "a job's loop"])
            if lost:
                ax.scatter(r["n"], rows.index(u["connection"]), marker="o", s=170, facecolor="white",
                           edgecolor=colour, linewidths=3, zorder=2)
            else:
                ax.scatter(r["n"], rows.index(u["connection"]), color=colour, edgecolor="black", zorder=2, **shape)
    if run["ended"] != "ok":
        ax.axvline(len(run["records"]) + 0.5, color="black", linestyle="--")
        ax.text(len(run["records"]) + 0.6, 0, f"process died\n({run['ended']})", fontsize=9, va="bottom")
    ax.set_xticks(range(1, len(run["steps"]) + 1), [("API" if s == "r" else "job") for s in run["steps"]], fontsize=9)
    ax.set_xlim(0.4, len(run["steps"]) + 0.6)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_yticks(range(len(rows)), [f"#{c}" if c else "none" for c in rows], fontsize=9)
    n = opened(run)
    ax.set_title(f"{title}: {n} server connection{'s' * (n != 1)} opened in {len(run['records'])} steps", fontsize=10)
    ax.grid(axis="y", alpha=0.3)


def legend(fig) -> None:
    """Two short keys, one per encoding: the colour (who opened the connection) and the shape (how the step ended)."""
    from matplotlib.lines import Line2D

    def mark(label, **kw):
        return Line2D([], [], linestyle="", markersize=10, label=label, **kw)

    fig.legend(title="the connection was opened by", handles=[
        mark(f"{who}", marker="s", color=colour, markeredgecolor="black") for who, colour in OPENED_BY.items()
    ], loc="outside lower left", ncol=2, frameon=False, fontsize=9, title_fontsize=9)
    fig.legend(title="the step", handles=[
        mark("worked", marker="o", color="white", markeredgecolor="black"),
        mark("failed", marker="X", color="white", markeredgecolor="black"),
        mark("answered with an id, not in the table", marker="o", markerfacecolor="white",
             markeredgecolor="black", markeredgewidth=3),
    ], loc="outside lower right", ncol=3, frameon=False, fontsize=9, title_fontsize=9)


STRIPS_CAPTION = (
    "One column per step, in order (API request or job); the vertical axis is the server connection the pool "
    "lent for that step, numbered in order of first appearance ('none': no connection was lent). Each strip's "
    "title counts the connections opened: every one is a new TCP connection and a new backend process on the server."
)


def draw_strips(replays: dict, title: str) -> None:
    """Replays one above the other, {what it is: run}, on a shared step axis, with one title and one legend.

    Each strip is as tall as the connections it was lent: no empty rows."""
    import matplotlib.pyplot as plt

    heights = [len(_rows(run)) + 1.2 for run in replays.values()]
    fig, axes = plt.subplots(len(replays), 1, figsize=(9, 1.6 + 0.32 * sum(heights)), sharex=True,
                             layout="constrained", squeeze=False, gridspec_kw={"height_ratios": heights})
    for ax, (label, run) in zip(axes[:, 0], replays.items()):
        draw_steps(ax, run, label)
        ax.set_ylabel("connection", fontsize=9)
    axes[-1, 0].set_xlabel("the steps, in order: an API request or a job", fontsize=10)
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

def in_flight(package: Path, server, database: str, runs: int = 40, at_once: int = 2) -> list[dict]:
    """`runs` runs of the production shape, a process each, `at_once` at a time."""
    params = json.dumps({"package": str(package), "mode": "in_flight"})

    def one(_):
        out = forked_run(child, (params,), _env(server, database), _PRELOAD)
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

def run_tests(code: str, package: Path, server, detail: bool = True) -> dict:
    """Every `test_*` function in `code`, on `package`, each in its own process with a fresh database."""
    import ast

    names = [n.name for n in ast.parse(code).body
             if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test_")]
    results = {}
    for test in names:
        database = f"nb06_{os.getpid()}_t{next(_names)}"
        in_a_thread(lambda: _admin(server.dsn, f'CREATE DATABASE "{database}"'))
        try:
            in_a_thread(lambda: _admin(server.with_database(database), SCHEMA))
            params = json.dumps({"package": str(package), "mode": "test", "code": code, "test": test})
            out = run_isolated(_CHILD.format(notebooks=str(NOTEBOOKS), params=params), timeout=30,
                               env=_env(server, database))
            found = [json.loads(line[7:]) for line in out.stdout.splitlines() if line.startswith("RESULT ")]
            results[test] = found[0] if found else f"FAILED: the process died ({ended(out)})"
        finally:
            _drop(server, database)
    return results


def _drop(server, database: str) -> None:
    in_a_thread(lambda: _admin(server.dsn, f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))


# --- the twin: a global aiohttp session ---------------------------------------------

def twin_timing(code: str, invocations: int = 300) -> dict:
    """Time each invocation style in `code` (a dict STYLES: name -> function) in one fresh process.

    For each style: milliseconds per invocation (after a first, untimed one) and the
    TCP connections the server accepted over all `invocations` + 1 of them.
    """
    script = TWIN_SERVER + code + TWIN_TIMING.format(invocations=invocations)
    out = run_isolated(script, timeout=120)
    found = [json.loads(line[7:]) for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    if not found:
        raise RuntimeError(f"the timing run ended without a result ({ended(out)}):\n{out.stderr[-2000:]}")
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
