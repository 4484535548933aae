"""The harness of notebook 08 (The endpoint that froze the pod): the drafts service, served for real.

`serve(starter, endpoint, calls, seconds, prompt)` runs the kata's starter in a
fresh Python process: the model's API (the stand-in the hidden tests use, a
real HTTP server on 127.0.0.1 that answers after `seconds`), the app served by
uvicorn on 127.0.0.1 (an ephemeral port), and a liveness probe that sends
GET /health on a fresh connection every PROBE_EVERY seconds and times each
answer. After a short calm it sends `calls` POST /drafts at once, and it
records when the model took and answered each call, what each client got, and
every line of the access log. The process ends when the calls have answered,
or after `watch` seconds, like a pod that is killed: whatever was still in
flight never finishes. A fresh process each time, with a hard deadline
(`run_isolated`): a frozen event loop must never take the kernel with it.

`endpoint` picks the starter as shipped, or the starter with one of the wrong
first fixes applied (WRONG_FIXES): the access log is always the starter's.

`report(run)` prints a run in words; `draw(runs, title)` plots /health's latency
and the model's calls over time; `threads()` asks a real app which thread runs
an `async def` and a `def` endpoint, and shows a request that waits for a free
thread of the threadpool before its `def` endpoint begins.
"""
from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt

from loopkata import run_isolated

ROOT = Path(__file__).resolve().parents[2]  # the project: notebooks/labs/ -> notebooks/ -> .
HIDDEN = ROOT / "tests" / "hidden"  # where the model's stand-in lives (blocking_handler_harness.py)

PROBE_EVERY = 0.1  # seconds between two liveness probes
KUBELET_TIMEOUT = 1.0  # seconds: a liveness probe's default timeoutSeconds
BUDGET = 0.1  # seconds: the kata's budget for /health while slow calls run
SEND_AT = 0.4  # seconds of calm before the calls are sent

# Each wrong first fix as a change to the starter's app.py: (old text, new text).
WRONG_FIXES = {
    "async def": [],  # as shipped
    "def": [("async def create_draft", "def create_draft")],
    "sleep(0)": [
        ("from fastapi import APIRouter", "import asyncio\n\nfrom fastapi import APIRouter"),
        ("    text = model.complete(body.prompt)",
         "    await asyncio.sleep(0)  # give the loop a turn first\n    text = model.complete(body.prompt)"),
    ],
    "def /health": [("    async def health():", "    def health():")],
    "one-thread pool": [
        ("from fastapi import APIRouter",
         "import asyncio\nfrom concurrent.futures import ThreadPoolExecutor\n\nfrom fastapi import APIRouter"),
        ("router = APIRouter()", "router = APIRouter()\nmodel_thread = ThreadPoolExecutor(max_workers=1)"),
        ("    text = model.complete(body.prompt)",
         "    text = await asyncio.get_running_loop().run_in_executor(model_thread, model.complete, body.prompt)"),
    ],
}
LABELS = {
    "async def": "as shipped (async def)",
    "def": "the on-call fix (a plain def)",
    "sleep(0)": "await asyncio.sleep(0) first",
    "def /health": "/health made a plain def",
    "one-thread pool": "run_in_executor, one thread",
}

