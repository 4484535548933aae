"""The kernel's container mechanisms that katas 14-16 start themselves (loopkata.services.containers).

CI runs as root on Linux, where every mechanism is allowed: there the suite fails if any of them
is missing, so the real path cannot silently become the fallback.
"""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loopkata.grading.report import headline
from loopkata.grading import runner
from loopkata.model import catalogue
from loopkata.services import containers

def running(pid: int) -> bool:
    """Whether `pid` is a live process: not gone, not a zombie waiting for the host's init to reap it."""
    for _ in range(100):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        if state in ("Z", "X"):
            return False
        time.sleep(0.01)
    return True


ROOT = Path(__file__).resolve().parents[1]
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux kernel mechanisms")


@pytest.fixture
def real(monkeypatch):
    monkeypatch.delenv(containers.FORCE, raising=False)


def test_ci_runs_the_real_mechanisms_not_the_fallback(real):
    """In CI (root on Linux) every mechanism is real: a check there never falls back"""
    if not (os.environ.get("CI") or os.environ.get("LOOPKATA_REAL_CONTAINERS")):
        pytest.skip("only CI (.ci/run sets LOOPKATA_REAL_CONTAINERS=1) promises root on Linux")
    refused = {m: containers.missing(m) for m in containers.MECHANISMS}
    assert not any(refused.values()), f"expected every container mechanism in CI, these fell back: {refused}"


def test_the_catalogue_and_the_mechanisms_agree():
    assert set(containers.MECHANISMS) == set(catalogue.MECHANISM_NAMES)
    for kata in catalogue.load():
        assert set(kata.mechanisms) <= set(containers.MECHANISMS), kata.id


def test_forcing_the_fallback_says_so_in_one_sentence(monkeypatch):
    monkeypatch.setenv(containers.FORCE, "fallback")
    for mechanism in containers.MECHANISMS:
        why = containers.missing(mechanism)
        assert why.startswith("LOOPKATA_CONTAINER=fallback is set") and why.count(". ") == 0, why
    assert containers.missing(containers.PID_NAMESPACE).endswith("as on a machine without it.")
    text = str(containers.not_here(containers.MEMORY_LIMIT, "the OOM test"))
    assert text.startswith("The OOM test needs a cgroup with a memory limit") and "could not run here" in text


def test_an_unknown_mechanism_is_a_programming_error():
    with pytest.raises(ValueError, match="unknown mechanism"):
        containers.missing("gpu")


@linux_only
def test_pid1_runs_as_pid_1_and_sigkill_ends_it(real):
    if containers.missing(containers.PID_NAMESPACE):
        pytest.skip(containers.missing(containers.PID_NAMESPACE))
    code = "import os, sys, time; print(os.getpid(), flush=True); time.sleep(60)"
    with containers.Pid1([sys.executable, "-c", code], real=True, stdout=subprocess.PIPE, text=True) as pid1:
        assert pid1.process.stdout.readline().strip() == "1"
        assert not pid1.catches(15), "a Python with no SIGTERM handler catches nothing"
        pid1.signal(15)
        assert pid1.wait(0.3) is None, "the kernel drops SIGTERM sent to a namespace's init without a handler"
        assert pid1.kill() == 137
    assert not running(pid1.pid), "PID 1 ended with its namespace"


@linux_only
@pytest.mark.parametrize("limits", [{"cpus": 0.5}, {"memory_bytes": 64 << 20}, {"cpus": 1, "memory_bytes": 64 << 20}])
def test_a_cgroup_ends_its_processes_and_is_removed(real, limits):
    needed = [containers.CPU_LIMIT] * ("cpus" in limits) + [containers.MEMORY_LIMIT] * ("memory_bytes" in limits)
    if any(containers.missing(m) for m in needed):
        pytest.skip("; ".join(containers.missing(m) for m in needed))
    with containers.Cgroup(**limits) as group:
        child = subprocess.Popen(group.command(["sleep", "60"]))
        for _ in range(200):
            if child.pid in group.pids():
                break
            time.sleep(0.01)
        assert group.pids() == [child.pid]
        folders = list(group.dirs.values())
    assert child.wait(5) == -9
    assert not any(f.exists() for f in folders)


