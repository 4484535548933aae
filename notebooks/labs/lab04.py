"""The harness of notebook 04 (The writes that vanished): one invocation, for real.

`invocation(impl, writes, ...)` loads an implementation of the kata in a fresh
Python process, starts the kata's own price store there (the one its hidden
tests start: a real asyncio TCP server on 127.0.0.1), calls the handler once
and returns what the store saw. A fresh process each time, because module
globals are the bug, and because a reproduction must never hang the kernel.

`draw(run, ax, title)` plots one invocation's timeline as the store saw it;
`timelines([(run, label), ...], title)` draws several side by side (CAPTION says how to read them);
`closed_after_collection(run)` says when the store saw the destroyed writes' connections close.

REFERENCE is the kata's reference fix, for the notebook to *run* side by side with
the starter: what it shows is what the store saw, never the code.
"""
from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.lines import Line2D

from loopkata import run_isolated

ROOT = Path(__file__).resolve().parents[2]  # the project: notebooks/labs/ -> notebooks/ -> .
STORE = ROOT / "tests" / "hidden" / "test_04_collected_tasks.py"  # where the kata's PriceStore lives
REFERENCE = ROOT / "solutions" / "04_collected_tasks.py"  # run, never shown

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
    Line2D([], [], marker="x", ls="", color="#cf222e", ms=5,
           label="the store sees it close, no command: the write vanished"),
    Line2D([], [], ls="--", color="#9a6700", label="gc.collect(): the waiting writes die here"),
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
    "close, in ms from the invocation's first connection; a red cross is when the store saw a write's connection "
    "close with no command, a little after the write itself died."
)


def vanished(run: dict) -> list[float]:
    """When the store saw each connection close without a command (ms after the collection), earliest first."""
    rows: dict = {}
    for number, what, t in run["events"]:
        rows.setdefault(number, {})[what] = t
    if run["collected_at"] is None:
        return []
    return sorted((seen["closed"] - run["collected_at"]) * 1000 for seen in rows.values()
                  if "closed" in seen and not {"SET", "GET"} & set(seen))


def closed_after_collection(run: dict) -> str:
    """One line: how long after the collection the store saw the destroyed writes' connections close."""
    gaps = vanished(run)
    if not gaps:
        return "no connection closed without a command"
    return (f"the store saw the {len(gaps)} destroyed writes' connections close between {gaps[0]:.1f} ms and "
            f"{gaps[-1]:.1f} ms after the collection")


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
