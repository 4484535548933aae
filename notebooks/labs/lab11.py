"""The harness of notebook 11 (The connection that died while the container slept): warm containers, for real.

`run(impl, steps)` plays a warm container in a fresh Python process: it starts
the stock service of the kata's hidden tests on 127.0.0.1 (a real HTTP/1.1
server that counts the TCP connections it accepts, closes a connection left
idle past its keep-alive timeout, and applies a write once per
Idempotency-Key) and one container process that imports `impl` once and
calls its `handler` once per invocation. Both come from
tests/hidden/warm_invocation_harness.py, so the notebook shows what the
grader sees. `steps` is a list of:

- "lookup": an invocation that reads the stock of kettles (GET);
- "reserve": an invocation that reserves one kettle for a new order (POST);
- "freeze": between two invocations, the container process is SIGSTOPped
  until the service's keep-alive timer has closed every connection it had
  open, then SIGCONTed (what `docker pause` / `unpause` do);
- "drop": the next reservation is applied by the service, which then closes
  the connection without answering.

It returns one row per invocation: what it did, whether a freeze came just
before it, what it returned or raised, and what the service had seen by then
(connections accepted, reservations applied, how often this one's write
arrived and under which key). `show(result)` prints them; `draw(ax, result,
label, color)` draws the connections the service accepted, invocation by
invocation, with a cross at each invocation that failed; `run_all({name: impl},
steps)` runs several at once. `costs()` times what
an invocation pays for a new event loop and for a new session. `decoy(name)`
is a private copy of the kata's decoy `name` (a wrong fix), to run.
"""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from loopkata import decoy_copy, run_isolated

ROOT = Path(__file__).resolve().parents[2]  # the project: notebooks/labs/ -> notebooks/ -> .
HARNESS = ROOT / "tests" / "hidden"  # where warm_invocation_harness.py lives
STEPS = ("lookup", "reserve", "freeze", "drop")


def decoy(name: str) -> Path:
    """A private copy of the kata's decoy `name`, built from its base: a file named after it."""
    return decoy_copy("warm-invocation", name)

_CHILD = """
import json, sys
sys.path.insert(0, {harness!r})
from warm_invocation_harness import Container, StockService

rows, frozen, drop, orders = [], False, False, 0
with StockService(keepalive={keepalive!r}) as service, Container({impl!r}, hang_after=5.0) as box:
    for step in {steps!r}:
        if step == "freeze":
            box.freeze_past_keepalive(service)
            frozen = True
            continue
        if step == "drop":
            drop = True
            continue
        event = {{"action": step, "api": service.url}}
        if step == "lookup":
            event["sku"] = "kettle"
        else:
            orders += 1
            event.update(order=f"o-{{orders}}", sku="kettle", qty=1)
            if drop:
                service.drop_after_next_write()
        answer = box.invoke(event, f"invocation {{len(rows) + 1}}")
        error = answer.get("error") or {{}}
        if "hang" in answer:
            error = {{"type": "Hang", "message": "handler did not return"}}
        arrived = service.arrived_for(event["order"]) if step == "reserve" else []
        rows.append({{
            "n": len(rows) + 1, "action": step, "after_freeze": frozen, "dropped": step == "reserve" and drop,
            "error": f"{{error['type']}}: {{error['message']}}" if error else "",
            "error_type": error.get("type", ""),
            "value": answer.get("value"), "tasks": answer.get("tasks", []),
            "connections": service.accepted, "applied": len(service.applied),
            "applied_this": service.applied_for(event["order"]) if step == "reserve" else 0,
            "arrived": len(arrived), "keys": [w["key"] is not None for w in arrived],
        }})
        frozen, drop = False, drop and step != "reserve"
print(json.dumps({{"rows": rows, "keepalive": service.keepalive}}))
"""


def run(impl, steps, keepalive: float = 0.3, timeout: float = 60.0) -> dict:
    """A warm container running `impl` (a kata file) through `steps`, in a fresh process (see the module docstring)."""
    bad = [s for s in steps if s not in STEPS]
    if bad:
        raise ValueError(f"steps are {', '.join(STEPS)}, not {', '.join(map(repr, bad))}")
    code = _CHILD.format(harness=str(HARNESS), impl=str(Path(impl).resolve()), steps=list(steps), keepalive=keepalive)
    outcome = run_isolated(code, timeout=timeout)
    lines = outcome.stdout.strip().splitlines()
    if outcome.returncode != 0 or not lines:
        raise RuntimeError(f"the warm container did not finish: {outcome.stderr.strip() or outcome.stacks}")
    return json.loads(lines[-1])


def run_all(impls: dict, steps, keepalive: float = 0.3) -> dict:
    """`run` for every {name: impl} at once, each in a process of its own: {name: result}."""
    with ThreadPoolExecutor(max_workers=len(impls) or 1) as pool:
        futures = {name: pool.submit(run, impl, steps, keepalive) for name, impl in impls.items()}
        return {name: future.result() for name, future in futures.items()}


