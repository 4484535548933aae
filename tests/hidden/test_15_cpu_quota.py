"""Hidden tests for kata 15, cpu-quota.

`effective_cpus(root)` is read in fresh processes (cpu_quota_harness.run_cases)
on folders laid out as the kernel lays out / (cgroup v1, with the v2 line of a
hybrid machine, and cgroup v2): the process's affinity is the kernel's, set to
one CPU first where a test says so, and PYTHON_CPU_COUNT is in the process's
environment from its start, as Python 3.13 reads it. What is expected is
computed from the same facts: the smallest of the affinity, the quota rounded
up and PYTHON_CPU_COUNT, at least 1. The executor is judged by what it does:
the threads it starts for forty blocking jobs sent at once.

The monitor is judged twice. On a folder whose cpu.stat the test rewrites
while `watch()` runs, on the same event loop: each step holds the loop as a
throttled period stops the process, then counts the period, throttled or
not. And for real, where the kernel allows it (services.containers): the
package's start-up and `watch()` run in a cgroup with a CPU quota of 0.5
while a thread keeps the CPU busy, and in one whose quota the machine can
never reach, with the same thread. The verdict comes from the cgroup's own
nr_throttled, read just before and just after the watch, and from the words
of the report's cause, never from how long anything took. Without the
mechanism, the same run is made on the fallback (the process stopped half of
every 0.1 s with SIGSTOP), and the test then says it could not run here.
"""
import asyncio
import importlib
import math
import os
import re
import time
from pathlib import Path

import pytest
from cpu_quota_harness import PERIOD_US, ChildFailed, Live, favour, run_cases, v1_tree, v2_tree, write_cpu_stat

from loopkata.services import containers
from loopkata.testing import Hang, hang_after, run_bounded

AFFINITY = len(os.sched_getaffinity(0))  # the CPUs a child of this process may use, unless a test sets fewer
ONE_CPU = min(os.sched_getaffinity(0))  # the CPU a test pins a child to
NAMES_THROTTLING = re.compile(r"throttl", re.IGNORECASE)
WINDOW = 0.3  # seconds watch() runs on a folder
HELD = 0.06  # seconds each step of the folder's "kernel" holds the loop, as a throttled period stops the process
LIVE_WINDOW = 0.5  # seconds watch() runs in a real cgroup
QUOTA = 0.5  # CPUs of the throttled run's quota
ROOMY = 4 * max(os.cpu_count() or 1, 1)  # CPUs of the other run's quota: more than the machine has, never used up


def cases(kata, *cases, python_cpu_count=None):
    try:
        return run_cases(kata, list(cases), python_cpu_count, max(hang_after(), 10.0))
    except ChildFailed as exc:
        if exc.hang:
            raise Hang("effective_cpus() in a fresh process", hang_after(), exc.stacks, True) from None
        raise AssertionError(f"effective_cpus() in a fresh process: {exc}") from None


def expected(affinity: int, quota: float | None = None, python_cpu_count: int | None = None) -> int:
    limits = [affinity] + ([math.ceil(quota)] if quota else []) + ([python_cpu_count] if python_cpu_count else [])
    return max(1, min(limits))


def said(result: dict) -> str:
    if "error" in result:
        where = "".join(f"\n    {line}" for line in result.get("lines", []))
        return f"it raised {result['error']}{where}"
    return f"it returned {result['cpus']!r}"


def affinity_words(result: dict) -> str:
    n = result.get("affinity", AFFINITY)
    return f"the process's affinity allows {n} CPU{'s' if n != 1 else ''}"


def require(result: dict, want: int, machine: str) -> None:
    assert "error" not in result and result.get("cpus") == want, (
        f"expected effective_cpus() to return {want} on {machine} ({affinity_words(result)}), but {said(result)}")


def test_a_quota_below_the_machine_sets_the_cpus(kata, tmp_path):
    """a cgroup quota of 1 CPU, on cgroup v1 and on v2, makes effective_cpus() 1"""
    v1_tree(tmp_path / "v1", 100_000)
    v2_tree(tmp_path / "v2", "100000 100000")
    r1, r2 = cases(kata, {"root": str(tmp_path / "v1")}, {"root": str(tmp_path / "v2")})
    require(r1, expected(r1["affinity"], 1), "cgroup v1 with a quota of 1 CPU (cpu.cfs_quota_us 100000, "
            "cpu.cfs_period_us 100000, in the cpu controller's cgroup that /proc/self/cgroup names)")
    require(r2, expected(r2["affinity"], 1), "cgroup v2 with a quota of 1 CPU (cpu.max '100000 100000', in the "
            "cgroup that /proc/self/cgroup's line 0:: names)")


