"""The harness of notebook 13 (The pod that stayed Ready with a frozen worker): a real two-worker pod.

`freeze(starter, seconds, connections, freeze_limit, drill)` runs one experiment
in a fresh Python process with a hard deadline (`run_isolated`), so that a
frozen worker can never take the kernel with it. In that process:

- `uvicorn --workers 2 --factory` serves the package's `create_app()` on
  127.0.0.1, with the drill's routes in front of it (the pod the kata's hidden
  tests start: tests/hidden/half_dead_pod_harness.py), in a process group of
  its own that is killed at the end;
- `connections` keep-alive connections are pinned, and each one is mapped to
  the worker process that owns it (client port, then the server-side socket's
  inode in /proc/net/tcp, then the process whose /proc/PID/fd holds it);
- a request freezes the event loop of the worker that takes it for `seconds`
  (GET /_drill/freeze, a blocking sleep on the loop); meanwhile every pinned
  connection polls GET /health, and a kubelet-like probe sends GET /health on a
  new connection every PROBE_EVERY seconds, each mapped to the worker that
  answered it;
- afterwards: was the frozen worker replaced, what did the shipped watchdog
  write to the server's log (and when), and what does the package's own drill,
  `harness.check_workers`, say about the same pod.

`report(run)` prints a run in words, naming the frozen worker A and the other B;
`draw(run, title)` plots every /health wait against time, one panel per kind of
connection.
"""
from __future__ import annotations

import http.client
import importlib
import importlib.util
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

from loopkata import run_isolated

ROOT = Path(__file__).resolve().parents[2]  # the project: notebooks/labs/ -> notebooks/ -> .
HIDDEN = ROOT / "tests" / "hidden"  # where the pod lives (half_dead_pod_harness.py)

PROBE_EVERY = 0.1  # seconds between two kubelet probes, and between two polls on a pinned connection
KUBELET_TIMEOUT = 1.0  # seconds: a liveness probe's default timeoutSeconds
AFTER = 0.5  # seconds of watching after the freeze ends
COLOURS = {"A": "tab:red", "B": "tab:blue"}  # A: the frozen worker, B: the other


# --- inside the experiment's process -------------------------------------------------------------

def _load_drill(impl: Path):
    """The package's own drill (harness.check_workers), from a fresh copy of the package at `impl`."""
    name = f"lab13_package_{len(sys.modules)}"
    spec = importlib.util.spec_from_file_location(name, impl / "__init__.py", submodule_search_locations=[str(impl)])
    sys.modules[name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules[name])
    return importlib.import_module(f"{name}.harness").check_workers


def _watchdog_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if "event loop" in line]


def experiment(impl: str, seconds: float, connections: int, freeze_limit: float | None, drill: bool) -> None:
    """Run one freeze against a real pod and print what happened as one JSON line."""
    sys.path.insert(0, str(HIDDEN))
    # The pod of the kata's hidden tests, as lab08 uses its harness: tests/hidden is on the path in this process only.
    from half_dead_pod_harness import Pinned, Pod, alive, wait_until

    with tempfile.TemporaryDirectory(prefix="lab13-") as folder, \
            Pod(Path(impl), Path(folder), freeze_limit=freeze_limit) as pod:
        owned = pod.ready()
        while sum(map(len, owned.values())) < connections:
            pinned = pod.pin()
            if pinned.owner is not None:
                owned.setdefault(pinned.owner, []).append(pinned)

        user = Pinned(pod.port, seconds + 30)  # a user's request, on a new connection: it freezes whoever takes it
        pod.pinned.append(user)
        user.send(f"/_drill/freeze?seconds={seconds:g}")
        began = wait_until(lambda: pod.drills("freeze"), 10)
        frozen = began[0]["pid"]
        other = next(pid for pid in owned if pid != frozen)
        name = {frozen: "A", other: "B"}
        start, stop_at = began[0]["at"], began[0]["at"] + seconds + AFTER
        polls, probes = [], []

        def poll(pinned, number: int) -> None:
            while time.monotonic() < stop_at:
                sent = time.monotonic()
                try:
                    pinned.get("/health")
                    polls.append((name[pinned.owner], sent - start, time.monotonic() - sent, number))
                except (OSError, http.client.HTTPException):
                    polls.append((name[pinned.owner], sent - start, None, number))  # the worker is gone
                    return
                time.sleep(PROBE_EVERY)

        def kubelet() -> None:
            while time.monotonic() < stop_at:
                sent = time.monotonic()
                try:
                    probe = Pinned(pod.port, KUBELET_TIMEOUT)
                    probe.get("/health")
                    waited, owner = time.monotonic() - sent, pod.owner(probe)
                    probe.close()
                    probes.append((name.get(owner, "new"), sent - start, waited))
                except (OSError, http.client.HTTPException):
                    probes.append(("none", sent - start, None))  # no answer within the kubelet's timeout
                time.sleep(max(0.0, PROBE_EVERY - (time.monotonic() - sent)))

        every_pinned = [p for ps in owned.values() for p in ps]
        threads = [threading.Thread(target=poll, args=(p, n), daemon=True) for n, p in enumerate(every_pinned)]
        threads.append(threading.Thread(target=kubelet, daemon=True))
        for t in threads:
            t.start()
        time.sleep(seconds / 2)
        log_during = _watchdog_lines(pod.log())
        for t in threads:
            t.join(seconds + 10)
        if freeze_limit is not None and seconds > freeze_limit:  # a watchdog with something to say: give it a moment
            wait_until(lambda: _watchdog_lines(pod.log()), 1.0)
        run = {
            "seconds": seconds, "freeze_limit": freeze_limit, "connections": {"A": len(owned[frozen]),
                                                                               "B": len(owned[other])},
            "polls": polls, "probes": probes, "frozen_alive": alive(frozen),
            "supervisor_log": [line for line in pod.log().splitlines() if "died" in line],
            "watchdog_during": log_during, "watchdog_after": _watchdog_lines(pod.log()),
        }
        if drill:
            verdict = _load_drill(Path(impl))(pod.port, pod.workers(), f"/_drill/freeze?seconds={seconds:g}",
                                             limit=KUBELET_TIMEOUT)
            run["drill"] = {"outcome": verdict.outcome, "reason": verdict.reason}
    print(json.dumps(run))


