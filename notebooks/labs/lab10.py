"""The harness of notebook 10 (The traceback the runner swallowed): real runs, in fresh processes.

Every run loads one implementation of the kata's runner in a fresh Python
process (`run_isolated`), hands it real steps, and brings back what it
answered and what it logged, rendered by a real logging.Formatter:

- `receipt_track(impl, runs, workers)`: the incident's receipt track. Each run
  is one handler call with two steps, `ocr` and `vision`, that take slots of a
  limiter made once per process (kata 01's bug); each worker is a process of
  its own, cold for its first run and warm after.
- `held(impl)`: one cold and one warm run on a worker, through the runner's own
  `run_workflow`: the outcome the log line was written from.
- `invocation(impl, steps, failing, ...)`: one layer of receipts, some of which
  fail two calls deep, in `parse_total`; what came back, what was logged, and,
  under a deadline, what was still logged after handler had raised.
- `draw(ax, run, title)`: one run as two strips, the outputs and the log, each
  with colours of its own; `legend(fig)` puts one legend per strip under it.

The steps are defined in this file, so tracebacks point into it.
"""
from __future__ import annotations

import asyncio
import functools
import importlib.util
import json
import logging
import sys
import sysconfig
import time
import traceback
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parents[1]
ROOT = NOTEBOOKS.parent  # the project
STDLIB = sysconfig.get_paths()["stdlib"]
TEXT = "%(levelname)s %(name)s: %(message)s"


# --- the steps of the receipt track (the incident) ----------------------------------

LIMIT = asyncio.Semaphore(3)  # made once per process, as the incident's get_concurrency_limiter() was


async def take_slot():
    await LIMIT.acquire()


async def call_tool(tool: str, receipt: str) -> str:
    await take_slot()  # the step executor takes a slot for the tool call...
    try:
        await asyncio.sleep(0.005)
        return f"{tool}: 3 fields from {receipt}"
    finally:
        LIMIT.release()


async def ocr(receipt: str) -> str:
    await take_slot()  # ...and the layer runner has taken one for the step
    try:
        return await call_tool("ocr", receipt)
    finally:
        LIMIT.release()


async def vision(receipt: str) -> str:
    await take_slot()
    try:
        return await call_tool("vision", receipt)
    finally:
        LIMIT.release()


def receipt_layers(receipt: str) -> list[dict]:
    return [{"ocr": functools.partial(ocr, receipt), "vision": functools.partial(vision, receipt)}]


# --- the steps of a batch: one receipt per step ---------------------------------------

QUICK, SLOW = 0.005, 0.2  # seconds a step that succeeds takes: every third step is quick
FIRST_FAILURE, LATER_FAILURES = 0.03, 0.15  # when the failing steps fail


def parse_total(line: str) -> float:
    amount = line.rsplit(" ", 1)[-1].replace(",", ".")
    return float(amount)


async def extract_fields(receipt: str, line: str, seconds: float) -> dict:
    await asyncio.sleep(seconds)  # the vision model reads the receipt
    return {"receipt": receipt, "total": parse_total(line)}


def batch_layers(steps: int, failing: list[int]) -> list[dict]:
    layer = {}
    for n in range(1, steps + 1):
        name = f"receipt-{n:02d}"
        if n in failing:
            seconds = FIRST_FAILURE if n == min(failing) else LATER_FAILURES
            line = f"TOTAL EUR {n},5O"  # OCR read the last 0 as the letter O
        else:
            seconds = QUICK if n % 3 == 0 else SLOW
            line = f"TOTAL EUR {n},90"
        layer[name] = functools.partial(extract_fields, name, line, seconds)
    return [layer]


# --- logging as a service would set it up ------------------------------------------