_CHILD = r"""
import importlib, importlib.util, json, logging, os, shutil, sys, tempfile, threading, time
from pathlib import Path

import httpx

sys.path.insert(0, HIDDEN)
from blocking_handler_harness import NO_TLS, ModelAPI, served

# The starter as shipped, with the chosen wrong fix applied to app.py.
package = Path(tempfile.mkdtemp()) / "drafts"
shutil.copytree(STARTER, package, ignore=shutil.ignore_patterns("__pycache__"))
app_py = package / "app.py"
text = app_py.read_text()
for old, new in CHANGES:
    assert old in text, f"the starter's app.py no longer holds {old!r}"
    text = text.replace(old, new, 1)
app_py.write_text(text)
spec = importlib.util.spec_from_file_location("drafts", package / "__init__.py",
                                              submodule_search_locations=[str(package)])
sys.modules["drafts"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sys.modules["drafts"])
app_module = importlib.import_module("drafts.app")

t0 = time.monotonic()
def now():
    return time.monotonic() - t0

log = []                                      # every line of the access log: [seconds, line]
class Keep(logging.Handler):
    def emit(self, record):
        log.append([now(), record.getMessage()])
access = logging.getLogger("drafts.access")
access.addHandler(Keep())
access.setLevel(logging.INFO)

model = ModelAPI(slow=SECONDS).__enter__()
serving = served(app_module.create_app(model.url))  # kept: it stops the server when it is collected
server = serving.__enter__()
with httpx.Client(verify=NO_TLS) as warm:     # the first request to a new app is slow: not the probe's
    warm.get(f"{server.url}/health")
log.clear()
t0 = time.monotonic()

answers = {}                                  # call number -> [seconds when answered, status]
def call(i):
    try:
        r = httpx.post(f"{server.url}/drafts", json={"prompt": f"{PROMPT}: reply number {i}"},
                       headers={"X-Request-ID": f"call-{i}"}, timeout=120, verify=NO_TLS)
        answers[i] = [now(), r.status_code]
    except httpx.HTTPError as exc:
        answers[i] = [now(), type(exc).__name__]

def loop_lines():                             # the service's lines the event loop thread is running
    frame, lines = sys._current_frames().get(server.loop_thread.ident), []
    while frame is not None:
        if frame.f_code.co_filename.startswith(str(package)):
            name = os.path.basename(frame.f_code.co_filename)
            source = open(frame.f_code.co_filename).read().splitlines()[frame.f_lineno - 1].strip()
            lines.append(f"{name}:{frame.f_lineno} in {frame.f_code.co_name}: {source}")
        frame = frame.f_back
    return lines[::-1]

probes, loop_at, sent = [], None, False
with httpx.Client(verify=NO_TLS, timeout=120, limits=httpx.Limits(max_keepalive_connections=0)) as prober:
    while True:
        if not sent and now() >= SEND_AT:
            for i in range(1, CALLS + 1):
                threading.Thread(target=call, args=(i,), daemon=True).start()
            sent = True
            if CALLS and model.wait_for_calls(1, 5):
                time.sleep(0.02)
                loop_at = loop_lines() if model.working else None  # only while the model holds a call
        if sent and len(answers) == CALLS and now() > max([a for a, _ in answers.values()] + [SEND_AT]) + 0.3:
            break
        if now() > SEND_AT + WATCH:
            break                             # the pod is killed: what was in flight never finishes
        started = now()
        try:                                  # a probe waits as long as it takes, until the pod is killed
            prober.get(f"{server.url}/health", timeout=max(SEND_AT + WATCH - started, 0.05))
            probes.append([started, now() - started])
        except httpx.TimeoutException:
            probes.append([started, None])    # still unanswered when the pod was killed
        time.sleep(max(0.0, PROBE_EVERY - (now() - started)))

print(json.dumps({
    "probes": probes, "answers": {str(k): v for k, v in answers.items()}, "log": log, "loop_at": loop_at,
    "spans": [[p, a - t0, None if b is None else b - t0] for p, a, b in model.spans],
}))
sys.stdout.flush()
os._exit(0)                                   # like a killed pod: nothing in flight gets to finish
"""


def serve(starter: Path, endpoint: str = "async def", calls: int = 1, seconds: float = 2.0,
          prompt: str = "slow", watch: float | None = None) -> dict:
    """Run the starter (with the wrong fix `endpoint`) in a fresh process; send `calls` at once; probe /health.

    `prompt` is "slow" (the model answers after `seconds`), "hang" (it never answers)
    or "fail" (it answers 503 at once). The run ends when every call has answered, or
    `watch` seconds after they were sent.
    """
    if endpoint not in WRONG_FIXES:
        raise ValueError(f"endpoint must be one of {list(WRONG_FIXES)}, got {endpoint!r}")
    watch = calls * seconds + 2.0 if watch is None else watch
    head = (f"STARTER, HIDDEN, CHANGES = {str(starter)!r}, {str(HIDDEN)!r}, {WRONG_FIXES[endpoint]!r}\n"
            f"CALLS, SECONDS, PROMPT, WATCH = {calls}, {seconds}, {prompt!r}, {watch}\n"
            f"SEND_AT, PROBE_EVERY = {SEND_AT}, {PROBE_EVERY}\n")
    out = run_isolated(head + _CHILD, timeout=watch + 30)
    if out.returncode != 0 or not out.stdout.strip():
        out.show()
        raise RuntimeError("the run did not finish")
    run = json.loads(out.stdout.strip().splitlines()[-1])
    run.update(endpoint=endpoint, calls=calls, seconds=seconds, prompt=prompt)
    return run


