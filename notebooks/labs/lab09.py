"""The harness of notebook 09 (The keepalive that cancelled the stream): one stream, for real.

`stream(impl, steps, keepalive)` serves an implementation of the kata in a
fresh Python process: the app of `impl` (a package folder), with uvicorn on
127.0.0.1, over a scripted draft whose step n sleeps `steps[n]` seconds. A
client in the same process reads `GET /drafts/{id}/events` with httpx, as a
browser would. It returns what the client received (every frame, with its
arrival time) and what the generator did (every step started, finished or
cancelled, and its `finally`). The server, the draft and the client are the
ones the kata's hidden tests use (tests/hidden/keepalive_stream_harness.py);
the child always stops its server, and `run_isolated` kills it if it hangs.

`decoy(name)` is a folder holding the files where the kata's decoy `name` (a
wrong fix) differs from the reference fix: `stream(STARTER, over=decoy(name))`
lays them over the starter. `show(run)` prints what arrived,
`draw(run, ax, title)` draws its timeline (`rows(run)` of them), and
`cancelling_waits(path)` finds the lines that wait for a generator's next event
under a deadline that cancels it. `leave_midway(impl, steps, keepalive)` is a
client that goes away in the middle of a step, and what the server did after.
"""
from __future__ import annotations

import ast
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from matplotlib.lines import Line2D

from loopkata import run_isolated

from .shared import decoy_files

ROOT = Path(__file__).resolve().parents[2]  # the project: notebooks/labs/ -> notebooks/ -> .
HARNESS = ROOT / "tests" / "hidden"  # where keepalive_stream_harness.py lives

# The start of every child process: the app at `impl` (with the decoy at `over` laid over it)
# loaded from a private copy, as `app`. Every path it is given is absolute: the notebook
# reproduces the starter from a private copy (pristine_starter), not from katas/.
_LOAD_APP = """
import importlib, importlib.util, json, shutil, sys, tempfile, time
from pathlib import Path

sys.path.insert(0, {harness!r})
from keepalive_stream_harness import Script, Served, read_stream

with tempfile.TemporaryDirectory() as tmp:
    package = Path(tmp) / "drafts_service"
    shutil.copytree({impl!r}, package, ignore=shutil.ignore_patterns("__pycache__"))
    if {over!r}:
        for f in Path({over!r}).glob("*.py"):
            shutil.copy(f, package / f.name)
    spec = importlib.util.spec_from_file_location(
        "drafts_service", package / "__init__.py", submodule_search_locations=[str(package)])
    sys.modules["drafts_service"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules["drafts_service"])
    app = importlib.import_module("drafts_service.app")
"""

# One stream, read to its end.
_CHILD = _LOAD_APP + """
    script = Script({steps!r})
    with Served(app.create_app(script.events, {keepalive!r})) as server:
        reading = read_stream(f"{{server.url}}/drafts/d-42/events", deadline={deadline!r}, silence={deadline!r})
    frames = [{{"t": t, "kind": "keepalive" if f.startswith(":") else "event", "text": f}} for t, f in reading.frames]
    steps = [{{"t": reading.at(t), "what": w, "step": s}} for t, w, s in script.log if t < server.stopping_at]
    print(json.dumps({{
        "keepalive": {keepalive!r}, "planned": {steps!r}, "frames": frames, "steps": steps,
        "ended": reading.ended, "ended_at": reading.ended_at, "headers_at": reading.headers_at,
        "starts": script.starts(), "errors": server.error_text(),
    }}))
"""


def decoy(name: str) -> Path:
    """The files where the kata's decoy `name` differs from the reference fix, in a folder of their own."""
    return decoy_files("keepalive-stream", name, "loopkata-nb09-")


def stream(impl, steps, keepalive, over=None, timeout=60.0) -> dict:
    """One stream of the app at `impl` (a package folder; `over`: a decoy folder laid over it), in a fresh process.

    Returns a dict: keepalive, planned (the step durations), frames (t, kind, text),
    steps (t, what, step: the generator's log), ended and ended_at (how and when the
    stream ended), starts (how many times each step started), errors (the server's).
    """
    impl = str(Path(impl).resolve())
    deadline = 2 * sum(steps) + 3 * keepalive + 1.0
    code = _CHILD.format(harness=str(HARNESS), impl=impl, over=str(Path(over).resolve()) if over else "",
                         steps=list(steps), keepalive=keepalive, deadline=deadline)
    out = run_isolated(code, timeout=deadline + 20)
    if out.returncode != 0:
        out.show()
        raise RuntimeError(f"the stream of {Path(over or impl).name} did not finish cleanly")
    run = json.loads(out.stdout.strip().splitlines()[-1])
    run["starts"] = {int(k): v for k, v in run["starts"].items()}
    return run


