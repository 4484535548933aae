"""The harness of notebook 14 (The container that took its whole grace period to stop).

`stop(package, grace)` starts the export service's container as the platform does and stops it as
`docker stop` and the kubelet do, the way the kata's hidden tests do
(tests/hidden/pid1_sigterm_harness.py): `sh entrypoint.sh` runs as PID 1 of a fresh PID namespace
(loopkata.services.containers.Pid1), with `python` on its PATH meaning this interpreter and its
state folder in a temporary folder, removed when the stop is over. Once the service listens, an
export is sent; while it renders, the harness reads the container's process tree from /proc
(each process's command, and whether it has a SIGTERM handler: the SIGTERM bit of SigCgt in
/proc/PID/status), sends SIGTERM to PID 1, and waits up to `grace` seconds for it to exit. PID 1
still running then gets SIGKILL, as the platform sends it at the end of its grace period. Every
process of the container is gone, and its folder with it, when `stop` returns.

Without a PID namespace (no root and no user namespaces, LOOPKATA_CONTAINER=fallback, or
`namespace=False`), the entrypoint is a plain child instead: what SIGTERM does to a process that
is not a namespace's init.

`variant(package, folder, form, handler)` is the starter with small edits: the entrypoint's last
line made `exec python service.py`, or a SIGTERM handler added to the service (never both: that
is the kata). `run_config(package, config)` stops one of CONFIGS, `every_wrong_stop(package)`
all of them at once. `pid1_rule(namespace)` shows the kernel's rule on `sleep` alone.
`report(run)` and `tree(run)` print a run in words; `draw(runs, title)` plots runs.
"""
from __future__ import annotations

import contextlib
import http.client
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from loopkata.services import containers

GRACE = 3.0  # seconds from SIGTERM to SIGKILL here (docker stop's default is 10, a pod's 30): a deadline only
STARTED_WITHIN = 20.0  # seconds for the service to say it listens (a deadline only)
ORDER = "A1"

# The configurations the notebook may run before its check cell: the starter and the wrong ones.
CONFIGS = {
    "starter": ("shell form (as shipped), no handler", "shell", False),
    "exec": ("exec python service.py, no handler", "exec", False),
    "handler": ("shell form, add_signal_handler", "shell", True),
}
ENDINGS = {  # how a stop ended -> (colour, words); one colour per meaning
    "killed": ("tab:red", "SIGKILL at the end of the grace period (exit 137)"),
    "terminated": ("tab:orange", "killed at once by SIGTERM's default action (exit 143)"),
    "clean": ("tab:green", "exited by itself with status 0"),
    "failed": ("tab:purple", "exited by itself with an error status"),
}


# --- the starter with small edits ------------------------------------------------------------------

def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    if text.count(old) != 1:
        raise ValueError(f"{path.name} is not the starter as shipped: expected {old.strip()!r} once in it")
    path.write_text(text.replace(old, new))


def variant(package: Path, folder: Path, form: str = "shell", handler: bool = False) -> Path:
    """A copy, in `folder`, of the starter package with the entrypoint in `form` ("shell": `python service.py`,
    as shipped; "exec": `exec python service.py`) and, if `handler`, a SIGTERM handler that cancels main's task."""
    if form == "exec" and handler:
        raise ValueError("exec with a SIGTERM handler is where the kata starts: that one is yours to write, "
                         "in katas/14_pid1_sigterm/")
    copy = folder / package.name
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    if form == "exec":
        _edit(copy / "entrypoint.sh", "\npython service.py\n", "\nexec python service.py\n")
    if handler:
        _edit(copy / "service.py", "import os\n", "import os\nimport signal\n")
        _edit(copy / "service.py", "    port = site._server.sockets[0].getsockname()[1]\n",
              "    port = site._server.sockets[0].getsockname()[1]\n"
              "    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, asyncio.current_task().cancel)\n")
    return copy


# --- /proc -----------------------------------------------------------------------------------------

def _status(pid: int) -> dict[str, str]:
    with contextlib.suppress(OSError):
        return dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                    if ":\t" in line)
    return {}


def caught_signals(pid: int) -> list[str]:
    """The signals the process has a handler for (SigCgt in /proc/PID/status), by name."""
    mask = int(_status(pid).get("SigCgt", "0"), 16)
    names = []
    for number in range(1, 65):
        if mask & (1 << (number - 1)):
            with contextlib.suppress(ValueError):
                names.append(signal.Signals(number).name)
    return names