class JsonLines(logging.Formatter):
    """One JSON object per record, as a log shipper wants it: the exception goes in its own field."""

    def format(self, record):
        doc = {"level": record.levelname, "logger": record.name, "message": record.getMessage()}
        if record.exc_info:
            doc["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(doc)


class Kept(logging.Handler):
    def __init__(self, formatter):
        super().__init__(logging.DEBUG)
        self.setFormatter(formatter)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


def _load(impl: str, name: str = "workflow"):
    spec = importlib.util.spec_from_file_location(name, impl)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def tidy(text: str, impl: str = "") -> str:
    """Paths as a reader of this notebook can follow them, whatever the machine."""
    if impl:
        folder = str(Path(impl).parent) + "/"
        text = text.replace(folder, "" if "pristine" in folder else folder.replace(str(ROOT) + "/", ""))
    return text.replace(str(NOTEBOOKS) + "/", "").replace(str(ROOT) + "/", "").replace(STDLIB + "/", "<python>/")


def folded(exc: BaseException) -> str:
    """A traceback with Python's own frames folded into one line (their line numbers change between versions)."""
    lines, inside = ["Traceback (most recent call last):"], []

    def fold():
        if inside:
            where = ", ".join(f"{Path(f.filename).name} in {f.name}" for f in inside)
            lines.append(f"  ... {len(inside)} frame{'s' if len(inside) > 1 else ''} inside Python's asyncio ({where})")
            inside.clear()

    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename.startswith(STDLIB):
            inside.append(frame)
            continue
        fold()
        lines += [f'  File "{tidy(frame.filename)}", line {frame.lineno}, in {frame.name}', f"    {frame.line}"]
    fold()
    lines.append(f"{type(exc).__name__}: {exc}")
    return "\n".join(lines)


# --- what runs in the child processes ------------------------------------------------

def _track_worker(impl: str, first: int, count: int) -> dict:
    kata = _load(impl)
    kept = Kept(logging.Formatter(TEXT))
    logging.getLogger().addHandler(kept)
    runs = []
    for n in range(first, first + count):
        kept.records.clear()
        answer = kata.handler({"layers": receipt_layers(f"receipt-{n:02d}")})
        runs.append({"run": n, "outputs": sorted(answer["outputs"]), "failed": list(answer["failed"]),
                     "log": [kept.format(r) for r in kept.records]})
    return {"runs": runs}


def _held(impl: str) -> dict:
    kata = _load(impl)
    seen = {}
    for invocation in ("cold", "warm"):
        outcomes = asyncio.run(kata.run_workflow(receipt_layers("receipt-02")))
        seen[invocation] = {
            name: ({"type": type(o).__name__, "message": str(o), "folded": folded(o),
                    "has_traceback": o.__traceback__ is not None} if isinstance(o, BaseException) else {"output": o})
            for name, o in outcomes.items()
        }
    seen["exc_info_after_gather"] = repr(sys.exc_info())
    return seen


class _Context:
    def __init__(self, ms: int):
        self.ms = ms

    def get_remaining_time_in_millis(self) -> int:
        return self.ms


def _classify(records, name: str, exc_text: str, failing: list[str]) -> str:
    """What the log says about one failed step."""
    mine = []
    for r in records:
        text = logging.Formatter(TEXT).format(r)
        others = [f for f in failing if f != name]
        if exc_text in text or (name in r.getMessage() and not any(o in r.getMessage() for o in others)):
            mine.append((r, text))
    if not mine:
        return "not logged"
    if any(r.exc_info and isinstance(r.exc_info[1], asyncio.CancelledError) for r, _ in mine):
        return "a CancelledError, logged as its failure"
    for r, text in mine:
        if r.exc_info and r.exc_info[1] is not None and "in parse_total" in text:
            return "the traceback"
    if any(r.exc_info and r.exc_info[1] is None for r, _ in mine):
        return '"NoneType: None"'
    if any(exc_text in r.getMessage() for r, _ in mine):
        return "the message only"
    return "the type only"


def _invocation(impl: str, steps: int, failing: list[int], fmt: str, remaining_ms: int | None) -> dict:
    kata = _load(impl)
    formatter = JsonLines() if fmt == "json" else logging.Formatter(TEXT)
    kept = Kept(formatter)
    logging.getLogger().addHandler(kept)
    answer, raised = None, None
    try:
        context = _Context(remaining_ms) if remaining_ms else None
        answer = kata.handler({"layers": batch_layers(steps, failing)}, context)
    except Exception as exc:  # noqa: BLE001 - what the handler raised is part of what we show
        raised = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    on_time = len(kept.records)
    if remaining_ms:
        time.sleep(SLOW + 0.1)  # past the longest step: anything the invocation left running logs by now
    late = kept.records[on_time:]
    del kept.records[on_time:]
    names = [f"receipt-{n:02d}" for n in range(1, steps + 1)]
    failing = [n for n in failing if 1 <= n <= steps]
    failed_names = [f"receipt-{n:02d}" for n in failing]
    outputs = sorted(answer["outputs"]) if answer else []
    return {
        "steps": names, "failing": failed_names, "outputs": outputs, "raised": raised,
        "failed": list(answer["failed"]) if answer else [],
        "log": tidy("\n".join(kept.format(r) for r in kept.records), impl),
        "records": len(kept.records),
        "late": tidy("\n".join(kept.format(r) for r in late), impl),
        "late_records": len(late),
        "logged": {name: _classify(kept.records, name, f"could not convert string to float: '{n}.5O'", failed_names)
                   for n, name in zip(failing, failed_names)},
    }


_CHILD = """
import json, sys
sys.path.insert(0, {notebooks!r})
from labs import lab10
print(json.dumps(lab10.{function}(*{args!r})))
"""


def _in_child(function: str, *args, timeout: float = 30) -> dict:
    from loopkata import run_isolated

    out = run_isolated(_CHILD.format(notebooks=str(NOTEBOOKS), function=function, args=args), timeout=timeout)
    if out.returncode != 0:
        out.show()
        raise RuntimeError(f"the run ({function}) did not finish cleanly")
    return json.loads(out.stdout.strip().splitlines()[-1])


# --- what the notebook calls ---------------------------------------------------------

def receipt_track(impl, runs: int = 45, workers: int = 2) -> list[dict]:
    """The receipt track: `runs` runs spread over `workers` warm workers (processes), in order."""
    impl = str(Path(impl).resolve())
    share, extra = divmod(runs, workers)
    out, first = [], 1
    for w in range(workers):
        count = share + (1 if w < extra else 0)
        for run in _in_child("_track_worker", impl, first, count)["runs"]:
            out.append({**run, "worker": w + 1, "log": [tidy(line, impl) for line in run["log"]]})
        first += count
    return out


def held(impl) -> dict:
    """A cold and a warm run through the runner's run_workflow: what it hands to the log line."""
    return _in_child("_held", str(Path(impl).resolve()))


def invocation(impl, steps: int = 12, failing=(4, 9), fmt: str = "text", remaining_ms: int | None = None) -> dict:
    """One layer of `steps` receipts, the numbers in `failing` failing in parse_total, through handler."""
    return _in_child("_invocation", str(Path(impl).resolve()), steps, sorted(set(failing)), fmt, remaining_ms)


def short(run: dict) -> str:
    """What came back: the outputs returned, or what handler raised instead."""
    if run["raised"]:
        return f"no answer, handler raised {run['raised'].split(':')[0]}"
    return f"{len(run['outputs'])} of {len(run['steps']) - len(run['failing'])} outputs returned"


def describe(run: dict) -> str:
    said = "; ".join(f"{name}: {what}" for name, what in run["logged"].items()) or "no step failed"
    after = (f"; {run['late_records']} more record{'s' if run['late_records'] > 1 else ''} logged after handler "
             f"had {'raised' if run['raised'] else 'returned'}" if run.get("late_records") else "")
    return f"{short(run)}; what the log says about each failing step: {said}{after}"


# --- the figure -------------------------------------------------------------------------

# The two strips speak of different things, so they use different colours: red and green only
# for outputs, each cell also marked (a tick, a cross); for the log, one scale of purple from "not
# logged" to "the traceback", and the same scale as how full the cell is, so it reads at a glance
# without telling purples apart.
OUTPUT_COLOURS = {"output returned": "#1a7f37", "output lost": "#cf222e", "a failing step: no output": "#d0d7de"}
OUTPUT_MARKS = {"output returned": "✓", "output lost": "✗", "a failing step: no output": ""}
LOG_COLOURS = {
    "not logged": "#dadaeb",
    "the type only": "#bcbddc",
    '"NoneType: None"': "#9e9ac8",
    "the message only": "#756bb1",
    "the traceback": "#3f007d",
}
LOG_WORDS = {  # written in each log cell
    "not logged": "none", "the type only": "type", '"NoneType: None"': "NoneType",
    "the message only": "message", "the traceback": "traceback",
}
LOG_FILL = {said: i / (len(LOG_COLOURS) - 1) for i, said in enumerate(LOG_COLOURS)}  # 0 (empty) to 1 (full)


def draw(ax, run: dict, title: str) -> None:
    """Two strips, one cell per step: was its output returned (colour and mark); and for a failed
    step, what the log says (colour, and how full the cell is: empty for nothing, full for the traceback)."""
    from matplotlib.patches import Rectangle

    def cell(x, y, colour, height=1.0, **kw):
        ax.add_patch(Rectangle((x - 0.5, y + 0.5 - height), 1, height, facecolor=colour, **kw))

    for x, name in enumerate(run["steps"]):
        kind = ("a failing step: no output" if name in run["failing"]
                else "output returned" if name in run["outputs"] else "output lost")
        cell(x, 0, OUTPUT_COLOURS[kind], edgecolor="white", linewidth=2)
        ax.text(x, 0, OUTPUT_MARKS[kind], ha="center", va="center", fontsize=13, color="white", fontweight="bold")
        if name in run["failing"]:
            said = run["logged"][name]
            cell(x, 1, "#f6f8fa", edgecolor="#8c959f", linewidth=1)
            fill = LOG_FILL.get(said, 0.0)
            if fill:
                cell(x, 1, LOG_COLOURS[said], height=fill, edgecolor="none")
            ax.text(x, 1, LOG_WORDS.get(said, said), ha="center", va="center", fontsize=9, color="#24292f",
                    bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "none", "pad": 1.5})
    ax.set_xlim(-0.5, len(run["steps"]) - 0.5)
    ax.set_ylim(1.5, -0.5)
    ax.set_yticks([0, 1], ["output", "log"], fontsize=9)
    ax.set_xticks(range(len(run["steps"])), [str(i + 1) for i in range(len(run["steps"]))], fontsize=9)
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_title(title, fontsize=10, loc="left")


def legend(fig) -> None:
    """One legend per strip, under the panels: what the colours of that strip mean."""
    from matplotlib.patches import Patch

    logs = [Patch(facecolor=c, edgecolor="#8c959f", label=f"{LOG_WORDS[label]}: {label}")
            for label, c in LOG_COLOURS.items()]
    outputs = [Patch(facecolor=c, edgecolor="#8c959f", label=f"{OUTPUT_MARKS[label]} {label}".strip())
               for label, c in OUTPUT_COLOURS.items()]

    fig.legend(handles=outputs, loc="lower center", bbox_to_anchor=(0.5, 0.075), ncol=3,
               frameon=False, fontsize=9, title="output strip: did the step's output come back?", title_fontsize=9)
    fig.legend(handles=logs, loc="lower center", bbox_to_anchor=(0.5, 0.0), ncol=3,
               frameon=False, fontsize=9, title="log strip, failing steps only: what the log says about the failure "
               "(the fuller and darker the cell, the more it says; a full cell is the traceback)", title_fontsize=9)