def test_a_fractional_quota_is_rounded_up(kata, tmp_path):
    """half a CPU counts as 1, and one and a half as 2: a quota is rounded up, never down to nothing"""
    v2_tree(tmp_path / "half", "50000 100000")
    v1_tree(tmp_path / "one-and-a-half", 150_000)
    half, more = cases(kata, {"root": str(tmp_path / "half")}, {"root": str(tmp_path / "one-and-a-half")})
    require(half, expected(half["affinity"], 0.5), "cgroup v2 with a quota of 0.5 CPU (cpu.max '50000 100000'), "
            "which is rounded up")
    require(more, expected(more["affinity"], 1.5), "cgroup v1 with a quota of 1.5 CPUs (cpu.cfs_quota_us 150000 per "
            "100000), which is rounded up")


def test_no_quota_leaves_the_affinity(kata, tmp_path):
    """a cgroup without a quota ('max' on v2, -1 on v1) leaves every CPU of the affinity"""
    v1_tree(tmp_path / "v1", -1)
    v2_tree(tmp_path / "v2", f"max {PERIOD_US}")
    r1, r2 = cases(kata, {"root": str(tmp_path / "v1")}, {"root": str(tmp_path / "v2")})
    require(r1, expected(r1["affinity"]), "cgroup v1 with no quota (cpu.cfs_quota_us -1)")
    require(r2, expected(r2["affinity"]), "cgroup v2 with no quota (cpu.max 'max 100000')")


def test_an_affinity_narrower_than_the_quota_wins(kata, tmp_path):
    """a process pinned to one CPU gets 1, however large its quota"""
    v1_tree(tmp_path / "v1", 400_000)
    v2_tree(tmp_path / "v2", "400000 100000")
    r1, r2 = cases(kata, {"root": str(tmp_path / "v1"), "affinity": ONE_CPU},
                   {"root": str(tmp_path / "v2"), "affinity": ONE_CPU})
    require(r1, 1, "cgroup v1 with a quota of 4 CPUs, the process pinned to CPU "
            f"{ONE_CPU} with os.sched_setaffinity")
    require(r2, 1, "cgroup v2 with a quota of 4 CPUs, the process pinned to CPU "
            f"{ONE_CPU} with os.sched_setaffinity")


def test_python_cpu_count_is_honoured(kata, tmp_path):
    """PYTHON_CPU_COUNT=1 makes effective_cpus() 1, as it makes Python 3.13's own counts"""
    v2_tree(tmp_path / "v2", f"max {PERIOD_US}")
    v1_tree(tmp_path / "v1", 400_000)
    r2, r1 = cases(kata, {"root": str(tmp_path / "v2")}, {"root": str(tmp_path / "v1")}, python_cpu_count="1")
    require(r2, 1, "cgroup v2 with no quota and PYTHON_CPU_COUNT=1 in the environment")
    require(r1, 1, "cgroup v1 with a quota of 4 CPUs and PYTHON_CPU_COUNT=1 in the environment")


def test_unreadable_cgroup_files_leave_the_affinity(kata, tmp_path):
    """a cgroup file that is missing or malformed leaves the affinity, and never raises"""
    trees = []
    own = v2_tree(tmp_path / "garbled", "50000 100000")
    (own / "cpu.max").write_text("a quota of fifty thousand\n")
    trees.append((tmp_path / "garbled", "cgroup v2 whose cpu.max reads 'a quota of fifty thousand'"))
    own = v1_tree(tmp_path / "empty", 50_000)
    (own / "cpu.cfs_quota_us").write_text("")
    trees.append((tmp_path / "empty", "cgroup v1 whose cpu.cfs_quota_us is empty"))
    own = v1_tree(tmp_path / "no-period", 50_000)
    (own / "cpu.cfs_period_us").unlink()
    trees.append((tmp_path / "no-period", "cgroup v1 whose cpu.cfs_period_us is missing"))
    own = v2_tree(tmp_path / "no-cpu-max", "50000 100000")
    (own / "cpu.max").unlink()
    trees.append((tmp_path / "no-cpu-max", "cgroup v2 whose cgroup has no cpu.max (the cpu controller not enabled)"))
    v2_tree(tmp_path / "no-proc", "50000 100000")
    (tmp_path / "no-proc" / "proc/self/cgroup").unlink()
    trees.append((tmp_path / "no-proc", "a machine with no /proc/self/cgroup"))
    (tmp_path / "nothing").mkdir()
    trees.append((tmp_path / "nothing", "a machine with neither /proc/self/cgroup nor /sys/fs/cgroup"))
    results = cases(kata, *({"root": str(root)} for root, _ in trees))
    for (_, machine), result in zip(trees, results):
        require(result, expected(result["affinity"]), machine)