@linux_only
def test_a_memory_cgroup_counts_its_oom_kill(real):
    if containers.missing(containers.MEMORY_LIMIT):
        pytest.skip(containers.missing(containers.MEMORY_LIMIT))
    grow = "x = []\nwhile True: x.append(bytearray(1 << 20))"
    with containers.Cgroup(memory_bytes=48 << 20) as group:
        done = subprocess.run(group.command([sys.executable, "-c", grow]), timeout=60)
        assert done.returncode == -9 and group.stats()["oom_kill"] == 1


@linux_only
def test_cgroups_left_by_a_killed_check_are_swept(real):
    if containers.missing(containers.CPU_LIMIT):
        pytest.skip(containers.missing(containers.CPU_LIMIT))
    dead = subprocess.Popen(["true"])
    dead.wait()
    parent = containers._parent("cpu")
    stale = parent / f"loopkata-{dead.pid}-stale"
    stale.mkdir()
    try:
        with containers.Cgroup(cpus=0.5):
            assert not stale.exists(), "a cgroup whose maker has died is removed when the next one is made"
    finally:
        if stale.exists():
            stale.rmdir()


def needs(*mechanisms):
    refused = [containers.missing(m) for m in mechanisms if containers.missing(m)]
    if refused:
        pytest.skip("; ".join(refused))


def started_in(group, argv):
    """`argv` started in `group`, once it is in (and has left the shell that puts it there)."""
    child = subprocess.Popen(group.command(argv))
    for _ in range(500):
        if child.pid in group.pids() and not Path(f"/proc/{child.pid}/cmdline").read_bytes().startswith(b"/bin/sh"):
            return child
        time.sleep(0.01)
    child.kill()
    raise AssertionError(f"expected {argv} to be in its cgroup within 5 s; it was not")


@linux_only
@pytest.mark.parametrize("limits, files, said", [
    ({"memory_bytes": 128 << 20}, {"memory.memsw.limit_in_bytes": str(4 << 30), "memory.limit_in_bytes": str(4 << 30),
                                   "memory.max": str(4 << 30)},
     "changed its own memory limit from 128 MiB to 4 GiB"),
    ({"cpus": 0.5}, {"cpu.cfs_quota_us": "-1", "cpu.max": "max 100000"}, "changed its own CPU quota from 0.5 CPU to no quota"),
], ids=["memory", "cpu"])
def test_a_limit_changed_from_inside_its_cgroup_is_found_and_said_in_words(real, limits, files, said):
    """a limit the code in a cgroup writes over (as root it may) is found from the cgroup's own files, and said as a learner reads it"""
    needs(containers.MEMORY_LIMIT if "memory_bytes" in limits else containers.CPU_LIMIT)
    with containers.Cgroup(**limits) as group:
        assert group.changes() == [], f"expected a cgroup just made to have no change, got {group.changes()}"
        folder = next(iter(group.dirs.values()))
        for name, value in files.items():  # what a learner's code as root can do
            if (folder / name).exists():
                (folder / name).write_text(value)
        found = group.changes()
    assert said in found, f"expected Cgroup.changes() to say {said!r} once the limit was written over, got {found}"


@linux_only
def test_a_memory_limit_raised_and_put_back_is_found_from_the_peak(real):
    """a memory limit raised while a process used the room and then put back is found: the peak is above the limit as set"""
    needs(containers.MEMORY_LIMIT)
    with containers.Cgroup(memory_bytes=64 << 20) as group:
        folder = group.dirs["memory"]
        files = ["memory.max"] if group.version == 2 else ["memory.memsw.limit_in_bytes", "memory.limit_in_bytes"]
        for name in files:  # raised, as a learner's code as root can
            if (folder / name).exists():
                (folder / name).write_text(str(256 << 20))
        take = "b = bytearray(100 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1"
        done = subprocess.run(group.command([sys.executable, "-c", take]), timeout=60)
        assert done.returncode == 0, f"expected 100 MiB to fit under the raised limit, the process ended with {done.returncode}"
        for name in reversed(files):  # and put back, once the memory is given back
            if (folder / name).exists():
                (folder / name).write_text(str(64 << 20))
        found = group.changes()
    assert len(found) == 1 and found[0].startswith("raised its own memory limit while it ran: the container's memory "
                                                   "peaked at 1") and found[0].endswith("above the 64 MiB it was set to"), (
        f"expected Cgroup.changes() to find the limit raised from the peak above it, got {found}")


