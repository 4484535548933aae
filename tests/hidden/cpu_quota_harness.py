"""What the hidden tests of kata 15 (cpu-quota) build, run and read.

On the test's side:

- `v1_tree` and `v2_tree` lay out a folder as the kernel lays out / for one
  process: `proc/self/cgroup`, and `sys/fs/cgroup/...` with the root cgroup
  (no quota, counters that never move) and the process's own cgroup (its
  quota, its cpu.stat). A v1 tree is a hybrid machine's (its
  /proc/self/cgroup also has v2's line `0::/`), with the cpu controller
  mounted as one of `V1_LAYOUTS` says, and other controllers' lines (cpuset,
  cpuacct) before the cpu one, in other cgroups. `write_cpu_stat` rewrites a
  cgroup's counters in one rename, so a reader never sees half a file.
- `run_cases` runs `effective_cpus(root)` (and, if asked, the executor that
  `install(loop, root)` gives a loop) in a fresh Python process, with its CPU
  affinity and its PYTHON_CPU_COUNT set first: Python 3.13 reads
  PYTHON_CPU_COUNT when it starts, and the affinity is the kernel's, so both
  must be set before the code under test runs. A case may also set
  variables in os.environ for its own call only (a value Python 3.13 would
  refuse at start-up, such as a word). The child records the files the code
  opened (an audit hook), so that a message can say what it read.
- `Live` starts this file as a script in a real cgroup (or a plain process
  on the fallback): the service's start-up, then `lagmon.watch()` while a
  thread keeps the CPU busy in pure Python, holding the GIL but for the
  switch interval; the script reads the cgroup's own cpu.stat just before
  and just after the watch. As root the service could write its cgroup's
  files (lift its quota, move itself out, make a cgroup inside): a thread
  of the test looks every LOOK_EVERY seconds while it runs, and once after
  (containers.Cgroup.changes), and `changes` says what it found. `own_cpu_cgroup` finds the cgroup this process
  is in on the real machine, for the fallback's run.

Run as a script (`python cpu_quota_harness.py cases|live IMPL`), it is the
child: it loads the package under test from IMPL, does what stdin (cases) or
its arguments (live) ask, and prints one JSON line. A hang is a dump of every
thread's stack on stderr just before the test's deadline.
"""
from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import threading
import traceback
from pathlib import Path

PACKAGE = "search_service"  # the name the package under test gets in the child
PERIOD_US = 100_000
FLOOD = 40  # blocking jobs sent to the default executor at once: more than any size the tests expect
V1_PATH = "/kubepods/burstable/pod1/c1"
V2_PATH = "/kubepods.slice/kubepods-pod1.slice/cri-c1.scope"


# --- the trees ---------------------------------------------------------------------------------

def write_cpu_stat(folder: Path, version: int, periods: int = 0, throttled: int = 0, throttled_us: int = 0) -> None:
    """The cgroup's cpu.stat, as the kernel writes it for `version`, replaced in one rename."""
    if version == 2:
        text = (f"usage_usec {periods * 40_000}\nuser_usec {periods * 39_000}\nsystem_usec {periods * 1_000}\n"
                f"nr_periods {periods}\nnr_throttled {throttled}\nthrottled_usec {throttled_us}\n"
                "nr_bursts 0\nburst_usec 0\n")
    else:
        text = f"nr_periods {periods}\nnr_throttled {throttled}\nthrottled_time {throttled_us * 1000}\n"
    fresh = folder / "cpu.stat.new"
    fresh.write_text(text)
    os.replace(fresh, folder / "cpu.stat")


V1_LAYOUTS = {
    # systemd's: cpu and cpuacct mounted together as cpu,cpuacct, with a link of each name; cpuset apart
    "together": "cpu,cpuacct",
    # each controller a hierarchy of its own, with lines of their own (`3:cpuset:/`, `2:cpuacct:/elsewhere`)
    "apart": "cpu",
    # cpu and cpuacct mounted together at sys/fs/cgroup/cpu and nowhere else, as libcgroup's cgconfig does
    "one-mount": "cpu",
}