def describe(row: dict) -> str:
    """One invocation in a line."""
    what = {"lookup": "lookup  (GET) ", "reserve": "reserve (POST)"}[row["action"]]
    before = "after a freeze, " if row["after_freeze"] else ""
    before += "connection dies after the write, " if row["dropped"] else ""
    if row["error"]:
        got = f"raised {row['error']}"
    elif row["action"] == "lookup":
        got = f"{row['value']['available']} kettles left"
    else:
        got = f"reservation {row['value']['reservation']}"
    line = f"invocation {row['n']}: {what} {before}{got}"
    line += f"  | service: {row['connections']} connection(s) so far, {row['applied']} reservation(s) applied"
    if row["action"] == "reserve" and (row["arrived"] != 1 or row["applied_this"] != 1):
        keyed = sum(row["keys"])
        line += (f"; this write arrived {row['arrived']} time(s) ({keyed} with a key), "
                 f"applied {row['applied_this']} time(s)")
    if row["tasks"]:
        line += f"; tasks left pending: {len(row['tasks'])}"
    return line


def show(result: dict) -> None:
    for row in result["rows"]:
        print(describe(row))


def draw(ax, result: dict, label: str, color: str) -> None:
    """Connections the service had accepted after each invocation (a line), a cross where it failed.

    Freezes are drawn as grey bands between two invocations."""
    rows = result["rows"]
    xs = [r["n"] for r in rows]
    ax.plot(xs, [r["connections"] for r in rows], marker="o", markersize=4, color=color, label=label)
    failed = [(r["n"], r["connections"]) for r in rows if r["error"]]
    if failed:
        ax.scatter(*zip(*failed), marker="x", s=90, linewidths=2.5, color="black", zorder=5)
    for r in rows:
        if r["after_freeze"]:
            ax.axvspan(r["n"] - 0.75, r["n"] - 0.25, color="0.88", zorder=0)
    ax.set_xlabel("invocation")
    ax.set_ylabel("TCP connections the service accepted")
    ax.set_xticks([r["n"] for r in rows])


_COSTS = """
import asyncio, json, statistics, sys, time
sys.path.insert(0, {harness!r})
import aiohttp
from warm_invocation_harness import StockService

N = {n!r}

async def nothing():
    return None

def per_call(fn):
    times = []
    for _ in range(N):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)

costs = {{}}
costs["asyncio.run per invocation"] = per_call(lambda: asyncio.run(nothing()))
loop = asyncio.new_event_loop()
costs["one loop, run_until_complete"] = per_call(lambda: loop.run_until_complete(nothing()))

with StockService(keepalive=60) as service:
    url = f"{{service.url}}/stock/kettle"

    async def fresh_session_get():
        async with aiohttp.ClientSession() as session:
            async with session.get(url) as resp:
                await resp.read()

    kept = {{}}

    async def reused_session_get():
        if "session" not in kept:
            kept["session"] = aiohttp.ClientSession()
        async with kept["session"].get(url) as resp:
            await resp.read()

    before = service.accepted
    costs["one GET, fresh session"] = per_call(lambda: loop.run_until_complete(fresh_session_get()))
    fresh_connections = service.accepted - before
    before = service.accepted
    costs["one GET, reused session"] = per_call(lambda: loop.run_until_complete(reused_session_get()))
    reused_connections = service.accepted - before
    loop.run_until_complete(kept["session"].close())
loop.close()
print(json.dumps({{"ms": costs, "calls": N, "fresh_connections": fresh_connections,
                  "reused_connections": reused_connections}}))
"""


def costs(n: int = 200) -> dict:
    """Median milliseconds per call, over n calls each: a new event loop against one kept; one GET
    with a fresh session against one with a session kept (and the connections each way opened)."""
    outcome = run_isolated(_COSTS.format(harness=str(HARNESS), n=n), timeout=60.0)
    lines = outcome.stdout.strip().splitlines()
    if outcome.returncode != 0 or not lines:
        raise RuntimeError(f"the measurement did not finish: {outcome.stderr.strip() or outcome.stacks}")
    return json.loads(lines[-1])


_HALF_CLOSED = """
import socket
server = socket.create_server(("127.0.0.1", 0))
client = socket.create_connection(server.getsockname())
peer, _ = server.accept()
peer.close()                                   # the service's keep-alive timer closes its end
sent = client.send(b"POST /reservations HTTP/1.1\\r\\n")
print("the client's first write on the closed connection: sent", sent, "bytes, no error")
print("what the client reads next:", client.recv(100))
try:
    client.send(b"Content-Length: 0\\r\\n\\r\\n")
    client.send(b"more")
    print("later writes: no error")
except OSError as exc:
    print("a later write:", type(exc).__name__, "-", exc.strerror)
client.close(); server.close()
"""


def half_closed() -> str:
    """What a client sees when it writes on a connection whose other end has closed: run in a fresh process."""
    return run_isolated(_HALF_CLOSED, timeout=10.0).stdout
