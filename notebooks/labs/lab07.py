"""The harness of notebook 07 (The queue nobody consumes): real Celery workers on a broker of files.

Every run happens in a fresh Python process (`run_isolated`), so the app is
imported with its broker chosen before the import, as it is in production,
and the notebook's kernel never imports it at all. The broker is kombu's
filesystem transport in a new folder per run: a message is a file,
`queue/<timestamp>_<uuid>.<queue>.msg`, until a worker takes it.

- `worker_commands(package, deploy)`: the Celery worker command lines of a
  Procfile, as the platform reads it (one `name: command` per line).
- `variant(package, decoy)`: the package with one of the kata's decoys (a
  wrong fix, named by its name) laid over it, in a temp folder.
- `child(package, code)`: run `code` in a fresh process where `app` is the
  package's Celery app, pointed at a fresh broker folder (`broker`);
  `said(out)` prints what it printed.
- `deploy(package, commands, sends, watch, then)`: start real workers from
  `commands` (`loopkata.services.celery_workers`: each in its own process group,
  killed on the way out), send `sends` by task name, and poll every task's
  state for `watch` seconds (`until_done`: stop once all are done). With
  `then`, the first workers are stopped and `then`'s workers start on the
  same broker, like a redeploy, with the states watched while they start.
  Returns what happened as a dict: the states over time, the queues each
  worker's banner lists, the tasks each worker registered, the log lines
  about each task, and the messages left in the broker per queue.
  `deploy_all(dict(...), ...)` runs several deploys at once.
- `report(run)` says a run in words; `done_at(run)` is when each task
  finished; `draw(ax, run, title)` and `legend(fig)` draw it.
- `every_queue(package)`: a worker command line consuming every queue the
  package's app sends tasks to, read from the app (so the notebook shows what
  such a worker does without writing its line out).

Nothing here is the kata's fix: the deploy files and the guard under test are
the pristine starter's, or a decoy's laid over them.
"""
from __future__ import annotations

import concurrent.futures
import json
from pathlib import Path

from loopkata import run_isolated

from .shared import decoy_over

NOTEBOOKS = Path(__file__).resolve().parents[1]

CELERY = "celery -A reports.celery_app worker"
# (label, task name, args, kwargs): one task of every kind the app knows.
EVERY_KIND = [
    ("schema sync", "schema.sync_source", [1], {}),
    ("question", "insight.answer", ["which source grew fastest?"], {}),
    ("weekly digest", "digest.send", ["ada"], {}),
]
DONE = ("SUCCESS", "FAILURE")
COLOURS = {"PENDING": "#d4a72c", "SUCCESS": "#1a7f37", "FAILURE": "#cf222e"}
HATCHES = {"PENDING": "///"}  # waiting reads apart from done without telling amber from green

def worker_commands(package: Path, deploy: str = "Procfile") -> list[str]:
    """The command lines of the Celery workers a deploy file starts (read as `loopkata scan` reads it)."""
    import shlex

    from loopkata.scan import celery_routes

    return [shlex.join(c.args) for c in celery_routes.worker_commands(Path(package) / deploy)]


def variant(package: Path, decoy: str) -> Path:
    """A copy of `package` with the files where the kata's decoy `decoy` differs from the reference fix."""
    return decoy_over(package, "silent-queue", decoy, "")


# Runs first in every child: a fresh broker folder, chosen before the app is imported
# (it reads the environment at import), and `reports` on the path as the package.
_PRELUDE = r"""
import json, os, sys, tempfile, time
from pathlib import Path
for key in ("CELERY_BROKER_URL", "CELERY_RESULT_BACKEND"):
    os.environ.pop(key, None)                  # always the broker of files, never a server
from loopkata.services import celery_workers
_tmp = Path(tempfile.mkdtemp(prefix="loopkata-nb07-run-"))
import atexit, shutil
atexit.register(shutil.rmtree, _tmp, ignore_errors=True)   # the broker's files and the app's link go with the child
broker = _tmp / "broker"
os.environ.update(celery_workers.broker_env(broker))
where = _tmp / "app"                           # `-A reports.celery_app` imports the package as `reports`
where.mkdir()
(where / "reports").symlink_to(PACKAGE, target_is_directory=True)
sys.path.insert(0, str(where))
from reports.celery_app import app

def waiting_messages():
    "Message files still in the broker, per queue (a file is named <ts>_<uuid>.<queue>.msg)."
    found = {}
    for message in sorted((broker / "queue").glob("*.msg")):
        queue = message.name.rsplit(".", 2)[-2]
        found[queue] = found.get(queue, 0) + 1
    return found

def message_files():
    "Each waiting message file: its name (timestamp and uuid masked) and what it carries."
    found = []
    for message in sorted((broker / "queue").glob("*.msg"), key=lambda m: (m.name.rsplit(".", 2)[-2], m.name)):
        doc = json.loads(message.read_text())
        found.append({
            "file": "queue/<timestamp>_<uuid>." + ".".join(message.name.rsplit(".", 2)[-2:]),
            "task": doc["headers"]["task"], "args": doc["headers"]["argsrepr"],
            "routing_key": doc["properties"]["delivery_info"]["routing_key"],
        })
    return found
"""