def _v1_root(folder: Path) -> None:
    """The root cgroup of a v1 cpu hierarchy: no quota, counters that never move."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cpu.cfs_quota_us").write_text("-1\n")
    (folder / "cpu.cfs_period_us").write_text(f"{PERIOD_US}\n")
    write_cpu_stat(folder, 1)


def v1_tree(root: Path, quota_us: int | str, period_us: int | str = PERIOD_US, path: str = V1_PATH,
            layout: str = "together") -> Path:
    """A hybrid cgroup v1 machine (v2's line `0::/` too) whose process is in `path`; returns its cgroup.

    The cpuset line (and, with the controllers mounted apart, the cpuacct line) comes before the cpu
    controller's, and names another cgroup, whose folder has no quota: the quota is only in the cpu
    controller's own cgroup."""
    mounts = root / "sys/fs/cgroup"
    cpu = mounts / V1_LAYOUTS[layout]
    _v1_root(cpu)
    (mounts / "unified").mkdir()
    (mounts / "cpuset").mkdir()
    (mounts / "cpuset" / "cpuset.cpus").write_text("0-63\n")
    if layout == "together":
        for link in ("cpu", "cpuacct"):
            (mounts / link).symlink_to("cpu,cpuacct")
        lines = f"12:memory:{path}\n11:pids:{path}\n9:cpuset:/\n4:cpu,cpuacct:{path}\n1:name=systemd:{path}\n0::/\n"
    elif layout == "apart":
        _v1_root(cpu / "elsewhere")  # the cgroup the cpuacct line names: in the cpu hierarchy too, with no quota
        (mounts / "cpuacct" / "elsewhere").mkdir(parents=True)
        (mounts / "cpuacct" / "elsewhere" / "cpuacct.usage").write_text("0\n")
        lines = f"12:memory:{path}\n11:pids:{path}\n3:cpuset:/\n2:cpuacct:/elsewhere\n1:cpu:{path}\n0::/\n"
    else:
        lines = f"12:memory:{path}\n11:pids:{path}\n9:cpuset:/\n4:cpu,cpuacct:{path}\n0::/\n"
    own = cpu / path.lstrip("/")
    own.mkdir(parents=True)
    (own / "cpu.cfs_quota_us").write_text(f"{quota_us}\n")
    (own / "cpu.cfs_period_us").write_text(f"{period_us}\n")
    write_cpu_stat(own, 1)
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/self/cgroup").write_text(lines)
    return own


def v2_tree(root: Path, cpu_max: str, path: str = V2_PATH) -> Path:
    """A cgroup v2 machine whose process is in `path`, with `cpu_max` in its cpu.max; returns its cgroup."""
    mounts = root / "sys/fs/cgroup"
    own = mounts / path.lstrip("/")
    own.mkdir(parents=True)
    (mounts / "cgroup.controllers").write_text("cpuset cpu io memory hugetlb pids rdma misc\n")
    write_cpu_stat(mounts, 2)  # the root cgroup has a cpu.stat, and no cpu.max
    (own / "cpu.max").write_text(f"{cpu_max}\n")
    write_cpu_stat(own, 2)
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/self/cgroup").write_text(f"0::{path}\n")
    return own


def favour(cgroup) -> None:
    """Give `cgroup` the largest CPU weight its version allows (cpu.shares on v1, cpu.weight on v2).

    A quota caps the CPU time a cgroup may use; the weight decides its share while the machine is busy.
    On a loaded machine a cgroup of default weight may get less than its quota, and is then never
    throttled: with the largest weight it gets the CPU it asks for, up to its quota."""
    folder = cgroup.dirs.get("cpu")
    for name, value in (("cpu.shares", "262144"), ("cpu.weight", "10000")):
        if folder is not None and (folder / name).is_file():
            with contextlib.suppress(OSError):
                (folder / name).write_text(value)


def own_cpu_cgroup() -> tuple[Path | None, float | None]:
    """The folder of this process's own cgroup for the cpu controller on this machine, and its quota in CPUs.

    (None, None) when it cannot be found; the quota is None when there is none, or it cannot be read."""
    mounts = Path("/sys/fs/cgroup")
    try:
        hierarchies = [line.split(":", 2) for line in Path("/proc/self/cgroup").read_text().splitlines()
                       if line.count(":") >= 2]
    except OSError:
        return None, None
    folder = None
    for _, controllers, path in hierarchies:
        if "cpu" in controllers.split(","):
            mount = next((m for m in (mounts / "cpu", mounts / controllers) if m.is_dir()), None)
            folder = mount / path.lstrip("/") if mount is not None else None
            break
    else:
        folder = next((mounts / path.lstrip("/") for _, controllers, path in hierarchies if controllers == ""), None)
    if folder is None or not folder.is_dir():
        return None, None
    quota = None
    with contextlib.suppress(OSError, ValueError):
        if (folder / "cpu.max").is_file():
            fields = (folder / "cpu.max").read_text().split()
            quota = None if fields[0] == "max" else int(fields[0]) / int(fields[1])
        else:
            quota_us = int((folder / "cpu.cfs_quota_us").read_text())
            quota = quota_us / int((folder / "cpu.cfs_period_us").read_text()) if quota_us > 0 else None
    return folder, quota


# --- the child, on the test's side -------------------------------------------------------------

def _impl(kata) -> Path:
    path = Path(kata.__file__)
    return path.parent if path.name == "__init__.py" else path


def _env(python_cpu_count: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHON_CPU_COUNT", "PYTHONSTARTUP")}
    if python_cpu_count is not None:
        env["PYTHON_CPU_COUNT"] = python_cpu_count
    return env


class ChildFailed(Exception):
    """The child ended without its JSON line: a crash (str() says how), or a hang (`stacks` says where)."""

    def __init__(self, message: str, stacks: str = "", hang: bool = False):
        super().__init__(message)
        self.stacks, self.hang = stacks, hang


def _learner_lines(text: str, impl: Path) -> str:
    from loopkata.testing import describe_frames

    blocks = re.split(r"\n(?=Thread 0x|Current thread 0x)", text.strip())
    out = []
    for block in blocks:
        frames = [(m[1], int(m[2]), m[3]) for m in re.finditer(r'File "([^"]+)", line (\d+) in (\S+)', block)]
        frames.reverse()
        mine = describe_frames(frames, fallback=False, root=impl)
        if mine:
            out += ["a thread is stuck at", *(f"    {line}" for line in mine)]
    return "\n".join(out)


def _finish(child: subprocess.Popen, impl: Path, seconds: float, stdin: str | None = None) -> dict:
    try:
        out, err = child.communicate(stdin, timeout=seconds + 3)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, 9)
        out, err = child.communicate()
        raise ChildFailed("the process did not finish", _learner_lines(err, impl) or err[-2000:], hang=True) from None
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if not lines:
        how = f"it was killed by signal {-child.returncode}" if child.returncode < 0 else f"it exited with status {child.returncode}"
        raise ChildFailed(f"the process ended without an answer ({how}); its last words: {err.strip()[-1500:] or 'none'}")
    return json.loads(lines[-1])


def run_cases(kata, cases: list[dict], python_cpu_count: str | None, seconds: float) -> list[dict]:
    """Each case {"root", "affinity" (a CPU number or None), "cpus_online" (as if the machine had that many CPUs,
    every one allowed), "executor" (bool), "environ" (variables set in os.environ for this case's call only; None
    unsets one)} in one fresh process.

    Each result has "affinity" (the CPUs the process could run on), "cpus" or "error" (and "lines"),
    "read" (the files the code opened: {"path", "inside" root, "missing"}), and with "executor",
    "workers" and "threads"."""
    impl = _impl(kata)
    child = subprocess.Popen(
        [sys.executable, __file__, "cases", str(impl), str(seconds)], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(python_cpu_count),
        start_new_session=True, preexec_fn=_die_with_parent())
    return _finish(child, impl, seconds, json.dumps(cases))["results"]


def _die_with_parent():
    from loopkata.services.processes import die_with_parent
    return die_with_parent()


class Live:
    """One run of the service's start-up and of `lagmon.watch(seconds)` in a fresh process, started at once.

    In `cgroup` (a containers.Cgroup) when given: the script reads that cgroup's cpu.stat around the watch
    (without one, the cpu.stat file `stat` names, if any)."""

    LOOK_EVERY = 0.01  # seconds between two looks at the cgroup while the service runs

    def __init__(self, kata, seconds: float, deadline: float, cgroup=None, busy: bool = True, stat: str = ""):
        self.impl = _impl(kata)
        self.deadline = deadline
        self.cgroup = cgroup
        self.changes: list[str] = []  # what the service changed of its cgroup (containers.Cgroup.changes)
        stat = str(cgroup.dirs["cpu"] / "cpu.stat") if cgroup is not None else stat
        argv = [sys.executable, __file__, "live", str(self.impl), str(deadline), str(seconds), stat, str(int(busy))]
        if cgroup is not None:
            argv = cgroup.command(argv)
        self.child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      env=_env(None), start_new_session=True, preexec_fn=_die_with_parent())
        self.pid = self.child.pid
        self._ended = threading.Event()
        self._watcher = None
        if cgroup is not None:  # as root the service may write its cgroup's files: look while it runs
            self._watcher = threading.Thread(target=self._watch, name="the cgroup's watch", daemon=True)
            self._watcher.start()

    def _look(self, members: dict) -> None:
        self.changes += [c for c in self.cgroup.changes(members) if c not in self.changes]

    def _watch(self) -> None:
        while not self._ended.wait(self.LOOK_EVERY):
            self._look({self.pid: "itself"})

    def _stop_watching(self) -> None:
        self._ended.set()
        if self._watcher is not None:
            self._watcher.join()
            self._watcher = None
            self._look({})  # the limits and the cgroups inside, as the service left them

    def result(self) -> dict:
        try:
            return _finish(self.child, self.impl, self.deadline)
        finally:
            self._stop_watching()

    def close(self) -> None:
        if self.child.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.child.pid, 9)
            self.child.communicate()
        self._stop_watching()