# A client that leaves at the first keepalive after section 0, in the middle of step 1; then the child
# keeps the server up and watches the generator until it is closed and no step runs (or `linger` is up).
_LEAVING = _LOAD_APP + """
    def leave(reading):
        return bool(reading.items()) and reading.frames[-1][1].startswith(":")

    script = Script({steps!r})
    with Served(app.create_app(script.events, {keepalive!r})) as server:
        reading = read_stream(f"{{server.url}}/drafts/d-42/events", deadline={linger!r}, leave=leave)
        time.sleep(0.2)
        pending = server.pending_tasks()   # what the server's loop still runs 0.2 s after the client left
        while time.monotonic() - reading.started < {linger!r} and (not script.closed() or script.running()):
            time.sleep(0.01)
    steps = [{{"t": reading.at(t), "what": w, "step": s}} for t, w, s in script.log if t < server.stopping_at]
    print(json.dumps({{"left_at": reading.ended_at, "ended": reading.ended, "steps": steps, "pending": pending,
                      "still_running": script.running(), "closed": script.closed()}}))
"""


def leave_midway(impl, steps, keepalive, over=None) -> dict:
    """A client that leaves at the first keepalive after section 0, and what the server did after it left.

    Returns a dict: left_at (seconds since the request), steps (the generator's log, as
    in `stream`), pending (the tasks on the server's loop 0.2 s after the client left),
    still_running and closed (the steps running, and whether the generator was closed,
    when the watch ended: once it was closed and idle, or after the whole draft's time).
    """
    impl = str(Path(impl).resolve())
    linger = sum(steps) + 2 * keepalive + 1.0
    code = _LEAVING.format(harness=str(HARNESS), impl=impl, over=str(Path(over).resolve()) if over else "",
                           steps=list(steps), keepalive=keepalive, linger=linger)
    out = run_isolated(code, timeout=linger + 20)
    if out.returncode != 0:
        out.show()
        raise RuntimeError(f"the stream of {Path(over or impl).name} did not finish cleanly")
    return json.loads(out.stdout.strip().splitlines()[-1])


def streams(*runs: dict) -> list[dict]:
    """Several `stream(**kwargs)` runs at once, each in its own process; their results in order."""
    with ThreadPoolExecutor(len(runs)) as pool:
        return list(pool.map(lambda kwargs: stream(**kwargs), runs))


def sections(run: dict) -> list[str]:
    """The data of every event the client received, in order."""
    return [" ".join(line[5:].strip() for line in f["text"].splitlines() if line.startswith("data:"))
            for f in run["frames"] if f["kind"] == "event"]


ENDINGS = {
    "complete": "end of stream",
    "broken": "the server broke the response off",
    "silent": "nothing more (the client stopped waiting)",
    "deadline": "still streaming (the client stopped reading)",
}


def show(run: dict) -> None:
    """What the browser received, line by line, with the time since the request."""
    print("what the client received (seconds since the request):")
    for f in run["frames"]:
        text = f["text"] if f["kind"] == "keepalive" else f["text"].replace("\n", " | ")
        print(f"  {f['t']:6.2f} s  {text}")
    print(f"  {run['ended_at']:6.2f} s  [{ENDINGS.get(run['ended'], run['ended'])}]")
    if run["errors"]:
        print(f"the server logged: {run['errors']}")


def describe_steps(run: dict) -> str:
    """The generator's side of the story, one line per event."""
    lines = []
    for e in run["steps"]:
        if e["what"] == "opened":
            lines.append(f"  {e['t']:6.2f} s  the generator starts (from step {e['step']})")
        elif e["what"] == "closed":
            lines.append(f"  {e['t']:6.2f} s  the generator's finally runs: it is closed")
        else:
            lines.append(f"  {e['t']:6.2f} s  step {e['step']} {e['what']}")
    return "\n".join(lines)


# --- the timeline -------------------------------------------------------------

STEP_COLOURS = {"finished": "#1a7f37", "cancelled": "#cf222e", "running": "#9a6700"}
CLIENT_ROWS = ("the client: keepalives", "the client: sections", "the client: end of stream")

