"""What the re-grade's sandbox promises, tried from inside it as a learner's code would.

Each test runs a few lines in the sandbox (loopkata.room.sandbox) that try one way out: a
sysctl, a user namespace of its own, a root-only file, memory or files past their caps, more
processes than allowed, a grader stopped from inside. The suite runs as root in CI, where the
sandbox's nobody must not be root outside; as a user the same promises hold by other means.
Nothing here writes outside the sandbox's own in-memory folders: a write that would change the
machine is only opened, never made.
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from loopkata.room import sandbox
from loopkata.services import containers




# As a user: the same probes, the sandbox started by the host's nobody instead of root, with the
# system's Python and a copy of the engine everyone may read (the venv may sit in root's home).
AS_USER = r"""
import base64, json, sys, tempfile
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from loopkata.room import sandbox
code, timeout = sys.stdin.read(), float(sys.argv[2])
why = sandbox.why_no_sandbox()
if why:
    print(json.dumps({"why": why})); sys.exit()
with tempfile.TemporaryDirectory() as tmp:
    jail = sandbox.jail(Path(tmp) / "lent", Path(tmp) / "private")
    ran = jail.run([sys.executable, "-c", code], {}, timeout=timeout, outputs=Path(tmp) / "out")
print(json.dumps({"status": ran.status, "stdout": base64.b64encode(ran.stdout).decode(),
                  "stderr": base64.b64encode(ran.stderr).decode(), "stopped": ran.stopped}))
"""
SYSTEM_PYTHON = Path("/usr/bin/python3")


@pytest.fixture(params=["started-by-this-process", "started-by-a-user"])
def run(request, need_sandbox):
    """Runs a probe in the sandbox, started by this process, or (as root) by the host's nobody."""
    if request.param == "started-by-this-process":
        return _run
    if os.geteuid() != 0 or not SYSTEM_PYTHON.exists():
        pytest.skip("a sandbox started by a user is tried here as root, with the system's Python")
    engine = Path(tempfile.mkdtemp(prefix="loopkata-engine-"))
    shutil.copytree(Path(sandbox.__file__).resolve().parents[1], engine / "loopkata",
                    ignore=shutil.ignore_patterns("__pycache__"))
    os.chmod(engine, 0o755)
    request.addfinalizer(lambda: shutil.rmtree(engine, ignore_errors=True))

    def as_user(code: str, timeout: float = 60, memory_bytes: int | None = None) -> sandbox.Ran:
        done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", str(SYSTEM_PYTHON),
                               "-I", "-c", AS_USER, str(engine), str(timeout)], input=code, capture_output=True,
                              text=True, timeout=timeout + 60, cwd="/", env={"PATH": os.environ["PATH"], "HOME": "/"})
        said = json.loads(done.stdout or "{}") if done.returncode == 0 else {"why": done.stderr[-500:]}
        if "why" in said:
            pytest.skip(f"no sandbox for a user here: {said['why']}")
        return sandbox.Ran(said["status"], base64.b64decode(said["stdout"]), base64.b64decode(said["stderr"]),
                           said["stopped"])
    return as_user


def _run(code: str, timeout: float = 60, memory_bytes: int | None = None) -> sandbox.Ran:
    with tempfile.TemporaryDirectory() as tmp:
        jail = sandbox.jail(Path(tmp) / "lent", Path(tmp) / "private")
        return jail.run([sys.executable, "-c", code], {}, timeout=timeout, outputs=Path(tmp) / "out",
                        memory_bytes=memory_bytes)


def _said(ran: sandbox.Ran) -> str:
    return ran.stdout.decode(errors="replace").strip()


def test_code_in_the_sandbox_cannot_open_a_sysctl_for_writing(run):
    """the learner's code cannot change this machine's settings in /proc/sys, even when the facilitator is root"""
    ran = run(
        "import os\n"
        "opened = []\n"
        "for p in ('/proc/sys/fs/lease-break-time', '/proc/sys/kernel/core_pattern'):\n"
        "    try:\n        os.close(os.open(p, os.O_WRONLY)); opened.append(p)\n"  # opened, never written
        "    except OSError:\n        pass\n"
        "print(opened)\n")
    assert _said(ran) == "[]", (
        f"expected every sysctl to be refused for writing, but the code could open {_said(ran)} "
        f"(stderr: {ran.stderr.decode(errors='replace')[-500:]})")