# --- the child ---------------------------------------------------------------------------------

def _load(impl: Path):
    spec = importlib.util.spec_from_file_location(PACKAGE, impl / "__init__.py", submodule_search_locations=[str(impl)])
    package = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = package
    spec.loader.exec_module(package)
    return importlib.import_module(f"{PACKAGE}.runtime"), importlib.import_module(f"{PACKAGE}.lagmon")


def _raised(exc: BaseException, impl: Path) -> dict:
    from loopkata.testing import describe_frames
    frames = [(f.filename, f.lineno, f.name) for f in traceback.extract_tb(exc.__traceback__)]
    return {"error": f"{type(exc).__name__}: {exc}", "lines": describe_frames(frames, fallback=False, root=impl)}


def _threads_started(loop: asyncio.AbstractEventLoop) -> int:
    """How many threads the loop's default executor starts for FLOOD blocking jobs sent at once.

    A thread pool starts its threads in submit(), one per job until it has as many as it may:
    the threads alive right after the last submit are all it will start."""
    gate = threading.Event()

    async def flood() -> int:
        before = set(threading.enumerate())
        jobs = [loop.run_in_executor(None, gate.wait, 30) for _ in range(FLOOD)]
        started = len([t for t in threading.enumerate() if t not in before])
        gate.set()
        await asyncio.gather(*jobs)
        return started

    try:
        return loop.run_until_complete(flood())
    finally:
        gate.set()


