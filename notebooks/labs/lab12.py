"""The harness of notebook 12 (The job that started a loop inside a loop): the reports API, served for real.

`serve(starter, runner, seconds)` runs the kata's starter in a fresh Python
process: the warehouse's API (the stand-in the hidden tests use, a real HTTP
server on 127.0.0.1 whose store call takes `seconds`), the app served by
uvicorn on 127.0.0.1 (an ephemeral port), and a liveness probe that sends
GET /health on a fresh connection every PROBE_EVERY seconds and times each
answer. After a short calm it sends one POST /reports, then follows the job
with GET /jobs/{id} until it ends. It records when the request answered, how
the job ended, every probe, and the job's log record with its traceback. A
fresh process each time, with a hard deadline (`run_isolated`): a frozen
event loop must never take the kernel with it.

`runner` picks the starter as shipped, or the starter with one of the first
fixes people reach for laid over it (RUNNERS: each is one of the kata's
decoys, a wrong fix). `report(run)` prints a run in words; `draw(runs)` plots
what each runner did to the request, to /health and to the job.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import matplotlib.pyplot as plt

from loopkata import run_isolated

from .shared import decoy_files

ROOT = Path(__file__).resolve().parents[2]  # the project: notebooks/labs/ -> notebooks/ -> .
HIDDEN = ROOT / "tests" / "hidden"  # where the warehouse's stand-in lives (nested_run_harness.py)

PROBE_EVERY = 0.05  # seconds between two liveness probes
KUBELET_TIMEOUT = 1.0  # seconds: a liveness probe's default timeoutSeconds
SEND_AT = 0.3  # seconds of calm before the request is sent

# Each runner: the kata's decoy whose files (where it differs from the reference fix) replace the starter's
# (None: the starter as shipped).
RUNNERS = {
    "as shipped": None,
    "Celery eager": "celery_task_always_eager",
    "run_until_complete": "run_until_complete_on_the_running_loop",
    "nest_asyncio": "nest_asyncio_apply",
    "awaited in the request": "job_awaited_in_the_request",
}
LABELS = {
    "as shipped": "as shipped (create_task)",
    "Celery eager": "Celery, task_always_eager",
    "run_until_complete": "run_until_complete",
    "nest_asyncio": "nest_asyncio2.apply()",
    "awaited in the request": "to_thread, awaited in the request",
}

_CHILD = r"""
import importlib, importlib.util, json, logging, shutil, sys, tempfile, threading, time
from pathlib import Path

import httpx

sys.path.insert(0, HIDDEN)
from nested_run_harness import NO_TLS, Warehouse, served

# The starter as shipped, with the chosen runner's files laid over it.
package = Path(tempfile.mkdtemp()) / "reports"
shutil.copytree(STARTER, package, ignore=shutil.ignore_patterns("__pycache__"))
if OVERLAY:
    for f in Path(OVERLAY).glob("*.py"):
        if f.name != "__init__.py":
            shutil.copy(f, package / f.name)
spec = importlib.util.spec_from_file_location("reports", package / "__init__.py",
                                              submodule_search_locations=[str(package)])
sys.modules["reports"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sys.modules["reports"])
app_module = importlib.import_module("reports.app")

records = []                                  # the job log: [message, traceback]
class Keep(logging.Handler):
    def emit(self, record):
        trace = logging.Formatter().formatException(record.exc_info) if record.exc_info else ""
        records.append([record.getMessage(), trace])
logging.getLogger("reports.jobs").addHandler(Keep())

warehouse = Warehouse(slow=SECONDS).__enter__()
serving = served(app_module.create_app(warehouse.url))  # kept: it stops the server when it is collected
server = serving.__enter__()
with httpx.Client(verify=NO_TLS) as warm:     # the first request to a new app is slow: not the probe's
    warm.get(f"{server.url}/health")
t0 = time.monotonic()
def now():
    return time.monotonic() - t0

probes, stop = [], threading.Event()          # [sent at, seconds to answer or None]
def probe():
    while not stop.is_set():
        sent = now()
        try:
            with httpx.Client(timeout=WATCH, verify=NO_TLS) as client:
                client.get(f"{server.url}/health")
            probes.append([sent, now() - sent])
        except httpx.HTTPError:
            probes.append([sent, None])
        stop.wait(PROBE_EVERY)
threading.Thread(target=probe, daemon=True).start()

time.sleep(SEND_AT)
run = {"sent": now(), "answered": None, "said": None, "job": None, "ended": None}
try:
    with httpx.Client(timeout=WATCH, verify=NO_TLS) as client:
        r = client.post(f"{server.url}/reports", json={"customer": "slow-ada"})
        job_id = r.json().get("job_id")
        run["answered"], run["said"] = now(), f"{r.status_code}, a job id" if job_id else f"{r.status_code} {r.text[:80]}"
        while job_id and now() < WATCH:
            job = client.get(f"{server.url}/jobs/{job_id}").json()
            if job["state"] in ("done", "failed"):
                run["job"], run["ended"] = job, now()
                break
            time.sleep(0.02)