@linux_only
def test_a_process_moved_out_of_its_cgroup_is_found(real):
    """a process moved out of its cgroup (as root it may) is found there, and one still in it is not"""
    needs(containers.MEMORY_LIMIT)
    child = None
    try:
        with containers.Cgroup(memory_bytes=64 << 20) as group:
            child = started_in(group, ["sleep", "60"])
            assert group.changes({child.pid: "itself"}) == [], (
                f"expected no change while the process is in its cgroup, got {group.changes({child.pid: 'itself'})}")
            (group.dirs["memory"].parent / "cgroup.procs").write_text(str(child.pid))
            found = group.changes({child.pid: "itself"})
        assert len(found) == 1 and found[0].startswith(f"moved itself out of its cgroup (pid {child.pid} was in "), (
            f"expected Cgroup.changes() to say the process moved out of its cgroup, got {found}")
    finally:
        if child is not None:
            child.kill()
            child.wait(5)


@linux_only
def test_a_cgroup_made_inside_is_reported_and_removed_with_its_processes(real):
    """a cgroup made inside loopkata's, two levels deep with a process in it, is reported, and removed with it at the end"""
    needs(containers.CPU_LIMIT)
    with containers.Cgroup(cpus=0.5) as group:
        child = started_in(group, ["sleep", "60"])
        deeper = group.dirs["cpu"] / "made" / "deeper"
        try:
            deeper.mkdir(parents=True)  # what a learner's code as root can do
            (deeper / "cgroup.procs").write_text(str(child.pid))
            found = group.changes({child.pid: "itself"})
        except BaseException:
            child.kill()
            raise
    made = f"cpu/{group.paths['cpu'].lstrip('/')}/made"
    assert found == [f"made a cgroup of its own inside its container ({made}, and 1 more inside that one)"], (
        f"expected Cgroup.changes() to report the cgroup made inside (and not the process in it as moved out), got {found}")
    assert child.wait(5) == -signal.SIGKILL, "expected the process in the cgroup made inside to be killed at the end"
    assert not deeper.parent.parent.exists(), f"expected {deeper.parent.parent} to be removed at the end, with all inside it"


@linux_only
def test_a_cgroup_left_with_cgroups_inside_it_is_swept_with_them(real):
    """a cgroup whose maker died, with a cgroup made inside it, is removed with it by the next Cgroup made"""
    needs(containers.CPU_LIMIT)
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = containers._parent("cpu") / f"loopkata-{dead.pid}-stale"
    (stale / "made").mkdir(parents=True)
    try:
        with containers.Cgroup(cpus=0.5):
            assert not stale.exists(), f"expected {stale} (its maker dead) to be removed, with the cgroup inside it"
    finally:
        for d in (stale / "made", stale):
            if d.exists():
                d.rmdir()


def descendants(pid: int) -> set[int]:
    """`pid` and every process under it now."""
    children: dict[int, list[int]] = {}
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            parent = int(Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(name))
    found, todo = set(), [pid]
    while todo:
        found.add(todo[-1])
        todo += [c for c in children.get(todo.pop(), []) if c not in found]
    return found