def during(run: dict) -> list:
    """The probes sent after the calls were, as [sent at, latency] in seconds."""
    return [p for p in run["probes"] if p[0] >= SEND_AT]


def slowest(run: dict, calm: bool = False) -> float:
    """The slowest /health answer during the calls (or, with calm=True, before them), in seconds."""
    probes = [p for p in run["probes"] if p[0] < SEND_AT] if calm else during(run)
    return max((float("inf") if latency is None else latency for _, latency in probes), default=float("nan"))


def lines_for(run: dict, request_id: str) -> list:
    """The access log's lines that name `request_id`."""
    return [line for _, line in run["log"] if f"id={request_id}" in line]


def report(run: dict) -> None:
    """One run in words."""
    what = {"slow": f"the model answers after {run['seconds']:.1f} s", "hang": "the model never answers",
            "fail": "the model answers 503 at once"}[run["prompt"]]
    calls = f"{run['calls']} call{'s' if run['calls'] != 1 else ''}"
    print(f"{LABELS[run['endpoint']]}: {calls} sent at once, {what}")
    print(f"  /health before the calls:  slowest answer {slowest(run, calm=True):.3f} s")
    worst = slowest(run)
    if worst == float("inf"):
        print("  /health during the calls:  a probe was still waiting for its answer when the run ended")
    else:
        print(f"  /health during the calls:  slowest answer {worst:.3f} s "
              f"({'over' if worst > KUBELET_TIMEOUT else 'within'} a liveness probe's {KUBELET_TIMEOUT:g} s timeout)")
    if run["loop_at"]:
        print("  the event loop thread, while the model worked on the first call:")
        for line in run["loop_at"]:
            print("     ", line)
    elif run["loop_at"] is not None:
        print("  the event loop thread, while the model worked on the first call: waiting for events (free)")
    for number in range(1, run["calls"] + 1):
        answer = run["answers"].get(str(number))
        said = f"{answer[1]} after {answer[0] - SEND_AT:.2f} s" if answer else "no answer (still in flight)"
        print(f"  call-{number}: {said}")


def draw(runs: list, title: str) -> None:
    """/health's latency (top row, each probe at the moment it was sent) and the model's calls (bottom row), one column per run."""
    fig, axes = plt.subplots(2, len(runs), figsize=(3.3 * len(runs), 5.2), sharex=True, sharey="row",
                             gridspec_kw={"height_ratios": [3, 2]}, squeeze=False)
    worst = max((latency for run in runs for _, latency in run["probes"] if latency is not None), default=1.0)
    top_ms = max(10_000, worst * 1000 * 2)
    for column, run in enumerate(runs):
        # when the run ended: its last probe answered, or its last call to the model ended
        end_of_run = max([t + (latency or 0) for t, latency in run["probes"]]
                         + [b for _, _, b in run["spans"] if b is not None] + [SEND_AT]) - SEND_AT
        top, bottom = axes[0, column], axes[1, column]
        # The probe sends its next request only once it has an answer: while the loop is
        # frozen there are no dots at all. Shade each span a probe spent waiting past the budget.
        for t, latency in run["probes"]:
            if latency is None or latency > BUDGET:
                until = end_of_run if latency is None else t - SEND_AT + latency
                top.axvspan(t - SEND_AT, until, color="#cf222e", alpha=0.12, lw=0,
                            label=f"a probe waiting past {BUDGET * 1000:.0f} ms: the loop frozen")
        points = [(t - SEND_AT, latency * 1000) for t, latency in run["probes"] if latency is not None]
        top.plot(*zip(*points), "o", ms=3.5, color="#0969da", label="GET /health answered")
        lost = [t - SEND_AT for t, latency in run["probes"] if latency is None]
        if lost:
            top.plot(lost, [top_ms * 0.6] * len(lost), "x", ms=7, mew=2, color="#cf222e", label="never answered")
        top.axhline(BUDGET * 1000, color="#1a7f37", ls="--", lw=1, label=f"{BUDGET * 1000:.0f} ms budget")
        top.axhline(KUBELET_TIMEOUT * 1000, color="#cf222e", ls=":", lw=1.2,
                    label=f"probe timeout {KUBELET_TIMEOUT:g} s")
        for ax in (top, bottom):
            ax.axvline(0, color="#6e7781", lw=0.8)
        top.set_yscale("log")
        top.set_title(LABELS[run["endpoint"]], fontsize=10)
        for row, (_, arrived, answered) in enumerate(sorted(run["spans"], key=lambda s: s[1]), start=1):
            end = answered if answered is not None else arrived + 0.1
            bottom.barh(row, end - arrived, left=arrived - SEND_AT, height=0.6, color="#8250df")
        bottom.set_xlabel("seconds after the calls were sent")
    axes[0, 0].set_ylabel("/health latency (ms)")
    axes[1, 0].set_ylabel("calls, in the order\nthe model took them")
    axes[1, 0].set_yticks(range(1, max(r["calls"] for r in runs) + 1))
    for ax in axes.flat:
        ax.tick_params(labelsize=9)
    axes[0, 0].set_ylim(1, top_ms)
    legend = {}  # one entry per label, from whichever panels have it
    for ax in axes[0]:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(label, handle)
    fig.legend(legend.values(), legend.keys(), loc="lower center", ncol=min(len(legend), 4), fontsize=9,
               frameon=False)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0.06, 1, 1))