def child(package: Path, code: str, timeout: float = 30.0):
    """Run `code` in a fresh process where `app` is `package`'s Celery app on a fresh broker."""
    head = f"PACKAGE = {str(Path(package).resolve())!r}\n"
    return run_isolated(head + _PRELUDE + code, timeout=timeout)


def said(out) -> None:
    """What a child printed. Libraries' warnings on stderr are left out, unless the child failed."""
    print(out.stdout.rstrip())
    if out.returncode != 0:
        out.show()
        raise RuntimeError("the child did not finish")


_DEPLOY = r"""
import re

from loopkata.services.celery_workers import running, start

def banner_tasks(worker):
    "The task names a worker lists under [tasks] in its banner: what it knows how to run."
    names, inside = [], False
    for line in worker.lines:
        if line.strip() == "[tasks]":
            inside = True
        elif inside and line.strip().startswith(". "):
            names.append(line.strip()[2:])
        elif inside and names:
            break
    return names

timeline, phases, workers_seen, sent, sent_at, api = [], [], [], [], [], {}
t0 = None

def sample():
    "One row of the timeline: every sent task's state now (None for a task not sent yet)."
    states = [app.AsyncResult(task_id).state for _, task_id in sent]
    timeline.append([time.perf_counter() - t0, states + [None] * (len(SENDS) + API - len(states))])
    return states

def owed(workers, states):
    "Whether a ready worker consumes the task's queue and lists the task: a task it will run, however busy the machine."
    # A worker whose banner lists no tasks at all (or none read yet) is taken to know them all.
    owes = []
    for w in workers:
        if any(l.endswith(" ready.") for l in w.lines):
            owes.append((w.queues() or set(), set(banner_tasks(w))))
    names = [name for _, name, _, _ in SENDS] + ["schema.sync_source"] * API
    return [any(app.amqp.router.route({}, name)["queue"].name in queues and (not known or name in known)
                for queues, known in owes) for name in names[:len(states)]]

def poll(seconds, workers, starting=(), tail=0.3, at_most=60.0):
    "Every task's state every EVERY s (every 10 ms in the first half second), for `seconds` (or until all are done and `tail` s more)."
    # The watch is a least time, not a deadline: it goes on (up to `at_most` s more) while a worker of
    # `starting` is not ready or a task that a ready worker will run is not done, so that what it
    # shows is the same on a busy machine: such a task ends done, and one no worker takes stays PENDING.
    end, ready = time.perf_counter() + seconds, None
    last = end + at_most
    while True:
        states = sample()
        now = time.perf_counter()
        if ready is None and all(any(l.endswith(" ready.") for l in w.lines) for w in starting):
            ready = now - t0                   # when the last of `starting` said it was ready
        done = all(s in ("SUCCESS", "FAILURE") for s in states)
        settled = ready is not None and all(s in ("SUCCESS", "FAILURE") for s, due in zip(states, owed(workers, states)) if due)
        if UNTIL_DONE and done:
            end = min(end, now + tail)
        if now >= end and settled or now >= last:
            return ready
        time.sleep(0.01 if now - t0 < 0.5 else EVERY)  # short PENDING periods show up too

def stamp(line):
    "The time a log line was written, in seconds ('[2024-05-01 12:00:00,123: INFO/...')."
    from datetime import datetime
    return datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f").timestamp()

def logged_every_outcome(w, seconds=5.0):
    "Wait (at most `seconds`) until every task the worker logged as received has its outcome line too:"
    # its log is read by a thread, and on a busy machine a "succeeded" line can come after the state did.
    def ids(*words):
        found = (re.search(r"Task [^\s\[]+\[([^\]]+)\] (\w+)", l) for l in list(w.lines))
        return {m[1] for m in found if m and m[2] in words}
    end = time.perf_counter() + seconds
    while ids("received") - ids("succeeded", "raised", "failed") and time.perf_counter() < end:
        time.sleep(0.02)

def describe(workers):
    names = list(dict.fromkeys(s[1] for s in SENDS))
    for w in workers:
        logged_every_outcome(w)
        lines = [l for l in w.lines if "Task " in l]
        ready = next((stamp(l) for l in w.lines if l.endswith(" ready.")), None)
        workers_seen.append({
            "phase": len(phases), "command": w.command, "queues": sorted(w.queues() or []), "tasks": banner_tasks(w),
            "log": {name: sum(f"Task {name}[" in l for l in lines) for name in names},
            # by the worker's own log: seconds from "ready." to each "succeeded" line, per task name
            "succeeded_after_ready": {name: [stamp(l) - ready for l in lines if f"Task {name}[" in l
                                             and "succeeded" in l] for name in names},
        })

if API:                                         # the service's own API, served in this process
    from fastapi.testclient import TestClient
    from reports.web import app as web
    client = TestClient(web)
with running(COMMANDS, pythonpath=where, env={}) as workers:
    t0 = time.perf_counter()
    for label, name, args, kwargs in SENDS:
        sent_at.append(time.perf_counter() - t0)
        sent.append((label, app.send_task(name, args=args, kwargs=kwargs).id))
        sample()                               # its state right after sending: PENDING, until a worker is done
        time.sleep(0.02)                       # the broker of files orders messages by their millisecond
    if API:
        sent_at.append(time.perf_counter() - t0)
        answer = client.post("/sources/1/sync")
        sent.append(("schema sync via the API", answer.json()["job"]))
        api["post"] = [answer.status_code, sorted(answer.json())]
    poll(WATCH, workers)
    describe(workers)
phases.append({"commands": COMMANDS, "from": 0.0, "waiting": waiting_messages(), "files": message_files()})
if THEN:
    started = time.perf_counter() - t0
    # Not `running`, which returns only once the workers are ready: the states are
    # watched while the new workers start, as they would be during a redeploy.
    workers = []
    try:
        for n, command in enumerate(THEN):       # in turn, as `running` does; the last is watched starting
            workers.append(start(command, pythonpath=where, env={}, name=f"redeployed{n}",
                                 wait=n < len(THEN) - 1))
        ready = poll(THEN_WATCH, workers, starting=workers)
        for w in workers:
            w.wait_ready()                     # raises, with what it printed, if a worker never started
        if ready is None:
            ready = time.perf_counter() - t0
        describe(workers)
    finally:
        for w in workers:
            w.stop()
    phases.append({"commands": THEN, "from": started, "ready": ready, "waiting": waiting_messages(),
                   "files": message_files()})
if API:
    api["get"] = {label: client.get(f"/jobs/{task_id}").json()["state"] for label, task_id in sent}
print(json.dumps({
    "sends": [list(s) for s in SENDS] + ([["schema sync via the API", "schema.sync_source", [1], {}]] if API else []),
    "timeline": timeline, "sent_at": sent_at, "phases": phases, "workers": workers_seen, "api": api,
    "routes": {name: app.amqp.router.route({}, name)["queue"].name for _, name, _, _ in SENDS},
    "default_queue": app.conf.task_default_queue,
}))
"""