def test_code_in_the_sandbox_cannot_make_a_user_namespace_of_its_own(run):
    """a user namespace inside the sandbox would make the code root there, with cgroup and mount powers"""
    ran = run("import subprocess\n"
               "done = subprocess.run(['unshare', '--user', '--map-root-user', 'true'], capture_output=True)\n"
               "print(done.returncode)\n")
    assert _said(ran) not in ("", "0"), (
        f"expected `unshare --user` to be refused in the sandbox; it exited {_said(ran) or '(no answer)'} "
        f"(stderr: {ran.stderr.decode(errors='replace')[-500:]})")


def test_nothing_of_etc_that_only_root_may_read_is_in_the_sandbox(run):
    """no file of /etc closed to others (a TLS key in /etc/ssl/private) is there to list or read"""
    ran = run(
        "import os, stat\n"
        "closed = []\n"
        "for top, folders, files in os.walk('/etc'):\n"
        "    for name in folders + files:\n"
        "        p = os.path.join(top, name)\n"
        "        if not os.path.islink(p) and not os.lstat(p).st_mode & stat.S_IROTH:\n"
        "            closed.append(p)\n"
        "print(sorted(closed)[:10])\n")
    assert _said(ran) == "[]", f"expected only files everyone may read in the sandbox's /etc; found {_said(ran)}"


def test_the_root_and_dev_are_read_only_and_dev_shm_is_sized(run):
    """the sandbox's / and /dev take no file, and /dev/shm holds no more than its size"""
    ran = run(
        "import os\n"
        "took = []\n"
        "for p in ('/filler', '/dev/filler'):\n"
        "    try:\n        open(p, 'wb').close(); took.append(p)\n"
        "    except OSError:\n        pass\n"
        "written = 0\n"
        "try:\n"
        "    with open('/dev/shm/filler', 'wb') as f:\n"
        "        while written < 300 << 20:\n            f.write(b'x' * (1 << 20)); f.flush(); written += 1 << 20\n"
        "except OSError:\n    pass\n"
        "os.unlink('/dev/shm/filler')\n"
        "print(took, written >> 20)\n")
    took, mib = _said(ran).rsplit(" ", 1)
    assert took == "[]", f"expected / and /dev to refuse new files; the code wrote {took}"
    assert int(mib) <= sandbox.SHM_BYTES >> 20, (
        f"expected /dev/shm to stop at {sandbox.SHM_BYTES >> 20} MiB; the code wrote {mib} MiB there")


def test_the_home_and_tmp_together_hold_a_capped_size_and_number_of_files(run):
    """a learner's code fills its home and /tmp until they refuse: at the stated size and number of files, not the disk's"""
    ran = run(
        "import os\n"
        "files = 0\n"
        "try:\n"
        "    while files < 30000:\n"
        "        open(f'/tmp/f{files}', 'wb').close(); files += 1\n"
        "except OSError:\n    pass\n"
        "for n in range(files):\n    os.unlink(f'/tmp/f{n}')\n"
        "written = 0\n"
        "try:\n"
        "    with open(os.path.join(os.environ['HOME'], 'filler'), 'wb') as f:\n"
        "        while written < 700 << 20:\n            f.write(b'x' * (1 << 20)); f.flush(); written += 1 << 20\n"
        "except OSError:\n    pass\n"
        "print(files, written >> 20)\n", timeout=120)
    files, mib = map(int, _said(ran).split())
    assert files <= sandbox.SPACE_FILES, (
        f"expected at most {sandbox.SPACE_FILES} files in the home and /tmp; the code made {files}")
    assert mib <= sandbox.SPACE_BYTES >> 20, (
        f"expected at most {sandbox.SPACE_BYTES >> 20} MiB in the home and /tmp; the code wrote {mib} MiB")


