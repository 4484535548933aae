"""The harness of notebook 16 (The worker the OOM killer ended mid-batch): a worker in a real memory limit.

`contain(impl, limit_mib)` runs the kata's ingest worker (the package at `impl`)
in a fresh Python process with a hard deadline (`run_isolated`). In that process
the kata's hidden-test harness (tests/hidden/memory_guard_harness.py) serves it
a feed on 127.0.0.1, twice as big as the limit and far faster than downstream
takes it, and runs it in a fresh cgroup with a memory limit of `limit_mib` MiB
and no swap, as `docker run --memory` makes. Where this machine cannot make
that cgroup, it runs on the harness's fallback instead (an address-space limit,
and the lab ends the worker with SIGKILL when its resident memory reaches the
limit, where the kernel would have), and the result says so.

`toy(limit_mib, bound, shed_percent)` runs, the same way, a toy worker written
for this notebook (not the kata's): a plain loop that reads records into a
deque of at most `bound` records (0: no bound) and takes one out every
10 ms, and that reads the container's usage file every 0.01 s and stops
with exit status 75, after its `finally`, once usage reaches `shed_percent` of
the limit (0: never).

`report(run)` prints a run in words; `draw(runs, labels, title)` plots the
container's memory against time, with the limit and the 80% line.
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from loopkata import run_isolated

ROOT = Path(__file__).resolve().parents[2]  # the project: notebooks/labs/ -> notebooks/ -> .
HIDDEN = ROOT / "tests" / "hidden"  # where the harness lives (memory_guard_harness.py)
MiB = 2**20
HANDLE_SECONDS = 0.01  # downstream's time per record: the feed is many times faster, even on a busy machine
SHED_STATUS = 75  # the toy's own exit status when it sheds (the kata's EXIT_SHED)

# The toy worker: synchronous, one loop; records from the feed into a deque, one out per HANDLE_SECONDS.
TOY = """\
import collections, json, socket, struct, sys, time
opts = dict(zip(sys.argv[2::2], sys.argv[3::2]))
host, port = opts["--feed"].rsplit(":", 1)
bound, shed_at, usage = int(opts["--bound"]), int(opts["--shed-at"]), opts["--usage"]
every = float(opts["--handle-seconds"])
queue, handled, status = collections.deque(), 0, 0
try:
    connection = socket.create_connection((host, int(port)))
    connection.sendall(b"GET /feed HTTP/1.0\\r\\n\\r\\n")
    feed = connection.makefile("rb")
    while feed.readline().strip():
        pass
    ended, next_out, next_look = False, time.monotonic(), 0.0
    while not ended or queue:
        now = time.monotonic()
        if shed_at and now >= next_look:
            next_look = now + 0.01
            if int(open(usage).read()) >= shed_at:
                status = 75
                break
        if queue and now >= next_out:
            queue.popleft()
            handled += 1
            next_out = now + every
        elif not ended and (not bound or len(queue) < bound):
            head = feed.read(4)
            if len(head) < 4:
                ended = True
            else:
                queue.append(feed.read(struct.unpack("!I", head)[0]))
        else:
            time.sleep(max(0.0, min(next_out, next_look if shed_at else next_out) - now))
finally:
    open(opts["--checkpoint"], "w").write(json.dumps({"handled": handled}))