def deploy(package: Path, commands: list, sends=EVERY_KIND, watch: float = 2.0,
           then: list | None = None, then_watch: float = 1.5, api: bool = False, every: float = 0.05,
           until_done: bool = False) -> dict:
    """Start workers from `commands`, send `sends` by name, watch every state for `watch` s (then redeploy).

    `until_done`: stop watching as soon as every task has finished."""
    head = (f"COMMANDS, THEN, SENDS = {json.dumps(list(commands))}, {json.dumps(list(then or []))}, {json.dumps(sends)}\n"
            f"WATCH, THEN_WATCH, EVERY, API, UNTIL_DONE = {watch}, {then_watch}, {every}, {api}, {until_done}\n")
    budget = watch + 60 + (then_watch + 60 + 30 if then else 0) + 40  # each watch may go on 60 s for what is owed
    out = child(package, head + _DEPLOY, timeout=budget)
    if out.returncode != 0:
        out.show()
        raise RuntimeError("the run did not finish")
    run = json.loads(out.stdout.strip().splitlines()[-1])
    run["labels"] = [s[0] for s in run["sends"]]
    return run


def deploy_all(*runs: dict) -> list[dict]:
    """Several deploys at once, one per dict of `deploy`'s arguments, in that order. Each has
    workers and a broker of its own, so they do not meet; their watches run side by side."""
    with concurrent.futures.ThreadPoolExecutor(len(runs)) as pool:
        return list(pool.map(lambda arguments: deploy(**arguments), runs))


def done_at(run: dict) -> dict:
    """label -> seconds after sending when the task's state was first SUCCESS or FAILURE (None: never)."""
    found = {}
    for i, label in enumerate(run["labels"]):
        found[label] = next((t for t, states in run["timeline"] if states[i] in DONE), None)
    return found