@linux_only
def test_a_memory_guard_check_killed_with_sigkill_leaves_nothing_once_the_next_check_has_run(real, tmp_path):
    """a kata-16 check killed with SIGKILL leaves no cgroup and no temporary folder once the next check, of any kata, has run"""
    needs(containers.MEMORY_LIMIT)
    temp = tmp_path / "tmp"  # the checks' temporary folder: nobody else's is looked at
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp), "LOOPKATA_STATE": str(tmp_path / "state")}
    env.pop(containers.FORCE, None)
    parent = containers._parent("memory")
    cli = subprocess.Popen([sys.executable, "-m", "loopkata", "check", "memory-guard", "--impl",
                            str(ROOT / "solutions" / "16_memory_guard")], cwd=ROOT, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    made, tree = [], set()
    try:
        until = time.monotonic() + 120
        while not made and time.monotonic() < until and cli.poll() is None:
            tree |= descendants(cli.pid)
            for group in parent.glob("loopkata-*"):
                maker = int(group.name.split("-")[1]) if group.name.split("-")[1].isdigit() else 0
                if maker in tree:
                    os.kill(maker, signal.SIGSTOP)  # it cannot remove its cgroup now: the kill below finds it there
                    if group.exists():
                        made.append(group)
                    else:
                        os.kill(maker, signal.SIGCONT)
            time.sleep(0.01)
        assert made, f"expected the kata-16 check to make a memory cgroup in {parent} within 120 s; it made none"
        folders = [p.name for p in temp.iterdir()]
        os.killpg(cli.pid, signal.SIGKILL)
        cli.wait(10)
        until = time.monotonic() + 30  # the check's supervisor ends everything under it
        while any(Path(f"/proc/{pid}").exists() for pid in tree - {cli.pid}) and time.monotonic() < until:
            time.sleep(0.05)
        left_at_once = [p.name for p in temp.iterdir()]
        done = subprocess.run([sys.executable, "-m", "loopkata", "check", "bound-semaphore", "--impl",
                               str(ROOT / "solutions" / "01_bound_semaphore.py")], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, f"expected the next check (kata 01, its reference fix) to pass:\n{done.stdout}{done.stderr}"
        cgroups_left = [str(g) for g in made if g.exists()]
        folders_left = [p.name for p in temp.iterdir()]
        assert not cgroups_left and not folders_left, (
            f"expected the killed check's cgroup and temporary folder ({folders}) to be gone once the next check had "
            f"run, but {cgroups_left or 'no cgroup'} and {folders_left or 'no folder'} were left")
        assert not left_at_once, (
            f"expected the killed check's supervisor to remove its temporary folder as it ended, but {left_at_once} "
            "stayed until the next check")
    finally:
        if cli.poll() is None:  # its supervisor then kills everything under it, the stopped maker too
            os.killpg(cli.pid, signal.SIGKILL)
            cli.wait(10)
        for group in made:  # their makers are dead: what the sweep does
            if group.exists():
                containers._remove_tree(group)


def test_in_the_regrade_sandbox_the_cgroups_are_said_to_be_hidden(monkeypatch, tmp_path):
    """in the re-grade's sandbox, which hides /sys/fs/cgroup, katas 15 and 16 say the sandbox hides it and what a claim is checked against there"""
    monkeypatch.delenv(containers.FORCE, raising=False)
    monkeypatch.setattr(containers, "CGROUP_FS", tmp_path / "hidden")  # as the sandbox shows it: not there
    monkeypatch.setattr(sys, "platform", "linux")
    containers._cgroup_refused.cache_clear()
    try:
        monkeypatch.delenv(containers.SANDBOXED, raising=False)
        assert containers.missing(containers.MEMORY_LIMIT) == "This machine has no cgroup file system at /sys/fs/cgroup."
        monkeypatch.setenv(containers.SANDBOXED, "1")
        for mechanism, limit in ((containers.CPU_LIMIT, "a CPU quota"), (containers.MEMORY_LIMIT, "a memory limit")):
            why = containers.missing(mechanism)
            assert why.startswith("The re-grade's sandbox hides this machine's cgroups (/sys/fs/cgroup), so no cgroup "
                                  f"with {limit} can be made in it: "), (
                f"expected the reason {mechanism} is missing in the sandbox to name the sandbox, got {why!r}")
            assert "no cgroup file system" not in why and "never confirm" in why, why
        said = str(containers.not_here(containers.MEMORY_LIMIT, "the OOM test"))
        assert "The re-grade's sandbox hides this machine's cgroups" in said and "could not run here" in said, said
    finally:
        containers._cgroup_refused.cache_clear()


def test_could_not_run_here_is_never_solved():
    kata = next(k for k in catalogue.load() if k.mechanisms)
    result = runner.CheckResult(kata=kata.id, impl="x", verdict=runner.NOT_HERE, tests=[
        runner.TestResult(name="a", title="a", outcome=runner.PASSED),
        runner.TestResult(name="b", title="b", outcome=runner.COULD_NOT_RUN)])
    assert not result.passed
    assert headline(result, kata) == f"{kata.label}: could not run here, 1 of 2 tests pass and 1 needs what this machine does not give"


def test_a_machine_too_busy_to_judge_gives_no_verdict_and_no_error():
    from loopkata.grading.pytest_plugin import _describe
    from loopkata.testing import TooBusy

    said = "This machine is too busy to judge this test: in each of 3 runs, worker B was late."
    try:
        raise TooBusy(said)
    except TooBusy:
        described = _describe(pytest.ExceptionInfo.from_current())
    assert described == {"outcome": runner.COULD_NOT_RUN, "message": said}, (
        f"expected a test the machine was too busy to judge to say 'could not run' with its sentence, got {described}")
