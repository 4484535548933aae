"""The harness of notebook 05 (The deadlock the async-to-def fix hides): the service, served for real.

`serve(lock, endpoint, rows, watch)` runs the rules service in a fresh Python
process: uvicorn on 127.0.0.1 (an ephemeral port), one upload of `rows` rules
(or, with `parse_seconds`, as many rules as this machine parses in that time),
and from the moment the endpoint starts parsing, a probe of /health every
PROBE_EVERY seconds, like a liveness probe. It returns what happened as a
dict. A fresh process each time, with a hard deadline (`run_isolated`): a
thread stuck on a threading.Lock cannot be stopped, so the process is the
only thing that can end it, and the notebook's kernel must never hold one.

`report(run)` prints a run in words; `draw(runs)` plots /health's latency, one panel
per run (CAPTION says how to read it).
"""
from __future__ import annotations

import json

import matplotlib.pyplot as plt
from matplotlib.lines import Line2D

from loopkata import run_isolated

PROBE_EVERY = 0.1          # seconds between two probes
PROBE_TIMEOUT = 1.0        # seconds, the kubelet's default timeoutSeconds
FAILURES_TO_RESTART = 3    # the kubelet's default failureThreshold

# The store's thread lock, per run. "Lock" is the store as shipped. "none" is the
# store with its thread lock removed: it cannot deadlock, and it is a wrong fix
# (the kata's decoy remove_the_lock: threads sharing the lock file lose
# updates), which one upload at a time never shows. It is here only to measure
# what a blocking `async def` costs /health on its own.
LOCKS = {"Lock": "threading.Lock, as shipped", "none": "no thread lock"}

# The rules service in one file, the same shape as the kata's package: the store,
# the app, and two access logs. LOCK, ENDPOINT, ROWS and WATCH are set per run.
SERVICE = r"""
import contextlib, csv, fcntl, io, json, logging, os, threading, time
from pathlib import Path
from fastapi import APIRouter, FastAPI, Request, UploadFile

# --- store.py ---------------------------------------------------------------
_lock = threading.Lock() if LOCK == "Lock" else contextlib.nullcontext()
_lock_files = {}

@contextlib.contextmanager
def guard(path):
    with _lock:                                # taken once here...
        if str(path) not in _lock_files:       # one open lock file per process, kept
            _lock_files[str(path)] = open(f"{path}.lock", "a+")
        f = _lock_files[str(path)]
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)

def load(path):
    with _lock:                                # ...and again here, on the same thread
        return json.loads(path.read_text()) if path.exists() else {}

def save(path, doc):
    with _lock:
        tmp = Path(f"{path}.tmp")
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, path)

def update(path, change):
    with guard(path):
        doc = load(path)
        change(doc)
        save(path, doc)
        return doc

# --- app.py -----------------------------------------------------------------
entered = threading.Event()                    # set when the endpoint starts parsing
parse_timing = {}                              # when the endpoint's parse started and ended

def parse_rules(raw):                          # CPU work, in proportion to the file (as in the kata's app.py)
    parse_timing["start"] = time.perf_counter()
    entered.set()
    rules = []
    for number, row in enumerate(csv.reader(io.StringIO(raw.decode("utf-8"))), start=1):
        if len(row) != 3:
            raise ValueError(f"line {number}: expected cost_center,account,share, got {len(row)} fields")
        center, account, share = (cell.strip() for cell in row)
        rules.append({"cost_center": center, "account": account, "share": float(share)})
    parse_timing["end"] = time.perf_counter()
    return rules

def summarize(rules):
    shares = {}
    for rule in rules:
        shares[rule["cost_center"]] = round(shares.get(rule["cost_center"], 0.0) + rule["share"], 6)
    return shares

def record_upload(request, filename, raw):
    shares = summarize(parse_rules(raw))
    def record(doc):
        doc["uploads"] = doc.get("uploads", 0) + 1
        doc[filename] = shares
    doc = update(request.app.state.rules_file, record)
    return {"cost_centers": len(shares), "uploads": doc["uploads"]}

router = APIRouter()
if ENDPOINT == "async def":
    @router.post("/rules")
    async def upload_rules(request: Request, file: UploadFile):
        return record_upload(request, file.filename, await file.read())
else:
    @router.post("/rules")
    def upload_rules(request: Request, file: UploadFile):
        return record_upload(request, file.filename, file.file.read())

access_log, arrival_log = [], []

def create_app(rules_file):
    app = FastAPI()
    app.state.rules_file = rules_file

    @app.middleware("http")
    async def log_requests(request, call_next):      # writes once the response exists
        response = await call_next(request)
        access_log.append(f"{request.method} {request.url.path} {response.status_code}")
        return response

    @app.middleware("http")
    async def log_arrivals(request, call_next):      # writes on arrival, and again at the end
        arrival_log.append(f"-> {request.method} {request.url.path}")
        response = await call_next(request)
        arrival_log.append(f"<- {request.method} {request.url.path} {response.status_code}")
        return response

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    app.include_router(router)
    return app
"""