def test_the_executor_and_the_workers_follow_the_cpus(kata, tmp_path):
    """the default executor that install() gives a loop starts min(32, CPUs + 4) threads, and there is one worker per CPU"""
    v2_tree(tmp_path / "v2", "50000 100000")
    (result,) = cases(kata, {"root": str(tmp_path / "v2"), "executor": True})
    cpus = expected(result["affinity"], 0.5)
    how = f"on cgroup v2 with a quota of 0.5 CPU ({affinity_words(result)}), that is {cpus} CPU"
    assert "error" not in result, f"expected sizing() and install() to work {how}, but {said(result)}"
    want = min(32, cpus + 4)
    assert result["threads"] == want, (
        f"expected the default executor that install(loop) gives the loop to start {want} threads (min(32, CPUs + 4)) "
        f"for 40 blocking jobs sent at once, {how}, but it started {result['threads']}")
    assert result["workers"] == cpus, (
        f"expected sizing().workers to be {cpus}, one worker per CPU, {how}, but it was {result['workers']!r}")


# --- the monitor -------------------------------------------------------------------------------

def watch_beside_a_kernel(kata, root: Path, cgroup: Path, version: int, throttle: bool):
    """watch(WINDOW, root) on a loop where a task plays the kernel: each step holds the loop HELD seconds, then
    counts one period in the cgroup's cpu.stat, as throttled when `throttle`; it runs until watch() returns."""
    lagmon = importlib.import_module(f"{kata.__name__}.lagmon")

    async def kernel() -> None:
        periods = 0
        while True:
            time.sleep(HELD)  # the whole process stopped: every thread, the event loop's too
            periods += 1
            write_cpu_stat(cgroup, version, periods, periods if throttle else 0,
                           periods * int(HELD * 1e6) if throttle else 0)
            await asyncio.sleep(0.1 - HELD)

    async def scenario():
        stepping = asyncio.create_task(kernel())
        try:
            return await lagmon.watch(WINDOW, root=root)
        finally:
            stepping.cancel()

    return run_bounded(asyncio.run, scenario(), what=f"watch({WINDOW}, root=...)", seconds=max(hang_after(), 10.0))


def cause_of(report) -> str:
    cause = getattr(report, "cause", None)
    assert isinstance(cause, str) and cause.strip(), (
        f"expected watch() to return a report whose cause is a few words, but the cause was {cause!r} "
        f"(the report: {report})")
    return cause


def test_the_report_does_not_blame_throttling_for_a_held_loop(kata, tmp_path):
    """when the loop is held but nr_throttled does not grow, the report does not blame throttling"""
    cgroup = v2_tree(tmp_path, "400000 100000")
    report = watch_beside_a_kernel(kata, tmp_path, cgroup, 2, throttle=False)
    cause = cause_of(report)
    assert not NAMES_THROTTLING.search(cause), (
        f"expected the report's cause not to name throttling: the loop was held {HELD * 1000:.0f} ms every 0.1 s by "
        f"code on the loop, while its cgroup's cpu.stat counted periods (nr_periods grew) but no throttled one "
        f"(nr_throttled stayed 0), but the cause was {cause!r} (the report: {report})")


@pytest.mark.parametrize("version", [1, 2])
def test_the_report_names_throttling_when_nr_throttled_grew(kata, tmp_path, version):
    """the report names CPU throttling as the cause when its own cgroup's nr_throttled grew while it watched"""
    build = v1_tree if version == 1 else v2_tree
    cgroup = build(tmp_path, 50_000) if version == 1 else build(tmp_path, "50000 100000")
    report = watch_beside_a_kernel(kata, tmp_path, cgroup, version, throttle=True)
    cause = cause_of(report)
    assert NAMES_THROTTLING.search(cause), (
        f"expected the report's cause to name CPU throttling: on cgroup v{version}, the cpu.stat of the process's own "
        f"cgroup (the one /proc/self/cgroup names; the root cgroup's never moved) counted a throttled period every "
        f"0.1 s while watch() ran, and each held the loop {HELD * 1000:.0f} ms, but the cause was {cause!r} "
        f"(the report: {report})")


# --- for real ----------------------------------------------------------------------------------

def live_results(runs: list[Live]) -> list[dict]:
    out = []
    for run in runs:
        try:
            out.append(run.result())
        except ChildFailed as exc:
            if exc.hang:
                raise Hang("the service's start-up and watch() in a cgroup", hang_after(), exc.stacks, True) from None
            raise AssertionError(f"the service's start-up and watch() in a cgroup: {exc}") from None
    return out


def grew(result: dict, counter: str) -> int:
    return result.get("after", {}).get(counter, 0) - result.get("before", {}).get(counter, 0)