def _tasks_of(uid: int) -> int:
    """Threads of every process whose real user is `uid`, now."""
    count = 0
    for status in Path("/proc").glob("[0-9]*/task/[0-9]*/status"):
        try:
            uid_line = next(line for line in status.read_text().splitlines() if line.startswith("Uid:"))
        except (OSError, StopIteration):
            continue
        count += int(uid_line.split()[1]) == uid
    return count


def test_the_number_of_processes_and_threads_is_capped(run):
    """code that starts threads without end is refused at the cap, not at the machine's 32,768"""
    nobody_tasks_before = _tasks_of(65534)
    ran = run(
        "import threading\n"
        "done = threading.Event(); started = 0\n"
        "try:\n"
        "    while started < 2000:\n"
        "        threading.Thread(target=done.wait, daemon=True).start(); started += 1\n"
        "except RuntimeError:\n    pass\n"
        "done.set()\n"
        "print(started)\n")
    # Started by a user, the cap is RLIMIT_NPROC: that user's tasks when the sandbox began, plus TASKS. Tasks of the
    # same user that end meanwhile (another test's sandbox, as nobody too) free their slots; 16 more for those that
    # began between this count and the sandbox's start.
    slack = nobody_tasks_before + 16 if run.__name__ == "as_user" else 0
    assert int(_said(ran)) < sandbox.TASKS + slack, (
        f"expected the sandbox to refuse threads past {sandbox.TASKS}"
        + (f" (and the {slack} tasks nobody had when it began)" if slack else "") + f"; the code started {_said(ran)}")


@pytest.mark.usefixtures("need_sandbox")
def test_files_in_memory_count_in_the_memory_cap_as_root():
    """as root the sandbox's cgroup counts what its in-memory folders hold with what its processes hold"""
    if os.geteuid() != 0 or containers._cgroup_refused("memory"):
        pytest.skip("the memory cap of the whole sandbox needs a cgroup, which root may make here")
    cap = 256 << 20
    ran = _run(
        "import os\n"
        "with open('/tmp/filler', 'wb') as f:\n"
        "    for _ in range(200):\n        f.write(b'x' * (1 << 20))\n"
        "held = bytearray(200 << 20)\n"
        "for i in range(0, len(held), 4096):\n    held[i] = 1\n"
        "print('held both')\n", memory_bytes=cap)
    assert _said(ran) != "held both", (
        "expected 200 MiB in /tmp and 200 MiB of the process's own to pass a 256 MiB cap together; "
        "the code held both")


def test_code_that_stops_its_own_grader_is_ended_at_once(run):
    """SIGSTOP to every process of the check: no deadline inside can end it, so the sandbox does, without waiting out its bound"""
    started = time.monotonic()
    ran = run("import os, signal, subprocess\n"
               "subprocess.Popen(['sleep', '600'])\n"
               "os.kill(-1, signal.SIGSTOP)\n"  # every process it may signal, the sandbox's init spared
               "os.kill(os.getpid(), signal.SIGSTOP)\n", timeout=300)
    took = time.monotonic() - started
    assert ran.stopped == "stopped", f"expected the run to be ended as stopped; it ended with status {ran.status}"
    assert took < 60, f"expected the stopped code to be ended long before its 300 s bound; it took {took:.0f} s"


def test_the_readme_states_the_sandboxs_caps_as_the_code_sets_them():
    """the README's table of what the sandbox promises gives the figures the sandbox uses"""
    from loopkata.model import catalogue
    from loopkata.room import regrade

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    katas = catalogue.load()
    first = next(k for k in katas if k.number == 1)
    for figure in (f"{sandbox.SPACE_BYTES >> 20} MiB and {sandbox.SPACE_FILES:,} files together",
                   f"| `/dev/shm` | {sandbox.SHM_BYTES >> 20} MiB |",
                   f"| processes and threads | {sandbox.TASKS}, in that cgroup | {sandbox.TASKS} more than you run |",
                   f"at most {(sandbox.SPACE_BYTES + sandbox.SHM_BYTES) >> 20} MiB beside it",
                   f"kata 01 alone: {regrade.learner_seconds([first]):.0f} s; all {len(katas)}: "
                   f"{regrade.learner_seconds(katas):.0f} s"):
        assert figure in readme, f"expected the README's sandbox table to say {figure!r}"