_opened: list[str] | None = None  # while a case runs: every path the code under test opens


def _audit(event: str, args: tuple) -> None:
    if event == "open" and _opened is not None and args:
        with contextlib.suppress(Exception):  # an error here would be raised in the code under test
            if isinstance(args[0], (str, bytes, os.PathLike)):
                _opened.append(os.fsdecode(os.fspath(args[0])))


def _reads(paths: list[str], root: Path, impl: Path) -> list[dict]:
    """The files the code opened, but Python's own and its package's: under `root` as relative paths."""
    base = os.path.normpath(root)
    skip = tuple({os.path.normpath(p) + os.sep for p in (sys.prefix, sys.base_prefix, str(impl))})
    out: list[dict] = []
    for raw in paths:
        full = os.path.normpath(os.path.join(os.getcwd(), raw))
        if full.endswith((".py", ".pyc", ".so", ".pth")) or full.startswith(skip):
            continue
        inside = full.startswith(base + os.sep)
        seen = {"path": os.path.relpath(full, base) if inside else full, "inside": inside,
                "missing": not os.path.exists(full)}
        if seen not in out:
            out.append(seen)
    return out[:8]


def _set_env(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


_REAL_AFFINITY, _REAL_CPU_COUNT = os.sched_getaffinity, os.cpu_count


def _as_if_online(n: int | None) -> None:
    """os.sched_getaffinity(0) and os.cpu_count() as on a machine of `n` CPUs (None: this machine's own).

    This machine has few CPUs; what a rule does with 4, 16 or 64 is an input like any other."""
    if n is None:
        os.sched_getaffinity, os.cpu_count = _REAL_AFFINITY, _REAL_CPU_COUNT
    else:
        os.sched_getaffinity, os.cpu_count = (lambda pid: set(range(n))), (lambda: n)


def _cases(impl: Path, deadline: float) -> dict:
    global _opened
    runtime, _ = _load(impl)
    sys.addaudithook(_audit)
    results = []
    mask = os.sched_getaffinity(0)
    for case in json.loads(sys.stdin.read()):
        root, result = Path(case["root"]), {}
        saved = {name: os.environ.get(name) for name in case.get("environ", {})}
        try:
            if case.get("affinity") is not None:
                os.sched_setaffinity(0, {case["affinity"]})
            if case.get("cpus_online"):  # a machine of that many CPUs, this process allowed on every one
                _as_if_online(case["cpus_online"])
            result["affinity"] = len(os.sched_getaffinity(0))
            for name, value in case.get("environ", {}).items():
                _set_env(name, value)
            _opened, raised = [], None
            try:
                result["cpus"] = runtime.effective_cpus(root)
            except Exception as exc:  # noqa: BLE001 - the learner's error is the verdict
                raised = exc
            finally:
                result["read"], _opened = _reads(_opened, root, impl), None
            if raised is not None:
                result.update(_raised(raised, impl))
            if case.get("executor") and "error" not in result:
                try:
                    result["workers"] = runtime.sizing(root).workers
                    loop = asyncio.new_event_loop()
                    try:
                        runtime.install(loop, root)
                        result["threads"] = _threads_started(loop)
                    finally:
                        loop.run_until_complete(loop.shutdown_default_executor())
                        loop.close()
                except Exception as exc:  # noqa: BLE001
                    result.update(_raised(exc, impl))
        finally:
            _opened = None
            _as_if_online(None)
            os.sched_setaffinity(0, mask)
            for name, value in saved.items():
                _set_env(name, value)
        results.append(result)
    return {"results": results}


def _read_stat(path: str) -> dict:
    counters = {}
    with contextlib.suppress(OSError):
        for line in Path(path).read_text().splitlines():
            name, _, value = line.partition(" ")
            if value.strip().isdigit():
                counters[name] = int(value)
    return counters


def _live(impl: Path, seconds: float, stat: str, busy: bool) -> dict:
    runtime, lagmon = _load(impl)
    out: dict = {"affinity": len(os.sched_getaffinity(0))}
    try:
        out["cpus"] = runtime.effective_cpus()
        out["workers"] = runtime.sizing().workers
        loop = asyncio.new_event_loop()
        runtime.install(loop)
        out["threads"] = _threads_started(loop)
    except Exception as exc:  # noqa: BLE001
        out["startup"] = _raised(exc, impl)
        loop = asyncio.new_event_loop()
    stop = threading.Event()

    def spin() -> None:  # pure Python: it holds the GIL but for the switch interval
        n = 0
        while not stop.is_set():
            n += 1

    spinner = threading.Thread(target=spin, name="busy", daemon=True)
    if busy:
        spinner.start()
    try:
        out["before"] = _read_stat(stat) if stat else {}
        try:
            report = loop.run_until_complete(lagmon.watch(seconds))
            out["cause"] = getattr(report, "cause", None)
            out["report"] = str(report)
        except Exception as exc:  # noqa: BLE001
            out["watch"] = _raised(exc, impl)
        out["after"] = _read_stat(stat) if stat else {}
    finally:
        stop.set()
    return out


def main(argv: list[str]) -> None:
    from loopkata.grading.stackdump import dump_stacks_later
    mode, impl, deadline = argv[0], Path(argv[1]), float(argv[2])
    dump_stacks_later(max(deadline - 0.5, 0.1), 2)
    if mode == "cases":
        answer = _cases(impl, deadline)
    else:
        answer = _live(impl, float(argv[3]), argv[4], argv[5] == "1")
    sys.stdout.write(json.dumps(answer, default=str) + "\n")
    sys.stdout.flush()
    os._exit(0)  # threads of the code under test may still run: the answer is out


if __name__ == "__main__":
    main(sys.argv[1:])
