"""The harness of notebook 04 (The writes that vanished): one invocation, for real.

`invocation(impl, writes, ...)` loads an implementation of the kata in a fresh
Python process, starts the kata's own price store there (the one its hidden
tests start: a real asyncio TCP server on 127.0.0.1), calls the handler once
and returns what the store saw. A fresh process each time, because module
globals are the bug, and because a reproduction must never hang the kernel.

`draw(run, ax, title)` plots one invocation's timeline as the store saw it;
`timelines([(run, label), ...], title)` draws several side by side (CAPTION says how to read them).
"""
from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.lines import Line2D

from loopkata import run_isolated

ROOT = Path(__file__).resolve().parents[2]  # the project: notebooks/labs/ -> notebooks/ -> .
STORE = ROOT / "tests" / "hidden" / "test_04_collected_tasks.py"  # where the kata's PriceStore lives

# Runs in the child process. Every path it is given is absolute: the notebook
# reproduces the starter from a private copy (pristine_starter), not from katas/.
_CHILD = """
import asyncio, gc, importlib.util, itertools, json, logging, os, sys

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module

PriceStore = load({store!r}, "price_store").PriceStore

class Keep(logging.Handler):
    # Every log record of the invocation: asyncio's "Task was destroyed" lines, the kata's own.
    def __init__(self):
        super().__init__()
        self.records = []
    def emit(self, record):
        self.records.append(record)

def invoke(impl, writes, gc_during=False, quote_cached=False):
    kata = load(impl, "kata")
    prices = {{f"sku-{{i}}": f"{{10 + i}}.99" for i in range(writes)}}
    waiting = writes + (0 if quote_cached else 1)        # the quote's own connection waits too
    keep = Keep()
    logging.getLogger().addHandler(keep)
    try:
        with PriceStore(gc_during_auth=waiting if gc_during else 0) as store:
            store.data["price:quoted"] = "5.00"
            kata.STORE_ADDRESS = store.address
            kata.handler({{"prices": prices, "quote": "sku-0" if quote_cached else "quoted"}})
            landed = len(store.landed(prices))
    finally:
        logging.getLogger().removeHandler(keep)
    # File names only: the private copy's folder differs from run to run.
    folder = os.path.dirname(impl) + os.sep
    messages = [r.getMessage().replace(folder, "") for r in keep.records]
    return {{
        "writes": writes, "landed": landed, "messages": messages,
        "destroyed": sum(m.startswith("Task was destroyed but it is pending!") for m in messages),
        "events": store.events, "collected_at": store.collected_at,
    }}

print(json.dumps(invoke({impl!r}, {writes}, {gc_during}, {quote_cached})))
"""


def invocation(impl, writes, gc_during=False, quote_cached=False) -> dict:
    """One invocation of the implementation at `impl` (a path), in a fresh process, against a fresh store.

    Returns a dict: writes, landed, the log messages, how many were "Task was
    destroyed but it is pending!", the store's events and when it collected.
    """
    impl = str(Path(impl).resolve())
    code = _CHILD.format(store=str(STORE), impl=impl, writes=writes, gc_during=gc_during, quote_cached=quote_cached)
    out = run_isolated(code, timeout=30)
    if out.returncode != 0:
        out.show()
        raise RuntimeError(f"the invocation of {Path(impl).name} did not finish cleanly")
    return json.loads(out.stdout.strip().splitlines()[-1])


def describe(run: dict) -> str:
    return (f"{run['landed']} of {run['writes']} writes landed; "
            f"\"Task was destroyed but it is pending!\" logged {run['destroyed']} times; "
            f"{len(run['messages']) - run['destroyed']} other log records")


# --- the timeline -------------------------------------------------------------

LEGEND = [
    Line2D([], [], color="#c8c8c8", lw=1, label="connection open"),
    Line2D([], [], marker="o", ls="", color="#1a7f37", ms=4, label="SET arrived: the write landed"),
    Line2D([], [], marker="D", ls="", color="#0969da", ms=5, label="GET: the quote"),
    Line2D([], [], marker="x", ls="", color="#cf222e", ms=5, label="closed without a command: the write vanished"),
    Line2D([], [], ls="--", color="#9a6700", label="gc.collect()"),
]


def draw(run: dict, ax, title: str) -> None:
    """One invocation's timeline, as the store saw it: one row per connection."""
    events = run["events"]
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("ms since the first connection")
    ax.set_ylabel("connection")
    if not events:
        ax.text(0.5, 0.5, "no connection reached the store", ha="center", va="center", transform=ax.transAxes)
        return
    t0 = min(t for _, _, t in events)
    rows = {}
    for number, what, t in events:
        rows.setdefault(number, {})[what] = (t - t0) * 1000
    end_of_run = max(t for _, _, t in events)
    for number, seen in rows.items():
        start, end = seen["connected"], seen.get("closed", (end_of_run - t0) * 1000)
        ax.plot([start, end], [number, number], color="#c8c8c8", lw=1)
        if "SET" in seen:
            ax.plot(seen["SET"], number, "o", color="#1a7f37", ms=3)
        elif "GET" in seen:
            ax.plot(seen["GET"], number, "D", color="#0969da", ms=5)
        else:
            ax.plot(end, number, "x", color="#cf222e", ms=4)
    if run["collected_at"] is not None:
        ax.axvline((run["collected_at"] - t0) * 1000, ls="--", color="#9a6700")


