"""Runs one grading child under a hard wall-clock deadline and leaves no process behind.

Started by the grader as `python -I -S supervise.py DEADLINE MEMORY STATUS_FD [FOLDER] -- CMD...`
(standard library only, so it starts in a few milliseconds). It

- becomes a child subreaper, so anything the learner's code starts, even a
  process that calls setsid() to escape its process group, is re-parented to
  it when its own parent ends, and can be found and killed;
- starts CMD in a process group of its own, each process capped at MEMORY bytes of address
  space and at FILE_SIZE_CAP bytes per file it writes;
- kills CMD's group at DEADLINE seconds, plus the time the processes under it were kept
  waiting for a CPU by a busy machine (cpu_wait; at most stretch_cap() times DEADLINE in all), and
  writes that moving deadline, as a wall-clock time, to the file LOOPKATA_DEADLINE_FILE names (the
  grading child dumps its stacks just before it); it kills it too on SIGTERM/SIGINT (the grader's
  Ctrl-C), when the grader itself dies, or when the private memory of every process
  under it, added up, passes MEMORY (a per-process cap alone lets three children hold
  three times as much);
- then kills every process still left under it, reaps them, and writes one JSON
  line to STATUS_FD: how CMD ended, how many processes it left behind, the most
  memory the whole tree held and the seconds its deadline was moved back;
- and when the grader has died (killed with SIGKILL, it could not clean up), removes
  FOLDER, the check's temporary folder: nobody is left to read it, and it holds a
  copy of the code under test.
"""
import ctypes
import json
import os
import resource
import signal
import subprocess
import sys
import time

# Run alone, it loads the one module it shares with the grader (standard library only) from beside it.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_wait import CpuWait, stretch_cap

PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
# a file the tests or the code under test write (past it a write fails with EFBIG, or SIGXFSZ)
FILE_SIZE_CAP = int(os.environ.get("LOOPKATA_FILE_SIZE_CAP") or 1 << 30)
LOOK_EVERY = 0.1  # seconds between two looks at the tree: its memory, its wait for a CPU


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False  # not Linux: process groups are all we have


def _parents() -> dict[int, int]:
    """pid -> parent pid, for every process this one may see."""
    found = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            fields = stat[stat.rfind(b")") + 2:].split()
            if len(fields) > 1 and fields[0] != b"Z":
                found[int(name)] = int(fields[1])
    return found


def _children() -> list[int]:
    """Our direct children (on Linux every orphaned descendant becomes one of them)."""
    me = os.getpid()
    return [pid for pid, parent in _parents().items() if parent == me]


def _private_memory(pid: int) -> int:
    """Bytes of anonymous memory `pid` holds (RssAnon): what a process allocates itself. Shared
    and file-backed pages are left out, so pages several processes share count nowhere twice."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"RssAnon:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def tree(top: int) -> list[int]:
    """Every process under `top` (not `top` itself)."""
    children: dict[int, list[int]] = {}
    for pid, parent in _parents().items():
        children.setdefault(parent, []).append(pid)
    found, todo = [], list(children.get(top, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def _write_deadline(path: str, monotonic_deadline: float) -> None:
    """The deadline as a wall-clock time, replaced at once so that a reader never sees half of it."""
    try:
        with open(path + ".new", "w") as f:
            f.write(repr(time.time() + monotonic_deadline - time.monotonic()))
        os.replace(path + ".new", path)
    except OSError:
        pass  # the stacks may then come early; the deadline itself is ours


def _reap_all() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def ended(pid: int) -> int | None:
    """How child `pid` ended (an exit code, or minus the signal), None while it runs; it stays unreaped."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return 0
    if info is None:
        return None
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


def kill_group_of(pid: int, ended: bool) -> None:
    """Kill the process group that process `pid` led (it called setsid), with all it started.

    For a child that has `ended` and been reaped elsewhere (a fork server reaps its children at
    once), the id may have gone to a new process. If that one leads a group of the same id, ours
    is empty (setsid refuses an id a group still holds): a group kill then would stop a stranger."""
    if ended:
        try:
            if os.getpgid(pid) == pid:
                return
        except ProcessLookupError:
            pass
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_everything(group: int) -> int:
    """Kill CMD's group and every process re-parented to us; how many besides CMD were alive."""
    left = set()
    try:
        os.killpg(group, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        _reap_all()
        alive = [pid for pid in _children() if pid != group]
        if not alive:
            break
        for pid in alive:
            left.add(pid)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.01)
    _reap_all()
    return len(left)


def main(argv: list[str]) -> int:
    deadline, memory, status_fd = float(argv[0]), int(argv[1]), int(argv[2])
    folder = argv[3] if argv.index("--") > 3 else ""
    cmd = argv[argv.index("--") + 1:]
    parent = os.getppid()
    subreaper = _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)  # the grader died: clean up anyway
    stop = {"why": ""}

    def on_signal(signum, frame):
        stop["why"] = "interrupted"

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    def limits():
        if memory > 0:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_CAP, FILE_SIZE_CAP))
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    passed_fds = tuple(int(fd) for fd in os.environ.get("LOOPKATA_PASS_FDS", "").split(",") if fd)
    child = subprocess.Popen(cmd, preexec_fn=limits, process_group=0, pass_fds=passed_fds)
    started = time.monotonic()
    me, deadline_file = os.getpid(), os.environ.get("LOOPKATA_DEADLINE_FILE", "")
    cpu, most = CpuWait([child.pid]), deadline * (stretch_cap() - 1)
    allowed, written = 0.0, 0.0
    status, pause, peak, looked = None, 0.001, 0, 0.0
    while status is None:
        if stop["why"] or os.getppid() != parent:
            stop["why"] = stop["why"] or "interrupted"
            break
        now = time.monotonic()
        left = started + deadline + allowed - now
        if left <= 0:
            stop["why"] = "timed out"
            break
        if now - looked >= LOOK_EVERY:
            looked, under = now, tree(me)
            allowed = min(cpu.update(under), most)
            if deadline_file and allowed - written >= LOOK_EVERY:
                written = allowed
                _write_deadline(deadline_file, started + deadline + allowed)
            if memory > 0:
                peak = max(peak, sum(_private_memory(pid) for pid in under))
                if peak > memory:
                    stop["why"] = "memory"
                    break
        status = ended(child.pid)
        if status is None:
            time.sleep(min(left, pause))
            pause = min(pause * 2, 0.05)
    # CMD is not reaped yet: until it is, no new process can be given its pid, so the group
    # killed here is CMD's, never a stranger's that came to hold the same id.
    left_behind = _kill_everything(child.pid)
    record = {"event": "exit", "status": status, "stopped": stop["why"], "left_behind": left_behind,
              "subreaper": subreaper, "peak_memory": peak, "cpu_wait_allowed": round(allowed, 1)}
    os.write(status_fd, (json.dumps(record) + "\n").encode())
    if folder and os.getppid() != parent:  # the grader is gone: its folder would stay until the next check
        import shutil
        try:
            shutil.rmtree(folder, ignore_errors=True)
        except RecursionError:
            pass  # nested too deep for 3.11's rmtree: the next check's sweep removes it
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