def final_states(run: dict) -> dict:
    return dict(zip(run["labels"], run["timeline"][-1][1]))


def report(run: dict, times: bool = True) -> None:
    """A run in words: the workers, each task's queue and fate, the messages left waiting."""
    for n, phase in enumerate(run["phases"]):
        at = f" at {phase['from']:.1f} s" if times and phase["from"] else (" later" if phase["from"] else "")
        print(f"workers started{at}:")
        for w in [w for w in run["workers"] if w["phase"] == n]:
            print(f"  `{w['command']}`  consumes: {', '.join(w['queues'])}")
    print("tasks:")
    finished, final = done_at(run), final_states(run)
    routes = run["routes"]
    for label, name, *_ in run["sends"]:
        queue = routes[name]
        when = f", done {finished[label]:.1f} s after it was sent" if times and finished[label] is not None else ""
        print(f"  {label:<24} {name:<20} queue {queue!r:<10} {final[label]}{when}")
    left = run["phases"][-1]["waiting"]
    print("messages still waiting in the broker:", ", ".join(f"{n} in {q!r}" for q, n in sorted(left.items())) or "none")


def draw(ax, run: dict, title: str = "", done_labels: bool = False, until: float | None = None) -> None:
    """Each task's state over time, one bar per task from the moment it was sent: amber and hatched
    while PENDING, green once done. A task is PENDING from its sending until a worker stores its result,
    so the bar is amber up to the first poll that saw it done. `done_labels`: write that time on the bar.
    The bars end at the last poll; the time axis at `until` (the same for panels compared side by
    side: see `last_poll`), else at the last poll."""
    times = [t for t, _ in run["timeline"]]
    sent_at = run.get("sent_at") or [0.0] * len(run["labels"])
    for row in range(len(run["labels"])):
        seen = [(t, states[row]) for t, states in run["timeline"] if states[row] is not None]
        start, state, segments = sent_at[row], "PENDING", []
        for t, now in seen:
            if now != state:
                segments.append((start, t, state))
                start, state = t, now
        segments.append((start, times[-1], state))
        for begin, end, what in segments:
            if end > begin:
                ax.barh(row, end - begin, left=begin, height=0.55, color=COLOURS.get(what, "#57606a"),
                        hatch=HATCHES.get(what), edgecolor="white", linewidth=0)
        done = next((t for t, now in seen if now in DONE), None)
        if done_labels and done is not None:
            ax.text(done, row, f" done at {done:.2f} s", va="center", ha="left", fontsize=9, color="#24292f",
                    bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "none", "pad": 1.5})
    for phase in run["phases"][1:]:
        ax.axvline(phase["from"], color="#0969da", ls="--", lw=1.2)
        ax.text(phase["from"], len(run["labels"]) - 0.4, " redeployed", color="#0969da", fontsize=9,
                va="bottom")
    ax.set_yticks(range(len(run["labels"])), run["labels"])
    ax.set_ylim(-0.6, len(run["labels"]) - 0.1)
    ax.invert_yaxis()
    ax.set_xlim(0, times[-1] if until is None else until)
    ax.set_xlabel("seconds after the first task was sent")
    ax.set_title(title, fontsize=10)


def last_poll(*runs: dict) -> float:
    """When the last of these runs was last polled: a time axis they can share."""
    return max(run["timeline"][-1][0] for run in runs)


def every_queue(package: Path) -> list[str]:
    """One worker command line that consumes every queue `package`'s app sends tasks to: the queues
    its routes name and its default queue, read from the app itself in a fresh process."""
    out = child(package, r"""
queues = {app.conf.task_default_queue} | {route["queue"] for route in app.conf.task_routes.values()}
print(json.dumps(sorted(queues)))
""")
    if out.returncode != 0:
        out.show()
        raise RuntimeError("the app's queues could not be read")
    return [f"{CELERY} -Q {','.join(json.loads(out.stdout.strip().splitlines()[-1]))}"]


CAPTION = ("One bar per task, from the moment it was sent: amber and hatched while its state is PENDING, green "
           "once it is SUCCESS; a dashed line is a redeploy.")


def legend(fig) -> None:
    from matplotlib.patches import Patch

    fig.legend(handles=[Patch(facecolor=COLOURS["PENDING"], hatch=HATCHES["PENDING"], edgecolor="white", label="PENDING"),
                        Patch(facecolor=COLOURS["SUCCESS"], edgecolor="white", label="SUCCESS")],
               loc="lower center", ncol=2, frameon=False, bbox_to_anchor=(0.5, -0.02))