except httpx.HTTPError as exc:
    run["said"] = type(exc).__name__
time.sleep(0.2)
stop.set()
time.sleep(PROBE_EVERY)
run["probes"], run["log"] = probes, records
warehouse.release()
print(json.dumps(run))
"""


def serve(starter: Path, runner: str = "as shipped", seconds: float = 1.0) -> dict:
    """One POST /reports through the starter (with `runner`'s files laid over it), a job whose store call takes `seconds`."""
    overlay = RUNNERS[runner]
    watch = seconds + 4
    code = (_CHILD.replace("HIDDEN", repr(str(HIDDEN))).replace("STARTER", repr(str(starter)))
            .replace("OVERLAY", repr(str(decoy_files("nested-run", overlay, "loopkata-nb12-")) if overlay else ""))
            .replace("SECONDS", repr(seconds)).replace("WATCH", repr(watch))
            .replace("SEND_AT", repr(SEND_AT)).replace("PROBE_EVERY", repr(PROBE_EVERY)))
    outcome = run_isolated(code, timeout=watch + 20)
    lines = [line for line in outcome.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"the run did not finish: {outcome!r}\n{outcome.stderr[-2000:]}")
    run = json.loads(lines[-1])
    run["runner"], run["seconds"] = runner, seconds
    return run


def slowest(run: dict, during: bool = True) -> float:
    """The slowest /health answer (seconds) sent after the request (or before it)."""
    times = [took if took is not None else float("inf") for sent, took in run["probes"]
             if (sent >= run["sent"]) == during]
    return max(times, default=0.0)


def post_took(run: dict) -> float | None:
    return None if run["answered"] is None else run["answered"] - run["sent"]


def traceback_tail(run: dict) -> list[str]:
    """The job's logged traceback, one line per frame ("jobs.py:20 in run_async"; a library's frames without
    their line numbers, which differ between Python versions), then the error."""
    for _, trace in run["log"]:
        if trace:
            frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', trace)
            out = [f"{Path(f).name}:{n} in {fn}" if "/reports/" in f else f"{Path(f).name} in {fn}"
                   for f, n, fn in frames]
            return out + [trace.strip().splitlines()[-1]]
    return []


def outcome(run: dict) -> str:
    job = run["job"]
    if job is None:
        return "still running when the run ended"
    return "done" if job["state"] == "done" else f"failed: {job['error']}"


def report(run: dict) -> None:
    took = post_took(run)
    print(f"{LABELS[run['runner']]}: a job whose store call takes {run['seconds']:.1f} s")
    print(f"  POST /reports answered after:  {'no answer' if took is None else f'{took:.2f} s'} ({run['said']})")
    print(f"  /health before the request:    slowest answer {slowest(run, during=False):.3f} s")
    worst = slowest(run)
    print(f"  /health after the request:     slowest answer {worst:.3f} s"
          + (f" (over a liveness probe's {KUBELET_TIMEOUT:g} s timeout)" if worst > KUBELET_TIMEOUT else ""))
    print(f"  the job:                       {outcome(run)}")


def draw(runs: list[dict], title: str) -> None:
    """One row per runner: how long the request waited (left) and the slowest /health answer (right)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 0.7 * len(runs) + 2.0), sharey=True)
    names = [LABELS[r["runner"]] for r in runs][::-1]
    rows = range(len(runs))
    posts = [post_took(r) or 0.0 for r in runs][::-1]
    health = [slowest(r) for r in runs][::-1]
    left.barh(rows, posts, color="#4c72b0")
    right.barh(rows, health, color="#dd8452")
    # A dot at the end of each bar: a wait of a few milliseconds, which is what a free loop gives, still shows.
    left.scatter(posts, list(rows), s=120, color="#4c72b0", zorder=3)
    right.scatter(health, list(rows), s=120, color="#dd8452", zorder=3)
    for ax, values in ((left, posts), (right, health)):
        ax.axvline(runs[0]["seconds"], color="grey", linestyle="--", linewidth=1,
                   label=f"the job's store call ({runs[0]['seconds']:g} s)")
        for y, v in zip(rows, values):
            ax.text(v, y, f" {v:.2f} s", va="center", fontsize=9)
        ax.set_xlim(0, max(runs[0]["seconds"] * 1.5, max(values) * 1.3))
    for y, r in zip(rows, runs[::-1]):
        right.text(right.get_xlim()[1], y, "  job " + ("done" if outcome(r) == "done" else "failed"),
                   va="center", fontsize=9, color="black" if outcome(r) == "done" else "#c44e52")
    left.set_yticks(list(rows), names)
    left.set_title("POST /reports: time until it answered", fontsize=10)
    right.set_title("GET /health: slowest answer after the request", fontsize=10)
    for ax in (left, right):
        ax.set_xlabel("seconds")
    left.legend(loc="upper right", fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