# Serve the app, upload a rules file, probe /health meanwhile, report as JSON.
DRIVER = r"""
import httpx, linecache, sys, tempfile, uvicorn

rules_file = Path(tempfile.mkdtemp()) / "rules.json"
server = uvicorn.Server(uvicorn.Config(create_app(rules_file), host="127.0.0.1", port=0,
                                       log_level="critical", lifespan="off"))
threading.Thread(target=server.run, daemon=True).start()
while not server.started:
    time.sleep(0.01)
base = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"

def rules_file_of(rows):
    return "".join(f"cc{i % 500},{6000 + i % 97},0.25\n" for i in range(rows)).encode()

if PARSE_SECONDS:                               # size the file by how fast this machine parses
    sample, took = 100_000, []
    for _ in range(2):
        parse_rules(rules_file_of(sample))
        took.append(parse_timing["end"] - parse_timing["start"])
    ROWS = max(1, round(PARSE_SECONDS * sample / min(took)))
    entered.clear()
    parse_timing.clear()
body = rules_file_of(ROWS)

prober = httpx.Client(timeout=PROBE_TIMEOUT, limits=httpx.Limits(max_keepalive_connections=0))
upload = {"answer": None}
def post():
    started = time.perf_counter()
    try:
        r = httpx.post(f"{base}/rules", files={"file": ("q3.csv", body)}, timeout=WATCH + 5)
        upload["answer"] = f"{r.status_code} {r.text}"
    except httpx.TimeoutException:
        pass
    upload["seconds"] = time.perf_counter() - started
sender = threading.Thread(target=post, daemon=True)
t0 = time.perf_counter()
sender.start()
entered.wait(10)
arrived = time.perf_counter() - t0
probes = []                                     # [sent at (s after the upload), latency ms or None]
while time.perf_counter() - t0 < arrived + WATCH and (sender.is_alive() or len(probes) < 5):
    sent = time.perf_counter()
    try:
        prober.get(f"{base}/health")
        probes.append([sent - t0, (time.perf_counter() - sent) * 1000])
    except httpx.TimeoutException:
        probes.append([sent - t0, None])
    time.sleep(max(0.0, PROBE_EVERY - (time.perf_counter() - sent)))
sender.join(0.2)
# Where the upload's thread is stuck, in the service's own lines.
stuck = []
for frame in sys._current_frames().values():
    lines = []
    while frame is not None:
        if frame.f_code.co_filename == __file__:
            code = linecache.getline(__file__, frame.f_lineno).split("#")[0].strip()
            lines.append(f"line {frame.f_lineno} in {frame.f_code.co_name}: {code}")
        frame = frame.f_back
    if lines and "update" in " ".join(lines):
        stuck = lines[::-1]
parse_seconds = parse_timing["end"] - parse_timing["start"] if "end" in parse_timing else None
print(json.dumps({
    "arrived": arrived, "upload": upload["answer"], "upload_seconds": upload.get("seconds"),
    "rows": ROWS, "parse_seconds": parse_seconds,
    "probes": probes, "written": rules_file.exists(), "access_log": access_log,
    "arrival_log": arrival_log, "stuck": stuck,
}))
os._exit(0)                                     # a thread stuck on a lock cannot be joined
"""


def serve(lock="Lock", endpoint="async def", rows=50, watch=3.5, parse_seconds=None) -> dict:
    """Run the service in a fresh process, upload `rows` rules, probe /health for `watch` s.

    With `parse_seconds`, the file holds as many rules as this machine parses in about that
    long (the service times its own parse_rules on a sample first): `rows` is then ignored.
    The result's "rows" and "parse_seconds" say what the upload really held and took to parse."""
    if lock not in LOCKS:
        raise ValueError(f"lock must be one of {list(LOCKS)}, got {lock!r}")
    head = (f"LOCK, ENDPOINT, ROWS, WATCH, PARSE_SECONDS = {lock!r}, {endpoint!r}, {rows}, {watch}, {parse_seconds}\n"
            f"PROBE_EVERY, PROBE_TIMEOUT = {PROBE_EVERY}, {PROBE_TIMEOUT}\n")
    out = run_isolated(head + SERVICE + DRIVER, timeout=watch + 30)
    if out.returncode != 0:
        out.show()
        raise RuntimeError("the run did not finish")
    run = json.loads(out.stdout.strip().splitlines()[-1])
    run.update(lock=lock, endpoint=endpoint)
    return run