def _command(pid: int) -> str:
    """A process's command line with paths cut to their last part, and `-c CODE` to `-c ...`."""
    with contextlib.suppress(OSError):
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
        words, skip = [], False
        for raw in argv:
            word = raw.decode(errors="replace")
            words.append("..." if skip else (Path(word).name if "/" in word else word))
            skip = word == "-c"
        return " ".join(words)
    return "?"


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found += [int(c) for c in (task / "children").read_text().split()]
    return sorted(found)


def process_tree(pid: int, depth: int = 0) -> list[dict]:
    """The process `pid` and its descendants, depth first: command, depth, the signals it catches."""
    here = [{"depth": depth, "command": _command(pid), "catches": caught_signals(pid)}]
    for child in _children(pid):
        here += process_tree(child, depth + 1)
    return here


def _group_alive(pgid: int, but: int) -> list[str]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and int(stat.parent.name) != but and fields[0] != "Z":
                found.append(_command(int(stat.parent.name)))
    return found


# --- one container, stopped as docker stop does ----------------------------------------------------

@dataclass
class Run:
    label: str
    real: bool  # PID 1 of a PID namespace, or a plain child
    grace: float
    tree: list[dict] = field(default_factory=list)  # read while the export rendered, before SIGTERM
    caught: bool = False  # PID 1 had a SIGTERM handler
    status: int | None = None  # as a container runtime reports it: 128 + signal when killed
    killed: bool = False  # still running at the end of the grace period: SIGKILL
    seconds: float | None = None  # from SIGTERM to PID 1's exit
    left_running: list[str] = field(default_factory=list)  # plain child: the container's processes alive after it
    answer: str = ""
    answered: bool = False
    rows_flushed: int = 0
    spooler_flushed: bool = False
    clean_shutdown: bool = False
    output: list[str] = field(default_factory=list)
    problem: str = ""

    @property
    def ending(self) -> str:
        if self.killed:
            return "killed"
        if self.status == 128 + signal.SIGTERM:
            return "terminated"
        return "clean" if self.status == 0 else "failed"


def _python_on_path(folder: Path) -> Path:
    """A `python` that is this interpreter, as the image's python is the container's."""
    folder.mkdir(parents=True, exist_ok=True)
    wrapper = folder / "python"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    return folder


def stop(package: Path, grace: float = GRACE, namespace: bool = True, label: str = "") -> Run:
    """Start the container of `package`, send an export, SIGTERM PID 1 while it renders; SIGKILL after `grace`."""
    real = namespace and containers.missing(containers.PID_NAMESPACE) == ""
    with tempfile.TemporaryDirectory(prefix="lab14-container-") as folder:
        return _stop(package, Path(folder), grace, real, label)


def _stop(package: Path, work: Path, grace: float, real: bool, label: str) -> Run:
    state = work / "state"
    state.mkdir()
    env = {**os.environ, "PATH": f"{_python_on_path(work / 'bin')}:{os.environ.get('PATH', '/usr/bin:/bin')}",
           "EXPORT_STATE": str(state), "PORT": "0", "PYTHONUNBUFFERED": "1"}
    env.pop("PYTHONPATH", None)
    run = Run(label=label, real=real, grace=grace)
    lines: queue.Queue[str | None] = queue.Queue()
    reply: dict[str, str] = {}
    with containers.Pid1(["/bin/sh", str(package / "entrypoint.sh")], real=real, env=env, cwd=work,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as pid1:
        def read() -> None:
            for raw in pid1.process.stdout:  # the state folder as its variable names it, as the hidden tests print it
                lines.put(raw.decode(errors="replace").rstrip("\n").replace(str(state), "$EXPORT_STATE"))
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()

        def until(text: str) -> str | None:
            deadline = time.monotonic() + STARTED_WITHIN
            while True:
                try:
                    line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    return None
                if line is None:
                    return None
                run.output.append(line)
                if text in line:
                    return line

        listening = until("listening on")
        if listening is None:
            run.problem = "the service never said it was listening"
            return run
        port = int(listening.rsplit(":", 1)[1])

        def export() -> None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=grace + 10)
            try:
                conn.request("POST", f"/export/{ORDER}")
                response = conn.getresponse()
                body = response.read().decode(errors="replace")
                reply["answer"] = f"{response.status} with {body.count(ORDER)} rows"
                reply["ok"] = "yes" if response.status == 200 and body.count(f'"{ORDER}"') == 3 else ""
            except (OSError, http.client.HTTPException) as exc:
                reply["answer"] = f"no answer ({type(exc).__name__}: {exc})".replace(": )", ")")
            finally:
                conn.close()

        client = threading.Thread(target=export, daemon=True)
        client.start()
        if until(f"export {ORDER}: rendering") is None:
            run.problem = f"the service never started rendering export {ORDER}"
            return run
        run.tree = process_tree(pid1.pid)
        run.caught = pid1.catches(signal.SIGTERM)
        sent = time.monotonic()
        pid1.signal(signal.SIGTERM)
        run.status = pid1.wait(grace)
        run.seconds = time.monotonic() - sent
        if run.status is None:
            run.status, run.killed = pid1.kill(), True
            run.seconds = time.monotonic() - sent
        elif not real:
            run.left_running = _group_alive(pid1.process.pid, but=pid1.process.pid)
        client.join(grace + 10)
    while (line := _next(lines)) is not None:
        run.output.append(line)
    run.answer, run.answered = reply.get("answer", "no answer"), bool(reply.get("ok"))
    exported = state / "exported.jsonl"
    run.rows_flushed = len(exported.read_text().splitlines()) if exported.exists() else 0
    spool = state / "spool.log"
    run.spooler_flushed = spool.exists() and "spooler: flushed" in spool.read_text()
    run.clean_shutdown = (state / "shutdown.log").exists()
    return run