def check_report(result: dict, how: str) -> str:
    for step in ("startup", "watch"):
        if step in result:
            lines = "".join(f"\n    {line}" for line in result[step].get("lines", []))
            raise AssertionError(f"expected the service's {'start-up' if step == 'startup' else 'watch()'} to work "
                                 f"{how}, but it raised {result[step]['error']}{lines}")
    cause = result.get("cause")
    assert isinstance(cause, str) and cause.strip(), (
        f"expected watch() to return a report whose cause is a few words {how}, but the cause was {cause!r} "
        f"(the report: {result.get('report')})")
    return cause


def fallback_run(kata) -> None:
    """The same run on the fallback: the process stopped for half of every 0.1 s by SIGSTOP, no cgroup."""
    deadline = max(hang_after(), 10.0)
    run = Live(kata, LIVE_WINDOW, deadline)
    try:
        with containers.duty_cycle(run.pid, QUOTA):
            (result,) = live_results([run])
    finally:
        run.close()
    check_report(result, f"in a process stopped {(1 - QUOTA) * 100:.0f}% of every 0.1 s (SIGSTOP, the fallback "
                         "for a CPU quota) while another thread kept the CPU busy")


def test_under_a_real_cpu_quota_the_report_names_throttling(kata):
    """in a real cgroup with a CPU quota of 0.5 the service sizes for 1 CPU and its report names throttling; with a quota it never reaches, it does not"""
    if containers.missing(containers.CPU_LIMIT):
        fallback_run(kata)
        raise containers.not_here(containers.CPU_LIMIT, "the throttling test")
    deadline = max(hang_after(), 10.0)
    for attempt in range(3):  # a run whose window saw no throttled period proves nothing: the machine was too busy
        with containers.Cgroup(cpus=QUOTA) as limited, containers.Cgroup(cpus=ROOMY) as roomy:
            favour(limited)  # on a busy machine it still gets the CPU time to use its quota up
            runs = [Live(kata, LIVE_WINDOW * (attempt + 1), deadline, limited),
                    Live(kata, LIVE_WINDOW, deadline, roomy)]
            try:
                quota_run, roomy_run = live_results(runs)
            finally:
                for run in runs:
                    run.close()
            roomy_stats = roomy.stats()
        if grew(quota_run, "nr_throttled") > 0:
            break
    else:
        raise AssertionError("the test could not make its cgroup throttle: with a quota of 0.5 CPU and a busy "
                             f"thread, nr_throttled stayed {quota_run.get('after', {}).get('nr_throttled')} in 3 runs")

    files = (f"cpu.max '{int(QUOTA * PERIOD_US)} {PERIOD_US}'" if limited.version == 2
             else f"cpu.cfs_quota_us {int(QUOTA * PERIOD_US)} per {PERIOD_US}")
    quota_how = f"in a cgroup with a CPU quota of {QUOTA} ({files}, a real cgroup) while another thread kept the CPU busy"
    cause = check_report(quota_run, quota_how)
    assert NAMES_THROTTLING.search(cause), (
        f"expected the report's cause to name CPU throttling: {quota_how}, the cgroup's own cpu.stat counted "
        f"{grew(quota_run, 'nr_throttled')} throttled periods of {grew(quota_run, 'nr_periods')} while watch() ran, "
        f"but the cause was {cause!r} (the report: {quota_run.get('report')})")

    want = expected(quota_run["affinity"], QUOTA)
    assert quota_run.get("cpus") == want, (
        f"expected effective_cpus() to return {want} {quota_how} ({affinity_words(quota_run)}; os.cpu_count() says "
        f"{os.cpu_count()}), but it returned {quota_run.get('cpus')!r}")
    assert quota_run.get("threads") == min(32, want + 4), (
        f"expected the default executor that install(loop) gives the loop to start {min(32, want + 4)} threads "
        f"(min(32, CPUs + 4)) {quota_how}, but it started {quota_run.get('threads')}")

    roomy_how = (f"in a cgroup whose CPU quota ({ROOMY} CPUs) is more than the machine has, while another thread "
                 "kept the CPU busy")
    cause = check_report(roomy_run, roomy_how)
    assert roomy_stats.get("nr_throttled", 0) == 0 and grew(roomy_run, "nr_throttled") == 0, (
        f"the cgroup {roomy_how} was throttled ({roomy_stats}); the test cannot judge this run")
    assert not NAMES_THROTTLING.search(cause), (
        f"expected the report's cause not to name throttling: {roomy_how}, the cgroup's own cpu.stat counted "
        f"{grew(roomy_run, 'nr_periods')} periods and no throttled one while watch() ran (the lag came from the busy "
        f"thread holding the GIL), but the cause was {cause!r} (the report: {roomy_run.get('report')})")