def restarted(run: dict) -> bool:
    """Would a liveness probe with FAILURES_TO_RESTART failures in a row restart this worker?"""
    streak = 0
    for _, latency in run["probes"]:
        streak = streak + 1 if latency is None else 0
        if streak >= FAILURES_TO_RESTART:
            return True
    return False


def report(run: dict) -> None:
    answered = [ms for _, ms in run["probes"] if ms is not None]
    print(f"store: {LOCKS[run['lock']]}; endpoint: {run['endpoint']}")
    print("  upload answer:       ", run["upload"] or "none")
    print("  rules.json written:  ", run["written"])
    if not answered:
        print(f"  /health meanwhile:    no probe answered within {PROBE_TIMEOUT:.1f} s")
    elif len(answered) == len(run["probes"]):
        print("  /health meanwhile:    every probe answered 200")
    else:
        print(f"  /health meanwhile:    {len(answered)} of {len(run['probes'])} probes answered")
    print("  liveness restarts it:", "yes" if restarted(run) else "no")
    if run["stuck"]:
        print("  the upload's thread is stuck at")
        for line in run["stuck"]:
            print("     ", line)


# What each combination is, for the panel titles: the run's role in the story, not its settings.
ROLES = {
    ("Lock", "async def"): "as shipped (async def): the loop deadlocks",
    ("Lock", "def"): "the on-call fix (def): the deadlock hides",
    ("none", "async def"): "no thread lock, async def: the parse holds the loop",
    ("none", "def"): "no thread lock, def: the parse runs on a thread",
}

CAPTION = (
    f"Each dot is one GET /health, sent every {PROBE_EVERY:g} s from the moment the endpoint starts parsing; "
    f"a red cross is a probe with no answer within {PROBE_TIMEOUT:g} s (the kubelet's timeout); "
    "the dashed line is when the upload answered."
)


def draw(runs: list, title: str = "") -> None:
    """/health latency during each run, one panel per run, on shared axes; a red cross is a probe with no answer."""
    cols = min(len(runs), 2)
    rows = (len(runs) + cols - 1) // cols
    height = 2.9 * rows + 1.0  # inches: the panels, then the title and the legend above them
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols if cols > 1 else 8.0, height), sharex=True,
                             sharey=True, squeeze=False)
    end = max(max((t - run["arrived"] for t, _ in run["probes"]), default=0.0) for run in runs)
    for ax, run in zip(axes.flat, runs):
        ok = [(t - run["arrived"], ms) for t, ms in run["probes"] if ms is not None]
        lost = [t - run["arrived"] for t, ms in run["probes"] if ms is None]
        ax.axhline(PROBE_TIMEOUT * 1000, color="#6e7781", lw=1, ls=":")
        if ok:
            ax.plot(*zip(*ok), "o", color="#1a7f37", ms=4)
        if lost:
            ax.plot(lost, [PROBE_TIMEOUT * 1000] * len(lost), "x", color="#cf222e", ms=9, mew=2)
        if run["upload_seconds"] is not None:
            ax.axvline(run["upload_seconds"] - run["arrived"], color="#0969da", ls="--")
        else:
            ax.text(0.5, 0.5, "the upload never answers", transform=ax.transAxes, ha="center", va="center",
                    color="#9a6700", fontsize=10)
        ax.set_yscale("log")
        ax.set_ylim(1, PROBE_TIMEOUT * 1000 * 3)
        ax.set_xlim(-0.1, end + 0.2)
        ax.set_title(ROLES[run["lock"], run["endpoint"]], fontsize=10)
        ax.tick_params(labelsize=9)
    for ax in axes[-1, :]:
        ax.set_xlabel("seconds after the endpoint started parsing", fontsize=10)
    for ax in axes[:, 0]:
        ax.set_ylabel("/health answered in (ms)", fontsize=10)
    for ax in axes.flat[len(runs):]:
        ax.set_visible(False)
    handles = [
        Line2D([], [], marker="o", ls="", color="#1a7f37", ms=5, label="/health answered"),
        Line2D([], [], marker="x", ls="", color="#cf222e", ms=9, mew=2, label=f"no answer within {PROBE_TIMEOUT:g} s"),
        Line2D([], [], ls="--", color="#0969da", label="the upload answered"),
        Line2D([], [], ls=":", color="#6e7781", label="the probe's timeout"),
    ]
    if not title:
        title = (f"/health while one upload of {runs[0]['rows']:,} rules runs" if len(runs) == 1 else
                 "/health while one upload runs: probes fail only while the event loop itself is stuck")
    fig.suptitle(title, fontsize=12, y=1 - 0.12 / height, va="top")
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 1 - 0.45 / height),
               ncol=len(handles), fontsize=9, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.75 / height))