def _next(lines: queue.Queue) -> str | None:
    try:
        return lines.get(timeout=1.0)
    except queue.Empty:
        return None


def run_config(package: Path, config: str, grace: float = GRACE, namespace: bool = True) -> Run:
    """One of CONFIGS, built from the starter at `package`, stopped once."""
    label, form, handler = CONFIGS[config]
    if config == "starter":
        return stop(package, grace=grace, namespace=namespace, label=label)
    with tempfile.TemporaryDirectory(prefix="lab14-variant-") as folder:
        return stop(variant(package, Path(folder), form, handler), grace=grace, namespace=namespace, label=label)


# --- in words -------------------------------------------------------------------------------------

def status_words(status: int | None) -> str:
    if status is None:
        return "no status"
    if status > 128 and status - 128 in signal.Signals._value2member_map_:
        return f"exit {status} (killed by {signal.Signals(status - 128).name})"
    return f"exit {status}"


def tree(run: Run) -> None:
    """The container's processes while the export rendered, and whether each one had a SIGTERM handler."""
    where = "the container's PID namespace" if run.real else "the plain child's process group (no PID namespace)"
    print(f"processes in {where}, while export {ORDER} rendered:")
    for i, p in enumerate(run.tree):
        who = ("PID 1" if run.real else "the entrypoint") if i == 0 else "its child"
        handler = "a SIGTERM handler" if "SIGTERM" in p["catches"] else "no SIGTERM handler"
        print(f"  {'    ' * p['depth']}{'└─ ' if p['depth'] else ''}{who}: {p['command']}   [{handler}]")


def report(run: Run) -> None:
    if run.problem:
        print(f"{run.label}: {run.problem}\n" + "\n".join(run.output[-10:]))
        return
    first = run.tree[0]["command"] if run.tree else "?"
    where = "as PID 1 of a PID namespace" if run.real else "as a plain child (no PID namespace)"
    print(f"{run.label or 'the container'}, {where}:")
    print(f"  PID 1: {first}, with {'a' if run.caught else 'no'} SIGTERM handler" if run.real else
          f"  the entrypoint's process: {first}, with {'a' if run.caught else 'no'} SIGTERM handler")
    print(f"  SIGTERM sent while export {ORDER} rendered; grace period {run.grace:.1f} s")
    if run.killed:
        print(f"  nothing ended it: still running when the grace period was over, SIGKILL after {run.seconds:.2f} s: "
              f"{status_words(run.status)}")
    else:
        print(f"  it ended {run.seconds:.2f} s after SIGTERM: {status_words(run.status)}")
    if run.left_running:
        print(f"  still running after it ended: {'; '.join(run.left_running)}")
    print(f"  the export in flight: {run.answer}")
    print(f"  rows flushed to exported.jsonl: {run.rows_flushed}; spooler uploaded its batch: "
          f"{'yes' if run.spooler_flushed else 'no'}; shutdown.log written: {'yes' if run.clean_shutdown else 'no'}")
    print("  the container's output, whole:")
    for line in run.output:
        print(f"    {line}")