CAPTION = (
    "One row per connection the store saw (one per write, and one for the quote's GET), drawn from connect to "
    "close; time in ms from the invocation's first connection."
)


def timelines(panels: list, title: str) -> None:
    """One figure of invocation timelines side by side, on shared axes: panels is [(run, what it is), ...]."""
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels) if len(panels) > 1 else 8, 4.4),
                             sharex=True, sharey=True, squeeze=False)
    for ax, (run, label) in zip(axes[0], panels):
        draw(run, ax, label)
        ax.tick_params(labelsize=9)
    for ax in axes[0][1:]:
        ax.set_ylabel("")
    fig.suptitle(title, fontsize=12)
    fig.legend(handles=LEGEND, loc="lower center", ncol=3, frameon=False, fontsize=9)
    fig.tight_layout(rect=(0, 0.15, 1, 1))


# --- the drain that never ends (Python 3.12 and later) -------------------------

# One write has finished and its done callback (the set's discard) is queued, not run:
# the moment the kata's burst test makes certain. Then the drain every version accepts,
# written with gather (DRAIN="gather") or with asyncio.wait (DRAIN="wait").
_TRAP = """
import asyncio, sys, threading, time

rounds = 0

async def main():
    global rounds
    writes = set()

    async def write():
        return "+OK"

    task = asyncio.create_task(write())
    writes.add(task)
    task.add_done_callback(writes.discard)
    await asyncio.sleep(0)   # one turn: the write runs and finishes; its discard is queued for the next turn

    while pending := list(writes):
        rounds += 1
        {drain}

def report():   # from another thread: the loop's own thread never stops to print
    time.sleep(1.0)
    print(f"still draining after 1 s: {{rounds}} rounds, the finished write still in the set", flush=True)

threading.Thread(target=report, daemon=True).start()
asyncio.run(main())
print(f"drained after {{rounds}} round{{'s' if rounds > 1 else ''}}: the set is empty", flush=True)
"""
_DRAINS = {
    "gather": "await asyncio.gather(*pending, return_exceptions=True)",
    "wait": "await asyncio.wait(pending)",
}


def drain_trap(drain: str, timeout: float = 3.0) -> dict:
    """Run the drain (`gather` or `wait`) in its own process, killed after `timeout` seconds.

    Returns whether it hung and what it printed (the last line says how many rounds it took)."""
    out = run_isolated(_TRAP.format(drain=_DRAINS[drain]), timeout=timeout)
    lines = out.stdout.strip().splitlines()
    return {"hung": out.hung, "said": lines[-1] if lines else "(nothing)", "stacks": out.stacks}


# Five rounds of gather on a write that has finished, its discard queued: does the set empty?
_PROBE = """
import asyncio, sys

async def main():
    writes = set()
    async def write():
        return "+OK"
    task = asyncio.create_task(write())
    writes.add(task)
    task.add_done_callback(writes.discard)
    await asyncio.sleep(0)
    for rounds in range(1, 6):
        await asyncio.gather(*writes, return_exceptions=True)
        if not writes:
            return rounds
    return None

print(sys.version.split()[0], asyncio.run(main()))
"""


def gather_rounds(python: str) -> tuple[str, int | None] | None:
    """(version, rounds of gather until the set is empty, None if not within 5) with that
    interpreter, or None if it does not run here. The probe cannot hang: 5 rounds at most."""
    import subprocess

    try:
        out = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0 or not out.stdout.split():
        return None
    version, rounds = out.stdout.split()
    return version, None if rounds == "None" else int(rounds)


def pythons() -> list[str]:
    """This kernel's Python, then any other 3.11, 3.12 or 3.13 found on PATH or in the project's venvs."""
    import shutil
    import sys

    found = [sys.executable]
    found += [p for v in ("3.11", "3.12", "3.13") if (p := shutil.which(f"python{v}"))]
    found += [str(p) for p in sorted(ROOT.glob(".venv*/bin/python"))]
    return found


def gather_by_version() -> dict[str, int | None]:
    """version -> rounds of gather until the set empties (None: not within 5), for every Python found."""
    seen: dict[str, int | None] = {}
    for python in pythons():
        result = gather_rounds(python)
        if result is not None:
            seen.setdefault(*result)
    return seen
