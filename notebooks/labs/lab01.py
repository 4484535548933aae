"""The harness of notebook 01 (The semaphore bound to a dead loop): a layer, for real.

`simulate(slots, steps, invocations, await_between)` runs one layer of steps
under a module-level asyncio.Semaphore, once per warm invocation, in a fresh
Python process, and returns when each step started, held its slots and ended.
A fresh process each time, because the module global is the bug, and because
a deadlock must never hang the kernel (which runs an event loop of its own).

`draw(spans, title)` plots one timeline per invocation; `outcome_counts(spans)`
counts how the steps ended.
"""
from __future__ import annotations

import json

import matplotlib.pyplot as plt

from loopkata import run_isolated

# Runs in the child process: the shape of the incident's code, with the number
# of slots, of steps and of invocations as arguments. Each step takes one slot
# in the layer runner and a second one in the step executor, as the kata does.
# Every event is kept with its time and printed as JSON at the end, so that a
# step that fails or hangs still leaves its trace.
SIMULATION = """
import asyncio, json, sys, time
slots, steps, invocations, await_between = map(int, sys.argv[1:5])
LIMIT = asyncio.Semaphore(slots)
events = []

async def step(inv, n, t0):
    events.append([inv, n, "start", time.perf_counter() - t0])
    try:
        async with LIMIT:
            if await_between:
                await asyncio.sleep(0)
            async with LIMIT:
                events.append([inv, n, "running", time.perf_counter() - t0])
                await asyncio.sleep(0.05)
        events.append([inv, n, "ok", time.perf_counter() - t0])
    except RuntimeError:
        events.append([inv, n, "failed", time.perf_counter() - t0])

async def invocation(inv):
    t0 = time.perf_counter()
    try:
        # One second per invocation: a step still waiting then is deadlocked.
        await asyncio.wait_for(asyncio.gather(*(step(inv, n, t0) for n in range(steps))), 1.0)
    except TimeoutError:
        pass

for inv in range(1, invocations + 1):
    asyncio.run(invocation(inv))
print(json.dumps(events))
"""


def simulate(slots=3, steps=2, invocations=3, await_between=True):
    """Run the layer in a fresh process.

    Returns {(invocation, step): {"start", "running", "end", "outcome"}}: when the step
    started, when it held both slots (None if never), when it ended (None if it was
    still waiting at the deadline) and how it ended: "ok", "failed" or "hung".
    """
    code = "import sys; sys.argv[1:] = %r\n" % [str(slots), str(steps), str(invocations), str(int(await_between))]
    out = run_isolated(code + SIMULATION, timeout=2 + 1.5 * invocations)
    spans = {}
    for inv, n, what, t in json.loads(out.stdout):
        span = spans.setdefault((inv, n), {"start": t, "running": None, "end": None, "outcome": "hung"})
        if what == "running":
            span["running"] = t
        elif what in ("ok", "failed"):
            span["end"], span["outcome"] = t, what
    return spans


COLOURS = {"waiting": "lightgrey", "ok": "tab:green", "failed": "tab:red", "hung": "tab:orange"}


def draw(spans, title):
    """One panel per invocation, one bar per step: grey while it waits for a slot, green while it
    holds its slots and calls the tool, a red cross where it failed, an orange arrow if it never ended."""
    invs = sorted({inv for inv, _ in spans})
    steps = sorted({n for _, n in spans})
    fig, axes = plt.subplots(1, len(invs), figsize=(3.2 * len(invs), 0.45 * len(steps) + 2.4), sharey=True,
                             squeeze=False, layout="constrained")
    hung = any(span["end"] is None for span in spans.values())
    right = 1.05 if hung else 1.2 * max(span["end"] for span in spans.values())
    for ax, inv in zip(axes[0], invs):
        for n in steps:
            span = spans[(inv, n)]
            end = 1.0 if span["end"] is None else span["end"]
            waited_until = span["running"] if span["running"] is not None else end
            ax.barh(n, max(waited_until - span["start"], 0.004), left=span["start"], color=COLOURS["waiting"])
            if span["outcome"] == "ok":
                ax.barh(n, end - waited_until, left=waited_until, color=COLOURS["ok"])
            else:  # a failure or a deadlock ends the wait: mark where
                ax.plot([end], [n], marker="X" if span["outcome"] == "failed" else ">", markersize=11,
                        color=COLOURS[span["outcome"]], linestyle="none")
        ax.set_title(f"invocation {inv}")
        ax.set_xlim(0, right)
        ax.set_xlabel("seconds")
    axes[0][0].set_yticks(steps, [f"step {n + 1}" for n in steps])
    handles = [plt.Rectangle((0, 0), 1, 1, color=COLOURS[k]) for k in ("waiting", "ok")] + [
        plt.Line2D([], [], marker="X", color=COLOURS["failed"], linestyle="none", markersize=10),
        plt.Line2D([], [], marker=">", color=COLOURS["hung"], linestyle="none", markersize=10),
    ]
    fig.legend(handles, ["waiting for a slot", "holding its slots, calling the tool", "failed: bound to a dead loop",
                         "still waiting at 1 s: deadlock"], loc="outside lower center", ncol=2)
    fig.suptitle(title)
    return fig


def outcome_counts(spans):
    """How many steps ended "ok", "failed" and "hung"."""
    counts = {"ok": 0, "failed": 0, "hung": 0}
    for span in spans.values():
        counts[span["outcome"]] += 1
    return counts