def draw(runs: list[Run], title: str):
    """One line per run, from SIGTERM to the exit of the container's first process, ending in a dot
    coloured by how the stop ended."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    runs = [r for r in runs if not r.problem]
    fig, ax = plt.subplots(figsize=(9, 0.6 * len(runs) + 2.0))
    y = list(range(len(runs)))[::-1]
    for yi, r in zip(y, runs):
        colour = ENDINGS[r.ending][0]
        ax.hlines(yi, 0, r.seconds, color=colour, linewidth=5)
        ax.plot([r.seconds], [yi], "o", color=colour, markersize=9)
        note = f"exit {r.status}, " + ("export answered" if r.answered else "export cut off")
        note += f", {r.rows_flushed} rows flushed"
        if r.left_running:
            n = len(r.left_running)
            note += f", {n} process{'es' if n > 1 else ''} left running"
        ax.text(r.seconds + 0.12, yi, note, va="center", fontsize=8)
    grace = max(r.grace for r in runs)
    ax.axvline(grace, color="0.3", linestyle="--", linewidth=1)
    ax.text(grace, len(runs) - 0.5, " end of the grace period: SIGKILL", fontsize=8, color="0.3", va="bottom")
    labels = [f"{r.label}\n{'PID 1 of a PID namespace' if r.real else 'a plain child, no namespace'}" for r in runs]
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_xlim(-0.1, grace * 2.3)
    ax.set_ylim(-0.7, len(runs) - 0.1)
    ax.set_xlabel("seconds from SIGTERM to the exit of the container's first process")
    shown = dict.fromkeys(r.ending for r in runs)
    ax.legend(handles=[Line2D([], [], marker="o", linestyle="", color=ENDINGS[e][0], label=ENDINGS[e][1])
                       for e in shown], fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2,
              title="how the stop ended", title_fontsize=8, frameon=False)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def every_wrong_stop(package: Path, shipped: Run | None = None, grace: float = GRACE) -> list[Run]:
    """Each configuration of CONFIGS stopped as PID 1 of a PID namespace (where there is one) and as a plain
    child, all at once on threads of their own; `shipped`, the starter's run as PID 1, is reused."""
    from concurrent.futures import ThreadPoolExecutor

    real = containers.missing(containers.PID_NAMESPACE) == ""
    jobs = [(config, namespace) for config in CONFIGS for namespace in ((True, False) if real else (False,))]
    reuse = {("starter", True): shipped} if shipped is not None and shipped.real else {}
    with ThreadPoolExecutor(len(jobs)) as pool:
        futures = {job: pool.submit(run_config, package, job[0], grace, job[1]) for job in jobs if job not in reuse}
        return [reuse[job] if job in reuse else futures[job].result() for job in jobs]


# --- the rule alone ------------------------------------------------------------------------------

def pid1_rule(namespace: bool = True) -> dict:
    """`sleep 60` as PID 1 of a PID namespace (or a plain child), sent SIGTERM: what became of the signal."""
    real = namespace and containers.missing(containers.PID_NAMESPACE) == ""
    with containers.Pid1(["sleep", "60"], real=real, stdin=subprocess.DEVNULL) as pid1:
        deadline = time.monotonic() + 10
        while not _command(pid1.pid).startswith("sleep") and time.monotonic() < deadline:
            time.sleep(0.005)  # unshare has forked; wait until the child is sleep
        out = {"real": real, "command": _command(pid1.pid), "catches": caught_signals(pid1.pid)}
        pid1.signal(signal.SIGTERM)
        status = _status(pid1.pid)  # the kill() above has returned: the signal is queued, acted on, or gone
        out["pending"] = bool((int(status.get("SigPnd", "0"), 16) | int(status.get("ShdPnd", "0"), 16))
                              & (1 << (signal.SIGTERM - 1)))
        out["state"] = status.get("State", "gone").strip()
        # Alive, and SIGTERM neither acted on nor waiting in its queue: the kernel dropped it at the send.
        out["dropped"] = out["state"][:1] not in ("g", "Z", "X") and not out["pending"]  # not gone, not a zombie
        if out["dropped"]:
            out["status"], out["killed"] = pid1.kill(), True  # nothing else will ever end it: SIGKILL, as the platform
        else:
            # a deadline only: SIGTERM's default action has ended the process long before
            out["status"], out["killed"] = pid1.wait(5.0), False
            if out["status"] is None:
                out["status"], out["killed"] = pid1.kill(), True
    return out