_THREADS = r"""
import asyncio, json, os, sys, threading, time
import anyio.to_thread, httpx, uvicorn
from fastapi import FastAPI

sys.path.insert(0, HIDDEN)
from blocking_handler_harness import NO_TLS, served

app = FastAPI()

@app.get("/async")
async def on_async():
    return {"thread": threading.current_thread().name,
            "threadpool": anyio.to_thread.current_default_thread_limiter().total_tokens}

@app.get("/sync")
def on_sync():
    return {"thread": threading.current_thread().name}

with served(app) as server:
    with httpx.Client(verify=NO_TLS) as client:
        a = client.get(f"{server.url}/async").json()
        s = client.get(f"{server.url}/sync").json()

# A threadpool cut to QUEUE_THREADS threads, and one request more than that held in a def
# endpoint: how many requests reached the app, and for how many the endpoint had begun.
release, begun, received = threading.Event(), [], []

@app.get("/held")
def held():
    begun.append(time.monotonic())
    release.wait(5)
    return {}

async def counting(scope, receive, send):     # counts each request as the app receives it, on the loop
    if scope["type"] == "http" and scope["path"] == "/held":
        received.append(time.monotonic())
    await app(scope, receive, send)

def get_held(url):
    try:
        httpx.get(f"{url}/held", timeout=10, verify=NO_TLS)
    except httpx.HTTPError:
        pass

with served(counting, threads=QUEUE_THREADS) as server:
    clients = [threading.Thread(target=get_held, args=(server.url,)) for _ in range(QUEUE_THREADS + 1)]
    for c in clients:
        c.start()
    deadline = time.monotonic() + 5
    while (len(received) <= QUEUE_THREADS or len(begun) < QUEUE_THREADS) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)                           # time enough for a third endpoint to begin, if it could
    queue = {"threads": QUEUE_THREADS, "sent": len(clients), "received": len(received), "begun": len(begun)}
    release.set()
    for c in clients:
        c.join(10)
print(json.dumps({"async def": a["thread"], "def": s["thread"], "loop thread": server.loop_thread.name,
                  "threadpool": a["threadpool"], "cpus": os.cpu_count(), "queue": queue}))
"""


def threads(queue_threads: int = 2) -> dict:
    """Which thread runs an async def and a def endpoint of a real app served by uvicorn, and FastAPI's threadpool size.

    Also, under "queue": the threadpool cut to `queue_threads` threads and one request more
    than that held in a def endpoint, how many requests the app received and for how many
    the endpoint had begun.
    """
    out = run_isolated(f"HIDDEN, QUEUE_THREADS = {str(HIDDEN)!r}, {queue_threads}\n" + _THREADS, timeout=30)
    if out.returncode != 0:
        out.show()
        raise RuntimeError("the run did not finish")
    return json.loads(out.stdout.strip().splitlines()[-1])
