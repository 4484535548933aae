"""The kernel's own container mechanisms, started by loopkata itself: no container engine needed.

A container is a process with a PID namespace of its own (so that it is PID 1), a cgroup with a
CPU quota, and a cgroup with a memory limit. This module makes each of them for one process, where
the kernel lets this process do so (root, or user namespaces for the PID namespace), and says in
one sentence what is missing where it may not.

Where a mechanism is missing, a kata runs a fallback that shows the same behaviour by other means
(`duty_cycle` for a CPU quota, `address_space_limit` for a memory limit, a plain child for PID 1),
and a hidden test that needs the real thing raises `NotHere`: the check then says "could not run
here", never "solved". LOOPKATA_CONTAINER=fallback forces the fallback, so that path is tested too.
"""
from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from ..model.catalogue import MECHANISM_NAMES

PID_NAMESPACE, CPU_LIMIT, MEMORY_LIMIT = MECHANISM_NAMES
MECHANISMS = {
    PID_NAMESPACE: "a PID namespace, so that the service is PID 1 as in a container",
    CPU_LIMIT: "a cgroup with a CPU quota, as `docker run --cpus` and a pod's CPU limit make",
    MEMORY_LIMIT: "a cgroup with a memory limit and no swap, as `docker run --memory` and a pod's memory limit make",
}
FORCE = "LOOPKATA_CONTAINER"  # "fallback": act as if the kernel refused every mechanism
SANDBOXED = "LOOPKATA_SANDBOXED"  # "1" in the re-grade's sandbox, which hides the machine's cgroups
CGROUP_FS = Path("/sys/fs/cgroup")
_PREFIX = "loopkata-"  # every cgroup made here: loopkata-<pid of its maker>-<random>
_ENTER = "for p in "  # how the shell that puts a process in its cgroup (Cgroup.command) begins
CPU_QUOTA, MEMORY, MEMORY_AND_SWAP, SWAP = "CPU quota", "memory limit", "memory+swap limit", "swap limit"


class NotHere(Exception):
    """A hidden test needs a mechanism this machine does not give: the check cannot say "solved".

    str() is one paragraph: what could not run, why, and where it can."""


class TooBusy(NotHere):
    """A hidden test ran, again and again, on a machine so busy that what it saw could be the machine's doing rather
    than the code's: no verdict on the code either way, and "could not run here" rather than an error."""


def forced() -> bool:
    return os.environ.get(FORCE, "").strip().lower() == "fallback"


def missing(mechanism: str) -> str:
    """'' when this process may use `mechanism`, else one sentence saying why not."""
    if mechanism not in MECHANISMS:
        raise ValueError(f"unknown mechanism {mechanism!r}; known: {', '.join(MECHANISMS)}")
    if forced():
        return f"{FORCE}=fallback is set, which makes loopkata act as on a machine without it."
    if not sys.platform.startswith("linux"):
        return f"This machine runs {sys.platform}, and {MECHANISMS[mechanism]} is a Linux kernel mechanism."
    if mechanism == PID_NAMESPACE:
        return _pid_namespace_refused()
    refused = _cgroup_refused("cpu" if mechanism == CPU_LIMIT else "memory")
    if refused and sandboxed():
        return _in_the_sandbox(mechanism, refused)
    return refused


def sandboxed() -> bool:
    """Whether this runs in the re-grade's sandbox (room/sandbox.py sets LOOPKATA_SANDBOXED=1 there)."""
    return os.environ.get(SANDBOXED, "").strip() == "1"


# What a check runs of a kata that needs the mechanism, when the mechanism is missing: the tests that
# read made-up cgroup files run as anywhere; the test that needs the real thing runs the fallback, which
# may fail a wrong fix, and then says NotHere.
_FALLBACK_RUNS = {
    CPU_LIMIT: ("a CPU quota", "the service stopped by SIGSTOP for part of every 0.1 s"),
    MEMORY_LIMIT: ("a memory limit", "the worker under an address-space limit, with a made-up memory.current"),
}