sys.exit(status)
"""


# --- inside the experiment's process -------------------------------------------------------------

def experiment(impl: str, limit_mib: int, bound: int | None, shed_percent: int | None, feed_times: float = 2.0) -> None:
    """One run under a memory limit; prints what happened as one JSON line. bound None: the kata's worker."""
    sys.path.insert(0, str(HIDDEN))
    # The kata's hidden-test harness, as lab13 uses its own: tests/hidden is on the path in this process only.
    from memory_guard_harness import RECORD_BYTES, WORKER, run

    from loopkata.services import containers

    limit = limit_mib * MiB
    records = int(feed_times * limit) // RECORD_BYTES
    samples: list = []
    extra = () if bound is None else (
        "--bound", str(bound), "--shed-at", str(int(limit * shed_percent / 100) if shed_percent else 0),
        "--usage", "{usage}")
    with tempfile.TemporaryDirectory(prefix="lab16-") as folder:
        out = run(Path(impl), Path(folder), limit=limit, records=records,
                  handle_seconds=HANDLE_SECONDS, deadline=45, program=WORKER if bound is None else TOY,
                  extra=extra, samples=samples, every=0.002)
    step = max(1, len(samples) // 300)
    print(json.dumps({
        "worker": "kata" if bound is None else "toy", "bound": bound, "shed_percent": shed_percent,
        "real": out.real, "why_not": containers.missing(containers.MEMORY_LIMIT), "limit": limit,
        "status": out.status, "oom_kills": out.oom_kills, "checkpoint": out.checkpoint, "sent": out.sent,
        "records": records, "record_bytes": RECORD_BYTES, "peak": out.peak, "log": out.log,
        "samples": samples[::step] + samples[-1:],
    }))


# --- in the notebook -----------------------------------------------------------------------------

def _isolated(impl: Path | str, limit_mib: int, bound: int | None, shed_percent: int | None,
              feed_times: float = 2.0) -> dict:
    code = (f"import sys\nsys.path.insert(0, {str(ROOT / 'notebooks')!r})\nfrom labs.lab16 import experiment\n"
            f"experiment({str(impl)!r}, {limit_mib!r}, {bound!r}, {shed_percent!r}, {feed_times!r})\n")
    out = run_isolated(code, timeout=75)
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        out.show()
        raise RuntimeError("the experiment did not finish; its output is above")
    return json.loads(lines[-1])


def contain(impl: Path, limit_mib: int = 256) -> dict:
    """The kata's worker at `impl` in a container limited to `limit_mib` MiB, fed twice that, fast."""
    return _isolated(impl, limit_mib, None, None)


def toy(limit_mib: int = 256, bound: int = 0, shed_percent: int = 0, feed_times: float = 2.0) -> dict:
    """The toy worker: a deque of at most `bound` records (0: no bound), shedding at `shed_percent` of the limit
    (0: never), fed `feed_times` the limit."""
    return _isolated(ROOT / "notebooks", limit_mib, bound, shed_percent, feed_times)


def container_status(status: int | None) -> str:
    """An exit status as `docker ps -a` and Kubernetes report it: 128 + the signal for a process killed by one."""
    if status is None:
        return "still running at the deadline"
    return f"{128 - status} (killed by signal {-status}, SIGKILL)" if status < 0 else str(status)


def python_said(run: dict) -> str:
    """The memory the kata's worker logged at start-up: what Python told it it had."""
    for line in run["log"].splitlines():
        if "memory:" in line:
            return line.split("memory:", 1)[1].strip()
    return "nothing"


def report(run: dict) -> None:
    """A run in words."""
    if not run["real"]:
        print(f"No memory cgroup here: {run['why_not']} So this ran on the fallback: an address-space limit, and "
              f"the lab sent SIGKILL when the worker's resident memory reached {run['limit'] // MiB} MiB, where the "
              f"kernel would have. The status and the missing checkpoint are the same; the kernel's counter is not.")
    what = ("the kata's worker" if run["worker"] == "kata" else
            f"the toy worker (bound: {run['bound'] or 'none'}, shedding at: "
            f"{str(run['shed_percent']) + '%' if run['shed_percent'] else 'never'})")
    print(f"{what} in a container limited to {run['limit'] // MiB} MiB, fed {run['records']} records of "
          f"{run['record_bytes'] // 1024} KiB ({run['records'] * run['record_bytes'] // MiB} MiB)")
    print(f"  exit status (as the platform reports it): {container_status(run['status'])}")
    if run["real"]:
        print(f"  the kernel's OOM kills in the container (oom_kill): {run['oom_kills']}")
    else:
        print(f"  kills by the lab at the limit, in the kernel's place: {run['oom_kills']}")
    print(f"  checkpoint written by the finally block: {json.dumps(run['checkpoint']) if run['checkpoint'] else 'none'}")


def summary(run: dict) -> str:
    """What a run ended with, in the words that do not change from run to run."""
    return (f"exit status {container_status(run['status'])}, OOM kills {run['oom_kills']}, checkpoint "
            f"{'written' if run['checkpoint'] else 'not written'}")


def draw(runs: list[dict], labels: list[str], title: str) -> None:
    """The container's memory against time for each run, with the limit and the 80% line; x: a kill, o: a clean stop."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.2))
    limit = runs[0]["limit"] / MiB
    for run, label, colour in zip(runs, labels, ["tab:red", "tab:green", "tab:blue", "tab:purple"]):
        xs = [t for t, _ in run["samples"]]
        ys = [b / MiB for _, b in run["samples"]]
        if xs and run["status"] == SHED_STATUS:  # it stopped at its highest: what follows is the process exiting
            top = max(range(len(ys)), key=ys.__getitem__)
            xs, ys = xs[:top + 1], ys[:top + 1]
        ax.plot(xs, ys, color=colour, label=label)
        if xs:
            if run["status"] is not None and run["status"] < 0:  # killed at the limit: the kernel's peak
                ax.plot([xs[-1], xs[-1]], [ys[-1], run["peak"] / MiB], color=colour)
                ax.plot([xs[-1]], [run["peak"] / MiB], marker="x", markersize=12, markeredgewidth=3, color=colour)
            else:
                ax.plot([xs[-1]], [ys[-1]], marker="o", markersize=10, markeredgewidth=2.5, color=colour,
                        fillstyle="none")
    ax.axhline(limit, color="black", linewidth=1.2)
    ax.text(1.0, limit, "the limit: SIGKILL ", va="bottom", ha="right", fontsize=9, transform=ax.get_yaxis_transform())
    ax.axhline(0.8 * limit, color="grey", linestyle="--", linewidth=1)
    ax.text(1.0, 0.8 * limit, "80%: shed here ", va="bottom", ha="right", fontsize=9, color="dimgrey",
            transform=ax.get_yaxis_transform())
    ax.set_ylim(0, limit * 1.12)
    ax.set_xlabel("seconds since the worker started")
    ax.set_ylabel("memory the container uses (MiB)")
    ax.set_title(title)
    ax.legend(loc="lower center", fontsize=9)
    fig.tight_layout()
