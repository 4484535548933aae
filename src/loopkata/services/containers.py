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
CGROUP_FS = Path("/sys/fs/cgroup")
_PREFIX = "loopkata-"  # every cgroup made here: loopkata-<pid of its maker>-<random>


class NotHere(Exception):
    """A hidden test needs a mechanism this machine does not give: the check cannot say "solved".

    str() is one paragraph: what could not run, why, and where it can."""


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
    return _cgroup_refused("cpu" if mechanism == CPU_LIMIT else "memory")


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
        if os.environ.get("LOOPKATA_SANDBOXED") == "1":  # set by the re-grade's sandbox (loopkata.room.sandbox)
            return ("The re-grade's sandbox lets the code in it make no namespace of its own (one would give "
                    "a learner's code powers against this machine), so PID 1 cannot be made in it.")
        why = (done.stderr.strip().splitlines() or ["no reason given"])[-1]
        return f"The kernel refused a new PID namespace to this user ({why})."
    return ""


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
        """PID 1's command line, for messages."""
        with contextlib.suppress(OSError):
            return Path(f"/proc/{self.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
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

    Leaving the `with` block kills every process still in it and removes it. `stats()` reads the
    kernel's own counters: nr_throttled and throttled_usec (cpu), oom_kill and peak_bytes (memory)."""

    def __init__(self, *, cpus: float | None = None, memory_bytes: int | None = None, period_us: int = 100_000,
                 tasks: int | None = None):
        self.version = _version()
        self.dirs: dict[str, Path] = {}
        name = f"{_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"
        controllers = ([("cpu", cpus)] if cpus is not None else []) + ([("memory", memory_bytes)] if memory_bytes is not None else [])
        controllers += [("pids", tasks)] if tasks is not None else []  # processes and threads together
        for controller, _ in controllers:
            if self.version == 2 and self.dirs:
                self.dirs[controller] = next(iter(self.dirs.values()))
                continue
            parent = _parent(controller)
            _sweep(parent)
            (parent / name).mkdir()
            self.dirs[controller] = parent / name
        try:
            if cpus is not None:
                quota = max(1000, int(cpus * period_us))
                if self.version == 2:
                    self._write("cpu", "cpu.max", f"{quota} {period_us}")
                else:
                    self._write("cpu", "cpu.cfs_period_us", str(period_us))
                    self._write("cpu", "cpu.cfs_quota_us", str(quota))
            if memory_bytes is not None:
                if self.version == 2:
                    self._write("memory", "memory.max", str(memory_bytes))
                    with contextlib.suppress(OSError):
                        self._write("memory", "memory.swap.max", "0")
                else:
                    self._write("memory", "memory.limit_in_bytes", str(memory_bytes))
                    with contextlib.suppress(OSError):  # no swap accounting: the machine has no swap to use
                        self._write("memory", "memory.memsw.limit_in_bytes", str(memory_bytes))
            if tasks is not None:
                self._write("pids", "pids.max", str(tasks))
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
        return ["/bin/sh", "-c", f'for p in {procs}; do echo $$ > "$p" || exit 125; done; exec "$@"', "sh", *argv]

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

    def close(self) -> None:
        for _ in range(50):
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)
        for d in dict.fromkeys(self.dirs.values()):
            with contextlib.suppress(OSError):
                d.rmdir()
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
    """Remove loopkata's cgroups whose maker has died (a check killed at its deadline leaves them)."""
    for d in parent.glob(f"{_PREFIX}*"):
        m = re.match(rf"{_PREFIX}(\d+)-", d.name)
        if not m or Path(f"/proc/{m[1]}").exists():
            continue
        for pid in Cgroup._read_dir(d).split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
        with contextlib.suppress(OSError):
            d.rmdir()


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