# --- in the notebook --------------------------------------------------------------------------------

def freeze(starter: Path, seconds: float = 2.5, connections: int = 20, freeze_limit: float | None = None,
           drill: bool = True) -> dict:
    """Start a pod serving the package at `starter`, freeze one worker for `seconds`, and say what each probe saw."""
    code = (f"import sys\nsys.path.insert(0, {str(ROOT / 'notebooks')!r})\nfrom labs.lab13 import experiment\n"
            f"experiment({str(starter)!r}, {seconds!r}, {connections!r}, {freeze_limit!r}, {drill!r})\n")
    out = run_isolated(code, timeout=seconds + 60)
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        out.show()
        raise RuntimeError("the experiment did not finish; its output is above")
    return json.loads(lines[-1])


def _slowest(points, worker: str) -> float | None:
    waits = [w for who, _, w, *_ in points if who == worker and w is not None]
    return max(waits) if waits else None


def report(run: dict) -> None:
    """The run in words: A is the worker the request froze, B the other."""
    print(f"uvicorn --workers 2; a request froze worker A's event loop for {run['seconds']:g} s")
    for worker in ("A", "B"):
        worst = _slowest(run["polls"], worker)
        print(f"  /health on worker {worker}'s keep-alive connections: slowest wait {worst:.3f} s")
    # Answered while A was still frozen (or not at all): whoever answered then, it was not A.
    during = [(who, w) for who, at, w in run["probes"] if 0 <= at and (w is None and at < run["seconds"]
                                                                      or w is not None and at + w < run["seconds"])]
    answered = [w for _, w in during if w is not None and w <= KUBELET_TIMEOUT]
    by = sorted({who for who, w in during if w is not None})
    print(f"  kubelet probes on new connections while A was frozen: "
          f"{'all' if len(answered) == len(during) else 'not all'} answered within {KUBELET_TIMEOUT:g} s, "
          f"by worker {' and '.join(by) or 'none'}; the slowest took {max(answered, default=0):.3f} s")
    print(f"  worker A replaced by the supervisor: {'no, the same process is still serving' if run['frozen_alive'] else 'yes'}")
    if "drill" in run:
        print(f"  the drill as shipped (harness.check_workers) says: {run['drill']['outcome']} ({run['drill']['reason']})")


def waited_out(run: dict) -> tuple[int, float]:
    """How many of worker A's keep-alive connections waited past the kubelet's timeout for /health, and the longest wait."""
    waits = {}
    for who, _, w, conn in run["polls"]:
        if who == "A" and w is not None and w > KUBELET_TIMEOUT:
            waits[conn] = max(w, waits.get(conn, 0.0))
    return len(waits), max(waits.values(), default=0.0)


def draw(run: dict, title: str) -> None:
    """Every /health as a bar from when it was sent to when it was answered: pinned connections above, one row
    each (worker A's first), the kubelet's probes on new connections below, one row per worker that answered."""
    import matplotlib.pyplot as plt  # here, not at the top: each experiment's process imports this module, draws nothing

    pinned = sorted({(who, conn) for who, _, _, conn in run["polls"]})  # ("A", n) rows sort before ("B", n)
    rows = {key: len(pinned) - i for i, key in enumerate(pinned)}  # worker A's rows on top
    end = max([at + (w or 0) for _, at, w, *_ in run["polls"] + run["probes"]], default=run["seconds"])
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 5.5), sharex=True,
                                      gridspec_kw={"height_ratios": [max(len(pinned), 4), 2]})
    for ax in (top, bottom):
        ax.axvspan(0, run["seconds"], color="0.92", zorder=0)
    for who, at, w, conn in run["polls"]:
        if w is not None:
            top.broken_barh([(at, max(w, end / 400))], (rows[who, conn] - 0.35, 0.7), color=COLOURS[who])
    top.set_yticks([rows[key] for key in pinned], [f"{who}" for who, _ in pinned], fontsize=7)
    top.set_ylabel("pinned keep-alive connection\n(owned by worker A or B)")
    top.set_title("each keep-alive connection polling /health: a bar from request to answer", fontsize=10)
    count, longest = waited_out(run)
    if count:
        a_rows = [rows[key] for key in pinned if key[0] == "A"]
        top.text(run["seconds"] / 2, sum(a_rows) / len(a_rows),
                 f"{count} connection{'s' if count > 1 else ''} of worker A waited {longest:.1f} s",
                 ha="center", va="center", color="white", fontsize=11, fontweight="bold",
                 bbox={"facecolor": COLOURS["A"], "edgecolor": "none"})
    probe_rows = {"A": 2, "B": 1}
    for who, at, w in run["probes"]:
        if w is not None and who in probe_rows:
            bottom.broken_barh([(at, max(w, end / 400))], (probe_rows[who] - 0.35, 0.7), color=COLOURS[who])
    bottom.set_yticks([2, 1], ["worker A", "worker B"])
    bottom.set_ylim(0.4, 2.6)
    bottom.set_ylabel("answered by")
    bottom.set_title("the kubelet's probes, a new connection each, on the row of the worker that answered", fontsize=10)
    bottom.set_xlabel(f"seconds since worker A's loop froze (shaded: the {run['seconds']:g} s freeze)")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
