"""The harness of notebook 01 (The semaphore bound to a dead loop): a layer, for real.

`simulate(slots, steps, invocations, await_between)` runs one layer of steps
under a module-level asyncio.Semaphore, once per warm invocation, in a fresh
Python process, and returns when each step started, held its slots and ended.
A fresh process each time, because the module global is the bug, and because
a deadlock must never hang the kernel (which runs an event loop of its own).

`draw(spans, title)` plots one timeline per invocation, its steps named by what
they do ("ocr", "vision", ...); `headline(spans)` says in one sentence what the
timeline shows, `caption(spans)` gives the one-line caption, and
`outcome_counts(spans)` counts how the steps ended.
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

# Steps are named by what they do: the incident's layer is OCR and the vision
# model; wider layers (in the widget) add more of the receipt's steps.
STEP_NAMES = ["ocr", "vision", "layout", "tables", "totals", "signature"]
WAITED = 0.002  # seconds: a step that waited less than this took its slots at once


def step_name(n: int) -> str:
    return STEP_NAMES[n] if n < len(STEP_NAMES) else f"step {n + 1}"


def _waited(span) -> bool:
    return span["running"] is None or span["running"] - span["start"] >= WAITED


def _invocations(invs, last) -> str:
    if len(invs) > 1 and invs == list(range(invs[0], last + 1)):
        return f"from invocation {invs[0]} on"
    return "in invocation" + ("s " if len(invs) > 1 else " ") + ", ".join(map(str, invs))


def headline(spans) -> str:
    """What the timeline shows, in one sentence: a figure title that says what to look at."""
    last = max(inv for inv, _ in spans)
    hung = sorted({inv for (inv, _), span in spans.items() if span["outcome"] == "hung"})
    failed = sorted({inv for (inv, _), span in spans.items() if span["outcome"] == "failed"})
    parts = []
    if hung:
        parts.append(f"deadlock {_invocations(hung, last)}: steps still wait for a slot at the deadline")
    if failed:
        names = [step_name(n) for n in sorted({n for (_, n), span in spans.items() if span["outcome"] == "failed"})]
        one = len(names) == 1
        listed = names[0] if one else ", ".join(names[:-1]) + " and " + names[-1]
        parts.append(f"{_invocations(failed, last)}, {listed} {'fails' if one else 'fail'} at once"
                     + ("" if hung else f": the step{'' if one else 's'} that {'has' if one else 'have'} "
                                        "to wait for a slot"))
    if not parts:
        return "Every step finishes: no step had to wait for a slot on a new loop"
    text = "; ".join(parts)
    return text[0].upper() + text[1:]


def caption(spans) -> str:
    """A one-line caption naming only what the figure shows."""
    parts = []
    if any(_waited(span) for span in spans.values()):
        parts.append("grey while it waits for a slot")
    if any(span["outcome"] == "ok" for span in spans.values()):
        parts.append("green while it holds its slots and calls the tool (50 ms)")
    if any(span["outcome"] == "failed" for span in spans.values()):
        parts.append("a red cross where it failed (bound to a dead loop)")
    if any(span["outcome"] == "hung" for span in spans.values()):
        parts.append("an orange arrow where it was still waiting at the 1-second deadline")
    return "One bar per step, one panel per invocation of the handler: " + "; ".join(parts) + "."


def draw(spans, title):
    """One panel per invocation, one bar per step: grey while it waits for a slot, green while it
    holds its slots and calls the tool, a red cross where it failed, an orange arrow if it never ended.
    The legend names only what occurs."""
    invs = sorted({inv for inv, _ in spans})
    steps = sorted({n for _, n in spans})
    fig, axes = plt.subplots(1, len(invs), figsize=(3.2 * len(invs), 0.45 * len(steps) + 2.4), sharex=True,
                             sharey=True, squeeze=False, layout="constrained")
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
        ax.set_title(f"invocation {inv}: {'cold' if inv == 1 else 'warm'}")
        ax.set_xlim(0, right)
        ax.set_xlabel("seconds since the invocation began")
    axes[0][0].set_yticks(steps, [step_name(n) for n in steps])
    axes[0][0].invert_yaxis()  # the first step on top
    entries = [
        (any(_waited(s) for s in spans.values()), plt.Rectangle((0, 0), 1, 1, color=COLOURS["waiting"]),
         "waiting for a slot"),
        (any(s["outcome"] == "ok" for s in spans.values()), plt.Rectangle((0, 0), 1, 1, color=COLOURS["ok"]),
         "holding its slots, calling the tool"),
        (any(s["outcome"] == "failed" for s in spans.values()),
         plt.Line2D([], [], marker="X", color=COLOURS["failed"], linestyle="none", markersize=10),
         "failed: bound to a dead loop"),
        (any(s["outcome"] == "hung" for s in spans.values()),
         plt.Line2D([], [], marker=">", color=COLOURS["hung"], linestyle="none", markersize=10),
         "still waiting at 1 s: deadlock"),
    ]
    shown = [(handle, label) for occurs, handle, label in entries if occurs]
    fig.legend([h for h, _ in shown], [label for _, label in shown], loc="outside lower center",
               ncol=min(len(shown), 2), fontsize=10)
    fig.suptitle(title)
    return fig


def outcome_counts(spans):
    """How many steps ended "ok", "failed" and "hung"."""
    counts = {"ok": 0, "failed": 0, "hung": 0}
    for span in spans.values():
        counts[span["outcome"]] += 1
    return counts