LEGEND = [
    Line2D([], [], color=STEP_COLOURS["finished"], lw=5, label="a step that ran to its end"),
    Line2D([], [], color=STEP_COLOURS["cancelled"], lw=5, label="a step cancelled midway (its work is lost)"),
    Line2D([], [], marker="|", ls="", color="#57606a", ms=12, mew=2, label="keepalive received"),
    Line2D([], [], marker="o", ls="", color="#0969da", ms=8, label="section received"),
    Line2D([], [], marker="s", ls="", color="black", mfc="none", mew=1.5, ms=9, label="end of stream"),
]


def _runs(run: dict) -> list[tuple[int, float, float, str]]:
    """(step, start, end, how) of every run of a step, in the order they started."""
    runs, open_ = [], {}
    for e in run["steps"]:
        if e["what"] == "started":
            open_[e["step"]] = e["t"]
        elif e["what"] in ("finished", "cancelled") and e["step"] in open_:
            runs.append((e["step"], open_.pop(e["step"]), e["t"], e["what"]))
    runs += [(step, t, run["ended_at"], "running") for step, t in open_.items()]
    return sorted(runs, key=lambda r: r[1])


def rows(run: dict) -> int:
    """How many rows `draw` gives a run: one per run of a step, and three for the client."""
    return len(_runs(run)) + len(CLIENT_ROWS)


def draw(run: dict, ax, title: str) -> None:
    """One stream's timeline: a row per run of each step (what the server did), then what the client got:
    keepalives, sections and the end of the stream each on a row of their own, so that none hides another."""
    ax.set_title(title, fontsize=10, loc="left")
    runs = _runs(run)
    labels = []
    for row, (step, start, end, how) in enumerate(runs):
        ax.plot([start, end], [row, row], color=STEP_COLOURS[how], lw=6, solid_capstyle="butt")
        labels.append(f"step {step}" + (" (again)" if any(r[0] == step for r in runs[:row]) else ""))
    first = len(runs)  # the client's rows follow the steps'
    ax.axhline(first - 0.5, color="#d0d7de", lw=1)
    keepalives = [f["t"] for f in run["frames"] if f["kind"] == "keepalive"]
    events = [f["t"] for f in run["frames"] if f["kind"] == "event"]
    ax.plot(keepalives, [first] * len(keepalives), "|", color="#57606a", ms=12, mew=2)
    ax.plot(events, [first + 1] * len(events), "o", color="#0969da", ms=8)
    if run["ended"] in ("complete", "broken"):
        ax.plot([run["ended_at"]], [first + 2], "s", color="black", mfc="none", mew=1.5, ms=9)
    ax.set_yticks(list(range(first + len(CLIENT_ROWS))), labels + list(CLIENT_ROWS), fontsize=9)
    ax.set_ylim(first + len(CLIENT_ROWS) - 0.2, -0.8)
    ax.grid(axis="x", color="#eaeef2")
    ax.set_xlabel("seconds since the request", fontsize=9)
    ax.tick_params(axis="x", labelsize=9)


# --- keeping it out -------------------------------------------------------------

def _is_next_event(node) -> bool:
    """`anext(x)` or `x.__anext__()`."""
    return isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Name) and node.func.id == "anext")
        or (isinstance(node.func, ast.Attribute) and node.func.attr == "__anext__")
    )


def _called(node, *names) -> bool:
    """A call of asyncio.NAME(...) or NAME(...)."""
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    return (isinstance(f, ast.Attribute) and f.attr in names) or (isinstance(f, ast.Name) and f.id in names)


def cancelling_waits(path) -> list[str]:
    """Lines that wait for an async generator's next event under a deadline that cancels it:
    wait_for(anext(...)) and `async with timeout(...)` around an `await anext(...)`."""
    found = []
    for file in sorted(Path(path).rglob("*.py")) if Path(path).is_dir() else [Path(path)]:
        tree = ast.parse(file.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if _called(node, "wait_for") and node.args and _is_next_event(node.args[0]):
                found.append(f"{file.name}:{node.lineno}: wait_for cancels the generator's step when it times out")
            if isinstance(node, ast.AsyncWith) and any(_called(i.context_expr, "timeout", "timeout_at")
                                                       for i in node.items):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Await) and _is_next_event(inner.value):
                        found.append(f"{file.name}:{inner.lineno}: asyncio.timeout cancels the generator's step "
                                     "when it expires")
    return found