def _in_the_sandbox(mechanism: str, refused: str) -> str:
    """Why `mechanism` is missing in the re-grade's sandbox, and what a claim on its kata is checked against there."""
    limit, fallback = _FALLBACK_RUNS[mechanism]
    why = ("hides this machine's cgroups (/sys/fs/cgroup)" if _version() == 0 else
           f"lets the code it runs make no cgroup ({refused[:1].lower()}{refused[1:].rstrip('.')})")
    return (f"The re-grade's sandbox {why}, so no cgroup with {limit} can be made in it: there a claim is "
            f"checked only by the tests that read made-up cgroup files and by the fallback ({fallback}), which "
            "can contradict a claim but never confirm it.")


def not_here(mechanism: str, what: str) -> NotHere:
    """The NotHere a test raises: `what` could not run, because the mechanism is missing."""
    return NotHere(
        f"{what[:1].upper()}{what[1:]} needs {MECHANISMS[mechanism]}. {missing(mechanism)} So this test "
        "could not run here (the fallback it ran instead can show a wrong fix, not prove a right one), and the "
        "check cannot say solved. Run the check where the kernel allows it (as root on Linux, as the suite "
        "does in CI; or in a Linux VM or WSL 2) to have it graded."
    )


@functools.lru_cache(maxsize=None)
def _pid_namespace_refused() -> str:
    if shutil.which("unshare") is None:
        return "The `unshare` command (util-linux) is not installed."
    try:
        done = subprocess.run([*_unshare(), "true"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`unshare --pid` could not run ({exc})."
    if done.returncode != 0:
        if sandboxed():  # the re-grade's sandbox (loopkata.room.sandbox)
            return ("The re-grade's sandbox lets the code in it make no namespace of its own (one would give "
                    "a learner's code powers against this machine), so PID 1 cannot be made in it.")
        why = (done.stderr.strip().splitlines() or ["no reason given"])[-1]
        return f"The kernel refused a new PID namespace to this user ({why})."
    return ""


def pid_namespace_argv() -> list[str]:
    """What to put before a command to run it as PID 1 of a new PID namespace; [] where the kernel refuses one."""
    return [] if forced() or _pid_namespace_refused() else _unshare()


def _unshare() -> list[str]:
    """The unshare command for a new PID namespace: a user namespace too where this is not root."""
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    return ["unshare", *user, "--pid", "--fork", "--kill-child"]


# --- PID 1 -------------------------------------------------------------------------------------

class Pid1:
    """`argv` run as PID 1 of a new PID namespace (or, on the fallback, as a plain child).

    `pid` is the process the platform signals, as `docker stop` signals a container's PID 1,
    seen from outside; `real` says which of the two it is."""

    def __init__(self, argv: list[str], *, real: bool, **popen):
        self.real = real
        self.killed_by = 0  # once it has ended: the signal that killed PID 1, 0 if it exited
        cmd = [*_unshare(), *argv] if real else list(argv)
        self.process = subprocess.Popen(cmd, start_new_session=True, **popen)
        self.pid = self.process.pid if not real else self._init_pid()

    def _init_pid(self, timeout: float = 10.0) -> int:
        """unshare forks the namespace's PID 1: its only child."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            children = _children(self.process.pid)
            if children:
                return children[0]
            if self.process.poll() is not None:
                raise RuntimeError(f"unshare ended with status {self.process.returncode} before starting PID 1")
            time.sleep(0.005)
        raise RuntimeError("unshare started no PID 1")

    def signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, sig)

    def catches(self, sig: int) -> bool:
        """Whether PID 1 has a handler for `sig` now (the kernel drops a signal PID 1 does not catch)."""
        return bool(_signal_mask(self.pid, "SigCgt") & (1 << (sig - 1)))

    def command(self) -> str:
        """PID 1's command line, for messages: the program by its name (`python service.py`), as `ps` shows it,
        not by where this machine keeps it."""
        with contextlib.suppress(OSError):
            words = Path(f"/proc/{self.pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
            return " ".join([Path(words[0]).name, *words[1:]]).strip() if words[0] else "?"
        return "?"

    def wait(self, timeout: float) -> int | None:
        """PID 1's exit status as a container runtime reports it (128 + signal when killed), or None.

        `killed_by` then tells a signal (its number) from an exit code above 128 (0)."""
        try:
            status = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        # unshare --fork exits as its child did: with its code, or killing itself with the same signal
        self.killed_by = -status if status < 0 else 0
        return 128 - status if status < 0 else status

    def kill(self) -> int:
        """SIGKILL, as the platform sends at the end of the grace period; the status (137)."""
        # unshare's group first, PID 1 with it: an unshare that outlives PID 1 by a moment (a busy
        # machine) wakes to re-raise SIGKILL on itself, which it cannot, and exits 1 instead of 137.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.signal(signal.SIGKILL)
        status = self.process.wait()
        self.killed_by = -status if status < 0 else 0
        return 128 - status if status < 0 else status

    def __enter__(self) -> "Pid1":
        return self

    def __exit__(self, *exc) -> None:
        if self.process.poll() is None:
            self.kill()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)  # the fallback's children, which no namespace ends


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _signal_mask(pid: int, field: str) -> int:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1], 16)
    return 0


# --- cgroups -----------------------------------------------------------------------------------

def _version() -> int:
    """2 when /sys/fs/cgroup is the unified hierarchy, 1 when it holds one folder per controller, 0 else."""
    if (CGROUP_FS / "cgroup.controllers").is_file():
        return 2
    if (CGROUP_FS / "cpu").is_dir() or (CGROUP_FS / "memory").is_dir():
        return 1
    return 0


def _own_path(controller: str) -> str:
    """This process's cgroup in `controller`'s hierarchy (v1), or in the unified one (v2)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, names, path = line.split(":", 2)
            if (_version() == 2 and names == "") or controller in names.split(","):
                return path
    return "/"


def _parent(controller: str) -> Path:
    """Where loopkata makes its cgroups for `controller`."""
    if _version() == 2:
        return CGROUP_FS / _own_path(controller).lstrip("/")
    mount = CGROUP_FS / controller
    mine = mount / _own_path(controller).lstrip("/")
    return mine if os.access(mine, os.W_OK) else mount


@functools.lru_cache(maxsize=None)
def _cgroup_refused(controller: str) -> str:
    version = _version()
    if version == 0:
        return "This machine has no cgroup file system at /sys/fs/cgroup."
    parent = _parent(controller)
    if version == 2:
        enabled = (parent / "cgroup.subtree_control").read_text().split() if (parent / "cgroup.subtree_control").exists() else []
        if controller not in enabled:
            return (f"The {controller} controller is not enabled for the cgroups this process may make "
                    f"({parent}/cgroup.subtree_control), as on a machine where systemd has not delegated it.")
    elif not parent.is_dir():
        return f"This machine's cgroup v1 file system has no {controller} hierarchy."
    probe = parent / f"{_PREFIX}probe-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    try:
        probe.mkdir()
    except OSError as exc:
        return f"This user may not make a cgroup in {parent} ({exc.strerror}), as without root or a delegated cgroup."
    finally:
        with contextlib.suppress(OSError):
            probe.rmdir()
    return ""


class Cgroup:
    """A fresh cgroup with a CPU quota and/or a memory limit (no swap), for the processes started in it.

    Leaving the `with` block kills every process still in it, and in any cgroup made inside it, and
    removes them all. `stats()` reads the kernel's own counters: nr_throttled and throttled_usec (cpu),
    oom_kill and peak_bytes (memory). As root, the code run in it may write its files: `changes()`
    says what it changed (a limit, a cgroup made inside, a process moved out), so that a test can
    refuse a run whose container was not the one it made."""

    def __init__(self, *, cpus: float | None = None, memory_bytes: int | None = None, period_us: int = 100_000,
                 tasks: int | None = None):
        self.version = _version()
        self.dirs: dict[str, Path] = {}
        self.paths: dict[str, str] = {}  # controller -> the cgroup's path as /proc/PID/cgroup names it
        self.limited: dict[str, tuple[str, ...]] = {}  # what each limit is called -> the files that hold it
        self.as_set: dict[str, tuple[str, str]] = {}  # what each limit is called -> (its files' text, in words)
        self.removed: list[str] = []  # cgroups that close() found inside this one, and removed
        self._entered: set[int] = set()  # the processes changes() has seen in this cgroup
        name = f"{_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"
        controllers = ([("cpu", cpus)] if cpus is not None else []) + ([("memory", memory_bytes)] if memory_bytes is not None else [])
        controllers += [("pids", tasks)] if tasks is not None else []  # processes and threads together
        sweep()
        for controller, _ in controllers:
            if self.version == 2 and self.dirs:
                self.dirs[controller] = next(iter(self.dirs.values()))
                self.paths[controller] = next(iter(self.paths.values()))
                continue
            parent = _parent(controller)
            (parent / name).mkdir()
            self.dirs[controller] = parent / name
            mount = CGROUP_FS if self.version == 2 else CGROUP_FS / controller
            self.paths[controller] = "/" + str((parent / name).relative_to(mount))
        try:
            if cpus is not None:
                quota = max(1000, int(cpus * period_us))
                if self.version == 2:
                    self._write("cpu", "cpu.max", f"{quota} {period_us}")
                    self.limited[CPU_QUOTA] = ("cpu.max",)
                else:
                    self._write("cpu", "cpu.cfs_period_us", str(period_us))
                    self._write("cpu", "cpu.cfs_quota_us", str(quota))
                    self.limited[CPU_QUOTA] = ("cpu.cfs_quota_us", "cpu.cfs_period_us")
            if memory_bytes is not None:
                if self.version == 2:
                    self._write("memory", "memory.max", str(memory_bytes))
                    self.limited[MEMORY] = ("memory.max",)
                    with contextlib.suppress(OSError):
                        self._write("memory", "memory.swap.max", "0")
                        self.limited[SWAP] = ("memory.swap.max",)
                else:
                    self._write("memory", "memory.limit_in_bytes", str(memory_bytes))
                    self.limited[MEMORY] = ("memory.limit_in_bytes",)
                    with contextlib.suppress(OSError):  # no swap accounting: the machine has no swap to use
                        self._write("memory", "memory.memsw.limit_in_bytes", str(memory_bytes))
                        self.limited[MEMORY_AND_SWAP] = ("memory.memsw.limit_in_bytes",)
            if tasks is not None:
                self._write("pids", "pids.max", str(tasks))
            self.as_set = self.limits()
        except BaseException:
            self.close()
            raise

    def _write(self, controller: str, file: str, value: str) -> None:
        (self.dirs[controller] / file).write_text(value)

    def _read(self, controller: str, file: str) -> str:
        try:
            return (self.dirs[controller] / file).read_text()
        except (KeyError, OSError):
            return ""

    def command(self, argv: list[str]) -> list[str]:
        """`argv`, started inside this cgroup before it runs a line of its own."""
        procs = " ".join(f"'{d / 'cgroup.procs'}'" for d in dict.fromkeys(self.dirs.values()))
        return ["/bin/sh", "-c", f'{_ENTER}{procs}; do echo $$ > "$p" || exit 125; done; exec "$@"', "sh", *argv]

    def pids(self) -> list[int]:
        found: set[int] = set()
        for d in self.dirs.values():
            found |= {int(p) for p in self._read_dir(d).split()}
        return sorted(found)

    @staticmethod
    def _read_dir(d: Path) -> str:
        with contextlib.suppress(OSError):
            return (d / "cgroup.procs").read_text()
        return ""

    def stats(self) -> dict[str, int]:
        out: dict[str, int] = {}
        cpu = _pairs(self._read("cpu", "cpu.stat"))
        if cpu:
            out["nr_periods"] = cpu.get("nr_periods", 0)
            out["nr_throttled"] = cpu.get("nr_throttled", 0)
            out["throttled_usec"] = cpu.get("throttled_usec", cpu.get("throttled_time", 0) // 1000)
        if "memory" in self.dirs:
            events = _pairs(self._read("memory", "memory.events" if self.version == 2 else "memory.oom_control"))
            out["oom_kill"] = events.get("oom_kill", 0)
            peak = self._read("memory", "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes").strip()
            out["peak_bytes"] = int(peak) if peak.isdigit() else 0
        return out

    def limits(self) -> dict[str, tuple[str, str]]:
        """Each limit this cgroup was given, as its files hold it now: what it is called -> (the files' text, in words)."""
        out = {}
        for label, files in self.limited.items():
            controller = "cpu" if label == CPU_QUOTA else "memory"
            raw = [self._read(controller, f).strip() for f in files]
            out[label] = (" per ".join(raw), _cpus_words(raw) if label == CPU_QUOTA else _bytes_words(raw[0]))
        return out

    def changes(self, members: dict[int, str] | None = None) -> list[str]:
        """What was changed of this cgroup since it was made, each said as of the code that ran in it, and
        decided from the kernel's own files alone: a limit its files no longer hold as set ("changed its own
        memory limit from 128 MiB to 4 GiB"), a memory peak above the limit as set, a cgroup made inside it,
        this cgroup removed, and each of `members` (pid -> how to name it: "itself", "the other process")
        found, with any of its threads, in a cgroup outside this one.

        Each member must be a child of this process not reaped yet (else its pid may be another's by
        now). One that has ended, or is ending, is not looked at: the kernel moves an exiting process
        out of its cgroups, so where it is then says nothing of where it ran."""
        found = []
        gone = [d for d in dict.fromkeys(self.dirs.values()) if not d.is_dir()]
        found += [f"removed its own cgroup ({_shown(d)})" for d in gone]
        if not gone:
            now = self.limits()
            for label, (raw, words) in self.as_set.items():
                got_raw, got_words = now.get(label, ("", ""))
                if got_raw != raw:
                    before, after = (words, got_words) if words != got_words else (raw or "nothing", got_raw or "nothing")
                    found.append(f"changed its own {label} from {before} to {after}")
            limit = _number(self.as_set.get(MEMORY, ("", ""))[0])
            stats = self.stats() if limit else {}
            if limit and stats.get("peak_bytes", 0) > limit and not stats.get("oom_kill"):
                found.append(f"raised its own {MEMORY} while it ran: the container's memory peaked at "
                             f"{_bytes_words(str(stats['peak_bytes']))}, above the {_bytes_words(str(limit))} it was set to")
        for d in dict.fromkeys(self.dirs.values()):
            inner = _inside(d)
            for made in (c for c in inner if c.parent == d):
                deeper = sum(1 for c in inner if made in c.parents)
                found.append(f"made a cgroup of its own inside its container ({_shown(made)}"
                             + (f", and {deeper} more inside that one" if deeper else "") + ")")
        for pid, who in (members or {}).items():
            where = self._outside(pid)
            if where:
                found.append(f"moved {who} out of its cgroup ({where})")
        return found

    def _outside(self, pid: int) -> str:
        """Where `pid`, or one of its threads, is when that is outside this cgroup (and the cgroups in it); '' else.

        A process started by command() may not be in yet while it is still the shell that puts it there,
        or on its way into that shell (exec has not set its command line yet): until it has been seen in,
        its command line is read first, and it is looked at only once that is neither empty nor the shell's."""
        if pid not in self._entered:
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                return ""
            if not cmdline or cmdline.startswith(b"/bin/sh\0-c\0" + _ENTER.encode()):
                return ""
        inside = 0
        with contextlib.suppress(OSError):
            for task in sorted(Path(f"/proc/{pid}/task").iterdir(), key=lambda p: p.name != str(pid)):
                # A thread being born is listed before the kernel puts it in its creator's cgroups (it shows
                # the root's until then), and one that ends is taken out of them: the cgroup file is read
                # after the thread has been seen to have run, and before it is seen to be ending.
                if task.name != str(pid) and not _has_run(task):
                    continue
                try:
                    lines = (task / "cgroup").read_text().splitlines()
                    if _ending(task):
                        continue
                except OSError:
                    continue
                for controller, path in self.paths.items():
                    now = next((ln.split(":", 2)[2] for ln in lines if ln.count(":") >= 2 and (
                        ln.split(":", 2)[1] == "" if self.version == 2 else controller in ln.split(":", 2)[1].split(","))),
                        None)
                    if now is not None and now != path and not now.startswith(path.rstrip("/") + "/"):
                        thread = "" if task.name == str(pid) else f", thread {task.name}"
                        where = now if self.version == 2 else f"{now} of the {controller} hierarchy"
                        return f"pid {pid}{thread} was in {where}, not in {path}"
                inside += 1
        if inside:
            self._entered.add(pid)
        return ""

    def close(self) -> None:
        """Kill every process in this cgroup and in any cgroup made inside it, and remove them all."""
        for d in dict.fromkeys(self.dirs.values()):
            self.removed += [_shown(c) for c in _remove_tree(d)]
        self.dirs = {}

    def __enter__(self) -> "Cgroup":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _pairs(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            out[parts[0]] = int(parts[1])
    return out


def _sweep(parent: Path) -> None:
    """Remove loopkata's cgroups in `parent` whose maker has died, with any cgroup made inside them.

    A check killed with SIGKILL (at its deadline, or by hand) leaves its cgroups, empty: the supervisor
    kills the processes, but only the process that made a cgroup removes it."""
    for d in parent.glob(f"{_PREFIX}*"):
        m = re.match(rf"{_PREFIX}(?:probe-)?(\d+)-", d.name)
        if not m or Path(f"/proc/{m[1]}").exists():
            continue
        _remove_tree(d)


def sweep() -> None:
    """Remove every cgroup of loopkata's whose maker has died, in each hierarchy loopkata makes them in.

    Every check starts with this, and so does every Cgroup: what a killed check left is gone by
    the next check of any kata. Only loopkata's own cgroups (named loopkata-PID-...) are touched."""
    if not sys.platform.startswith("linux") or not _version():
        return
    for parent in dict.fromkeys(_parent(controller) for controller in ("cpu", "memory", "pids")):
        with contextlib.suppress(OSError):
            _sweep(parent)


def _inside(d: Path) -> list[Path]:
    """Every cgroup inside `d`, however deep, each before the ones inside it."""
    found, todo = [], [d]
    while todo:
        folder = todo.pop()
        with contextlib.suppress(OSError):
            with os.scandir(folder) as entries:
                inner = [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False)]
            found += inner
            todo += inner
    return found


def _remove_tree(d: Path) -> list[Path]:
    """Kill every process in cgroup `d` and in the cgroups inside it, and remove them, the innermost first.

    Returns the cgroups that were inside `d`."""
    inner = _inside(d)
    for _ in range(50):
        pids = {p for c in [d, *inner] for p in Cgroup._read_dir(c).split()}
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
        time.sleep(0.02)
    for c in [*reversed(inner), d]:
        with contextlib.suppress(OSError):
            c.rmdir()
    return inner


def _has_run(task: Path) -> bool:
    """Whether the task whose /proc folder is `task` has been on a CPU at least once (schedstat's third field).

    The kernel puts a new thread in its cgroups before it first runs it. False where schedstat is missing."""
    try:
        fields = (task / "schedstat").read_text().split()
    except OSError:
        return False
    return len(fields) >= 3 and fields[2].isdigit() and int(fields[2]) > 0


def _ending(task: Path) -> bool:
    """Whether the task whose /proc folder is `task` has ended or is ending (a zombie, or PF_EXITING)."""
    try:
        stat = (task / "stat").read_text()
    except OSError:
        return True
    fields = stat.rsplit(")", 1)[-1].split()
    return len(fields) < 7 or fields[0] in ("Z", "X") or bool(int(fields[6]) & 0x4)


def _shown(d: Path) -> str:
    """A cgroup's folder as a message names it: under /sys/fs/cgroup."""
    with contextlib.suppress(ValueError):
        return str(d.relative_to(CGROUP_FS))
    return str(d)


def _number(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def _bytes_words(text: str) -> str:
    """A memory limit's file text in words: "128 MiB", "no limit" (v2's max, v1's huge number)."""
    n = _number(text)
    if text == "max" or (n is not None and n >= 2**60):
        return "no limit"
    if n is None:
        return repr(text) if text else "nothing (the file could not be read)"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.{0 if n % size == 0 else 1}f} {unit}"
    return f"{n} bytes"


def _cpus_words(raw: list[str]) -> str:
    """A CPU quota's files in words: "0.5 CPU", "2 CPUs", "no quota"; raw is [cpu.max] or [quota, period]."""
    fields = raw[0].split() if len(raw) == 1 else raw
    if len(fields) < 2:
        return repr(" ".join(fields)) if fields else "nothing (the file could not be read)"
    quota, period = fields[0], _number(fields[1])
    if quota == "max" or quota.startswith("-"):
        return "no quota"
    if _number(quota) is None or not period:
        return repr(" ".join(fields))
    cpus = _number(quota) / period
    return f"{cpus:g} CPU{'s' if cpus > 1 else ''}"


def changed_from_inside(who: str, changes: list[str]) -> str:
    """The failure of a test whose code under test (`who`: "the worker") changed its container (Cgroup.changes)."""
    what = changes[0] if len(changes) == 1 else ", ".join(changes[:-1]) + " and " + changes[-1]
    return (f"expected {who} to run in its container as the test made it, but {who} {what}: a container cannot do "
            "that. Inside one, the cgroup files are read-only (or not there at all), so the write fails; this check "
            "runs as root, which may write them, and a run whose container was changed from inside proves nothing "
            "about the fix. The test has removed its cgroup, and any cgroup made inside it.")


# --- fallbacks ---------------------------------------------------------------------------------

@contextlib.contextmanager
def duty_cycle(pid: int, cpus: float, period: float = 0.1):
    """The fallback for a CPU quota: SIGSTOP the process for (1 - cpus) of every period, SIGCONT it for the rest.

    Like the kernel's quota it stops every thread at once; unlike it, it stops them whether they
    used their budget or not, and no counter in cpu.stat grows."""
    stop = threading.Event()
    run_for, stopped_for = period * cpus, period * (1 - cpus)

    def cycle() -> None:
        while not stop.wait(run_for):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
            stop.wait(stopped_for)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    thread = threading.Thread(target=cycle, name="loopkata-duty-cycle", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def address_space_limit(argv: list[str], limit_bytes: int) -> list[str]:
    """The fallback for a memory limit: `argv` under RLIMIT_AS, where going over is a MemoryError, not a kill."""
    return [sys.executable, "-c",
            "import os, resource, sys; n = int(sys.argv[1]); resource.setrlimit(resource.RLIMIT_AS, (n, n)); "
            "os.execvp(sys.argv[2], sys.argv[2:])", str(limit_bytes), *argv]
