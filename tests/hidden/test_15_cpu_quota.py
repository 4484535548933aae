"""Hidden tests for kata 15, cpu-quota.

`effective_cpus(root)` is read in fresh processes (cpu_quota_harness.run_cases)
on folders laid out as the kernel lays out / (cgroup v1 on a hybrid machine,
its cpu controller mounted three ways, and cgroup v2): the process's affinity
is the kernel's, set to fewer CPUs first where a test says so, and
PYTHON_CPU_COUNT is in the process's environment from its start, as Python
3.13 reads it (or, for a value Python 3.13 would refuse to start with, set in
os.environ for that one call). What is expected is computed from the same
facts: the smallest of the affinity, the quota rounded up and
PYTHON_CPU_COUNT, at least 1. A message about a wrong count says which files
the code opened. The executor is judged by what it does: the threads it
starts for forty blocking jobs sent at once, at 1 CPU and at 2.

The monitor is judged twice. On a folder whose cpu.stat the test rewrites
while `watch()` runs, on the same event loop: each step holds the loop as a
throttled period stops the process, then counts the period, throttled or
not, from counters that were not 0 when the watch began. And for real, where
the kernel allows it (services.containers): the package's start-up and
`watch()` run in a cgroup with a CPU quota of 0.5 while a thread keeps the
CPU busy, and in one whose quota the machine can never reach, with the same
thread. The verdict comes from the cgroup's own nr_throttled, read just
before and just after the watch, and from the words of the report's cause,
never from how long anything took. Without the mechanism, the same run is
made on the fallback (the process stopped half of every 0.1 s with SIGSTOP,
which no cgroup counter sees): it may fail a report that blames throttling
or a start-up that sizes for more CPUs than the process may use, and the
test then says it could not run here.
"""
import asyncio
import importlib
import math
import os
import re
import time
from pathlib import Path

from cpu_quota_harness import (
    PERIOD_US,
    V1_PATH,
    V2_PATH,
    ChildFailed,
    Live,
    favour,
    own_cpu_cgroup,
    run_cases,
    v1_tree,
    v2_tree,
    write_cpu_stat,
)

from loopkata.services import containers
from loopkata.testing import (
    NO_HYPOTHESIS,
    Hang,
    VirtualClockLoop,
    hang_after,
    property_seed,
    replay_words,
    run_bounded,
)

AFFINITY = len(os.sched_getaffinity(0))  # the CPUs a child of this process may use, unless a test sets fewer
ONE_CPU = min(os.sched_getaffinity(0))  # the CPU a test pins a child to
NAMES_THROTTLING = re.compile(r"throttl", re.IGNORECASE)
WINDOW = 0.3  # seconds watch() runs on a folder
HELD = 0.06  # seconds each step of the folder's "kernel" holds the loop, as a throttled period stops the process
EARLIER = 7  # throttled periods the folder's cgroup counted before watch() began
ROOMY_BUDGET = 10.0  # seconds: the LAG_BUDGET of a test in which the loop keeps to its budget whatever the machine
LIVE_WINDOW = 0.5  # seconds watch() runs in a real cgroup
QUOTA = 0.5  # CPUs of the throttled run's quota
ROOMY = 4 * max(os.cpu_count() or 1, 1)  # CPUs of the other run's quota: more than the machine has, never used up
HYBRID = ("a hybrid machine, whose /proc/self/cgroup also has cgroup v2's line 0::/ while the cpu controller is "
          "on v1")
UNDER_ROOT = ("every file is read under root, and the cgroup's path from /proc/self/cgroup, which starts with '/', "
              "must be joined under root (pathlib drops whatever comes before an absolute path)")


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


def what_it_read(result: dict) -> str:
    """The files the code opened, for a message about a wrong count (not about an error: its lines say more)."""
    read = result.get("read")
    if read is None or "error" in result:
        return ""
    if not read:
        return "; it opened no file"
    named = [f"{r['path']}{' (missing)' if r['missing'] else ''}" for r in read]
    inside = [name for name, r in zip(named, read) if r["inside"]]
    outside = [name for name, r in zip(named, read) if not r["inside"]]
    text = f"; it read {', '.join(inside)}" if inside else "; it read"
    if outside:
        text += f"{' and,' if inside else ''} outside the root folder the test passed, {', '.join(outside)}: {UNDER_ROOT}"
    return text


def affinity_words(result: dict) -> str:
    n = result.get("affinity", AFFINITY)
    return f"the process's affinity allows {n} CPU{'s' if n != 1 else ''}"


def require(result: dict, want: int, machine: str) -> None:
    assert "error" not in result and result.get("cpus") == want, (
        f"expected effective_cpus() to return {want} on {machine} ({affinity_words(result)}), but {said(result)}"
        f"{what_it_read(result)}")


def v1_words(quota: str, layout: str = "together") -> str:
    """How a v1 tree of `layout` holds `quota`, in the words of a message."""
    line, how, before = {
        "together": ("4:cpu,cpuacct:", ("cpu and cpuacct mounted together as sys/fs/cgroup/cpu,cpuacct, and "
                                         "a link of each name"),
                     "the line 9:cpuset:/ comes first, and names another cgroup"),
        "apart": ("1:cpu:", "cpu, cpuacct and cpuset mounted apart, each a hierarchy of its own",
                  "the lines 3:cpuset:/ and 2:cpuacct:/elsewhere come first, and name other cgroups"),
        "one-mount": ("4:cpu,cpuacct:", ("cpu and cpuacct mounted together at sys/fs/cgroup/cpu and nowhere "
                                          "else (no cpu,cpuacct folder), as libcgroup's cgconfig mounts them"),
                      "the line 9:cpuset:/ comes first, and names another cgroup"),
    }[layout]
    return (f"{quota}, in the cpu controller's cgroup: its line {line}{V1_PATH}, joined under "
            f"root/sys/fs/cgroup/cpu; on {HYBRID}; with {how}; {before}, with no quota")


V2_WORDS = f"in the cgroup that /proc/self/cgroup's line 0::{V2_PATH} names, under root/sys/fs/cgroup"


def test_a_quota_below_the_machine_sets_the_cpus(kata, tmp_path):
    """a cgroup quota of 1 CPU, on cgroup v1 (however its controllers are mounted) and on v2, makes effective_cpus() 1"""
    for layout in ("together", "apart", "one-mount"):
        v1_tree(tmp_path / layout, 100_000, layout=layout)
    v2_tree(tmp_path / "v2", "100000 100000")
    r1, apart, one_mount, r2 = cases(kata, *({"root": str(tmp_path / name)}
                                             for name in ("together", "apart", "one-mount", "v2")))
    quota = "cpu.cfs_quota_us 100000, cpu.cfs_period_us 100000"
    require(r1, expected(r1["affinity"], 1), f"cgroup v1 with a quota of 1 CPU ({v1_words(quota)})")
    require(r2, expected(r2["affinity"], 1), f"cgroup v2 with a quota of 1 CPU (cpu.max '100000 100000', {V2_WORDS})")
    require(apart, expected(apart["affinity"], 1), f"cgroup v1 with a quota of 1 CPU ({v1_words(quota, 'apart')})")
    require(one_mount, expected(one_mount["affinity"], 1),
            f"cgroup v1 with a quota of 1 CPU ({v1_words(quota, 'one-mount')})")


def test_a_fractional_quota_is_rounded_up(kata, tmp_path):
    """a part of a CPU counts as a whole one: 0.5 CPU is 1, 1.2 and 1.5 are 2, 2.5 is 3 (as far as the affinity allows)"""
    quotas = [("v2", 50_000), ("v2", 120_000), ("v1", 150_000), ("v1", 250_000)]
    for version, quota_us in quotas:
        if version == "v1":
            v1_tree(tmp_path / str(quota_us), quota_us)
        else:
            v2_tree(tmp_path / str(quota_us), f"{quota_us} {PERIOD_US}")
    results = cases(kata, *({"root": str(tmp_path / str(quota_us))} for _, quota_us in quotas))
    for (version, quota_us), result in zip(quotas, results):
        quota = quota_us / PERIOD_US
        files = (f"cpu.max '{quota_us} {PERIOD_US}'" if version == "v2"
                 else f"cpu.cfs_quota_us {quota_us} per {PERIOD_US}")
        require(result, expected(result["affinity"], quota),
                f"cgroup {version} with a quota of {quota:g} CPU{'s' if quota > 1 else ''} ({files}), which is rounded "
                f"up to {math.ceil(quota)}")


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


def test_python_cpu_count_is_one_limit_among_the_others(kata, tmp_path):
    """PYTHON_CPU_COUNT=8 does not lift a quota of 1 CPU, and a value that is not a number ('default', a word) is ignored"""
    v2_tree(tmp_path / "one-cpu", "100000 100000")
    v2_tree(tmp_path / "one-cpu-too", "100000 100000")
    v2_tree(tmp_path / "no-quota", f"max {PERIOD_US}")
    eight, default, word = cases(
        kata, {"root": str(tmp_path / "one-cpu"), "environ": {"PYTHON_CPU_COUNT": "8"}},
        {"root": str(tmp_path / "one-cpu-too"), "environ": {"PYTHON_CPU_COUNT": "default"}},
        {"root": str(tmp_path / "no-quota"), "environ": {"PYTHON_CPU_COUNT": "two"}})
    require(eight, expected(eight["affinity"], 1, 8), "cgroup v2, with PYTHON_CPU_COUNT=8 in the environment and a "
            "quota of 1 CPU (cpu.max '100000 100000'): the smallest limit wins, and the kernel stops the process at its "
            "quota whatever PYTHON_CPU_COUNT says")
    require(default, expected(default["affinity"], 1), "cgroup v2, with PYTHON_CPU_COUNT=default in the environment "
            "(Python 3.13's word for 'count as usual': no number, so no limit) and a quota of 1 CPU "
            "(cpu.max '100000 100000')")
    require(word, expected(word["affinity"]), "cgroup v2, with PYTHON_CPU_COUNT=two in the environment (not a number: "
            "Python 3.11 and 3.12 ignore it, and the service must start) and no quota (cpu.max 'max 100000')")


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


def test_a_cgroup_named_in_bytes_that_are_not_utf8_is_no_crash(kata, tmp_path):
    """a cgroup whose name is not UTF-8 text (the kernel allows any byte but / and a newline) never makes effective_cpus() raise"""
    name = b"/user.slice/session-\xff\xfe.scope"  # as the kernel writes it: the bytes of the name, as they are
    v1_tree(tmp_path / "v1", 100_000)
    cgroup = tmp_path / "v1/proc/self/cgroup"
    cgroup.write_bytes(cgroup.read_bytes().replace(b"12:memory:" + V1_PATH.encode(), b"12:memory:" + name))
    v2_tree(tmp_path / "v2", "100000 100000")
    (tmp_path / "v2/proc/self/cgroup").write_bytes(b"0::" + name + b"\n")
    own = Path(os.fsdecode(bytes(tmp_path / "v2/sys/fs/cgroup") + name))
    own.mkdir(parents=True)
    (own / "cpu.max").write_text("100000 100000\n")
    write_cpu_stat(own, 2)
    trees = [(tmp_path / "v1", f"cgroup v1 with a quota of 1 CPU, whose /proc/self/cgroup names {name!r} on its memory "
                               f"line ({v1_words('cpu.cfs_quota_us 100000, cpu.cfs_period_us 100000')})"),
             (tmp_path / "v2", f"cgroup v2 whose /proc/self/cgroup says 0::{name!r}, and whose cgroup of that name "
                               f"has cpu.max '100000 100000'")]
    results = cases(kata, *({"root": str(root)} for root, _ in trees))
    for (_, machine), result in zip(trees, results):
        quota, none = expected(result["affinity"], 1), expected(result["affinity"])
        assert "error" not in result and result.get("cpus") in (quota, none), (
            f"expected effective_cpus() to return {quota}, or {none} if it cannot read the cgroup's name, on {machine} "
            f"({affinity_words(result)}), but {said(result)}: a file that is not UTF-8 text is a file it cannot read, "
            f"never a reason for the service not to start{what_it_read(result)}")


def test_the_executor_and_the_workers_follow_the_cpus(kata, tmp_path):
    """the default executor that install() gives a loop starts min(32, CPUs + 4) threads, at 1 CPU and at 2, and there is one worker per CPU"""
    v2_tree(tmp_path / "v2", "50000 100000")
    v1_tree(tmp_path / "v1", 200_000)
    runs = [("v2", 0.5, "cgroup v2 with a quota of 0.5 CPU"), ("v1", 2, "cgroup v1 with a quota of 2 CPUs")]
    results = cases(kata, *({"root": str(tmp_path / name), "executor": True} for name, _, _ in runs))
    for (_, quota, machine), result in zip(runs, results):
        cpus = expected(result["affinity"], quota)
        how = f"on {machine} ({affinity_words(result)}), that is {cpus} CPU{'s' if cpus != 1 else ''}"
        assert "error" not in result, f"expected sizing() and install() to work {how}, but {said(result)}"
        want = min(32, cpus + 4)
        assert result["threads"] == want, (
            f"expected the default executor that install(loop) gives the loop to start {want} threads (min(32, CPUs + 4)) "
            f"for 40 blocking jobs sent at once, {how}, but it started {result['threads']}")
        assert result["workers"] == cpus, (
            f"expected sizing().workers to be {cpus}, one worker per CPU, {how}, but it was {result['workers']!r}")


# --- the monitor -------------------------------------------------------------------------------

def watch_beside_a_kernel(kata, root: Path, cgroup: Path, version: int, throttle: bool, held: float = HELD,
                          budget: float | None = None):
    """watch(WINDOW, root) on a loop where a task plays the kernel: each step holds the loop `held` seconds, then
    counts one period in the cgroup's cpu.stat, as throttled when `throttle`; it runs until watch() returns. The
    counters start where a cgroup that ran before leaves them: EARLIER throttled periods of 120. With `budget`,
    the monitor's LAG_BUDGET is set to it first."""
    lagmon = importlib.import_module(f"{kata.__name__}.lagmon")
    if budget is not None:
        lagmon.LAG_BUDGET = budget
    write_cpu_stat(cgroup, version, 120, EARLIER, EARLIER * int(HELD * 1e6))

    async def kernel() -> None:
        periods = throttled = 0
        while True:
            time.sleep(held)  # the whole process stopped: every thread, the event loop's too
            periods += 1
            throttled += 1 if throttle else 0
            write_cpu_stat(cgroup, version, 120 + periods, EARLIER + throttled,
                           (EARLIER + throttled) * int(HELD * 1e6))
            await asyncio.sleep(0.1 - held)

    return watch_beside(lagmon, root, kernel)


def watch_beside(lagmon, root: Path, kernel):
    """lagmon.watch(WINDOW, root), with the coroutine function `kernel` playing the kernel on the same loop until
    watch() returns; watch()'s report."""

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
        f"(nr_throttled stayed {EARLIER}: it was {EARLIER} before watch() began, from periods throttled earlier), "
        f"but the cause was {cause!r} (the report: {report})")


COUNTERS = {1: "cgroup v1's cpu.stat counts nr_periods, nr_throttled and throttled_time, in nanoseconds (v2's "
               "counts throttled_usec instead)",
            2: "cgroup v2's cpu.stat counts nr_periods, nr_throttled and throttled_usec"}


def test_the_report_names_throttling_when_nr_throttled_grew_on_cgroup_v1(kata, tmp_path):
    """on cgroup v1, the report names CPU throttling when its own cgroup's nr_throttled grew, even with the loop in budget"""
    names_throttling_when_nr_throttled_grew(kata, tmp_path, 1)


def test_the_report_names_throttling_when_nr_throttled_grew_on_cgroup_v2(kata, tmp_path):
    """on cgroup v2, the report names CPU throttling as the cause when its own cgroup's nr_throttled grew while it watched"""
    names_throttling_when_nr_throttled_grew(kata, tmp_path, 2)


def names_throttling_when_nr_throttled_grew(kata, tmp_path, version):
    # One test per cgroup version: a check panel shows one row per test function (no parametrize).
    build = v1_tree if version == 1 else v2_tree
    cgroup = build(tmp_path, 50_000) if version == 1 else build(tmp_path, "50000 100000")
    # On v1 the loop keeps to its budget (the lag is not what names throttling); on v2 it is held far over it.
    within = version == 1
    report = watch_beside_a_kernel(kata, tmp_path, cgroup, version, throttle=True, held=0.0 if within else HELD,
                                   budget=ROOMY_BUDGET if within else None)
    cause = cause_of(report)
    lag = (f"the loop kept to its budget (LAG_BUDGET set to {ROOMY_BUDGET:g} s for this test, above any lag): the "
           f"quota stopped the process all the same" if within else f"each held the loop {HELD * 1000:.0f} ms")
    assert NAMES_THROTTLING.search(cause), (
        f"expected the report's cause to name CPU throttling: on cgroup v{version}, the cpu.stat of the process's own "
        f"cgroup (the one /proc/self/cgroup names; the root cgroup's never moved) counted a throttled period every "
        f"0.1 s while watch() ran (nr_throttled grew from {EARLIER}; {COUNTERS[version]}), and {lag}, but the cause "
        f"was {cause!r} (the report: {report})")



LATE = [((k * 37) % 150 + 1) / 10_000 for k in range(150)]  # 0.1 ms to 15 ms, each once, in no order


def watch_late(lagmon, root: Path, late: list[float], at_jump: dict | None = None):
    """watch() on a loop whose clock jumps, its i-th wake-up late[i] late; the window ends half an interval before
    the last wake-up, so that there is exactly one sample per entry of `late` (none if `late` is empty)."""
    interval = getattr(lagmon, "INTERVAL", 0.01)
    window = max(0.0, len(late) * interval + sum(late) - interval / 2)
    loop = VirtualClockLoop(late, at_jump)
    try:
        return run_bounded(loop.run_until_complete, lagmon.watch(window, root=root),
                           what=f"watch({window:.4f}, root=...) on a loop whose clock jumps",
                           seconds=max(hang_after(), 10.0))
    finally:
        loop.close()


def test_the_report_says_how_late_the_loop_ran(kata, tmp_path):
    """watch() reports the loop's lag as it was (samples, p50, p99, max) on a loop whose every wake-up is late by a known amount, and blames the loop only over budget"""
    lagmon = importlib.import_module(f"{kata.__name__}.lagmon")
    interval = getattr(lagmon, "INTERVAL", 0.01)
    cgroup = v2_tree(tmp_path, "max")
    (cgroup / "cpu.stat").unlink()  # a cgroup that does not say: nothing throttled, and nothing to raise about
    for late in (LATE, LATE[:99], []):  # 150 samples; 99 (an odd count, whose p99 is its largest); none
        report = watch_late(lagmon, tmp_path, late)
        ordered = sorted(late) or [0.0]
        expected = {"samples": len(late), "p50_ms": ordered[len(ordered) // 2] * 1000,
                    "p99_ms": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1000,
                    "max_ms": ordered[-1] * 1000}
        expected.update({name: 0 for name in ("periods", "throttled_periods", "throttled_ms")
                         if isinstance(getattr(report, name, None), (int, float))})  # shown, and nothing counted
        got = {name: getattr(report, name, None) for name in expected}
        wrong = [f"{name} {got[name]!r} where {value:.4g} was due" for name, value in expected.items()
                 if not isinstance(got[name], (int, float)) or abs(got[name] - value) > 1e-6]
        assert not wrong, (
            f"expected the report to say how late the loop woke: it slept {interval * 1000:g} ms at a time and each "
            f"of its {len(late)} wake-ups came a known amount late (steps of 0.1 ms up to 15 ms, each once, in a "
            f"shuffled order; a loop whose clock jumps to its next timer; its cgroup's cpu.stat unreadable, so "
            f"nothing counted), so p50 {expected['p50_ms']:.1f} ms, p99 {expected['p99_ms']:.1f} ms, max "
            f"{expected['max_ms']:.1f} ms; but it has {'; '.join(wrong)} (the report: {report})")
    report = watch_late(lagmon, tmp_path, LATE)
    budget = lagmon.LAG_BUDGET
    over = watch_late(lagmon, tmp_path, [budget + late for late in LATE])  # every wake-up over the budget
    causes = {"within": (cause_of(report), expected["p99_ms"] <= budget * 1000), "over": (cause_of(over), False)}
    for run, (cause, within) in causes.items():
        held = "the loop kept to its budget" if within else "every wake-up came later than the budget"
        assert not NAMES_THROTTLING.search(cause) and (cause.strip().lower() == "none") == within, (
            f"expected the report's cause to be {'none' if within else 'the loop, held by this process'}: {held} "
            f"(LAG_BUDGET {budget * 1000:g} ms; a loop whose clock jumps, its cgroup's cpu.stat unreadable, so nothing "
            f"counted a throttled period), but the cause was {cause!r} (the report: {report if within else over})")


def test_one_throttled_period_is_enough_to_name_throttling(kata, tmp_path):
    """when nr_throttled grows by one period only while watch() runs, the report names throttling"""
    lagmon = importlib.import_module(f"{kata.__name__}.lagmon")
    cgroup = v2_tree(tmp_path, "50000 100000")
    write_cpu_stat(cgroup, 2, 40, EARLIER, EARLIER * 20_000)
    late = [0.0001] * 60
    # Halfway through, the kernel has counted 50 more periods, one of them throttled: the loop kept to its budget
    # all along. One in fifty is no share to wave away: that period stopped every thread of the process.
    report = watch_late(lagmon, tmp_path, late, {30: lambda: write_cpu_stat(cgroup, 2, 90, EARLIER + 1,
                                                                            (EARLIER + 1) * 20_000)})
    cause = cause_of(report)
    assert NAMES_THROTTLING.search(cause), (
        f"expected the report's cause to name CPU throttling: its own cgroup's nr_throttled grew by one, from "
        f"{EARLIER} to {EARLIER + 1}, in 50 periods, while watch() ran (cgroup v2's cpu.stat; a loop whose clock "
        f"jumps, each wake-up 0.1 ms late, far within budget), but the cause was {cause!r}: a period in which the "
        f"quota ran out stopped the whole process, however many periods did not (the report: {report})")


def watched(lagmon, root: Path, late: list[float], what: str):
    """watch_late(), with an exception it raises said in one line."""
    try:
        return watch_late(lagmon, root, late)
    except Hang:
        raise
    except Exception as exc:
        raise AssertionError(f"expected watch() to return a report {what}, but it raised "
                             f"{type(exc).__name__}: {exc}") from exc


def test_a_cpu_stat_without_throttling_counters_is_no_throttling(kata, tmp_path):
    """on cgroup v2 with the cpu controller off (cpu.stat holds only usage), watch() reports no throttling and never raises"""
    lagmon = importlib.import_module(f"{kata.__name__}.lagmon")
    cgroup = v2_tree(tmp_path, "max 100000")
    (cgroup / "cpu.max").unlink()  # the cpu controller is not enabled for this cgroup
    (cgroup / "cpu.stat").write_text("usage_usec 50000\nuser_usec 45000\nsystem_usec 5000\n")
    what = ("for a cgroup v2 whose cpu controller is off: no cpu.max, and a cpu.stat of usage_usec, user_usec and "
            "system_usec only, as the kernel writes it then")
    cause = cause_of(watched(lagmon, tmp_path, [0.0001] * 30, what))
    assert not NAMES_THROTTLING.search(cause), (
        f"expected the report's cause not to name throttling {what} (no quota, nothing throttled), but it was "
        f"{cause!r}")


def test_a_second_watch_counts_from_its_own_start(kata, tmp_path):
    """a second watch() counts only what grew while it ran: throttling between two watches is not blamed on the second"""
    lagmon = importlib.import_module(f"{kata.__name__}.lagmon")
    cgroup = v2_tree(tmp_path, "50000 100000")
    write_cpu_stat(cgroup, 2, 40, EARLIER, EARLIER * 20_000)
    watched(lagmon, tmp_path, [0.0001] * 10, "the first time")
    write_cpu_stat(cgroup, 2, 44, EARLIER + 4, (EARLIER + 4) * 20_000)  # between the two watches
    report = watched(lagmon, tmp_path, [0.0001] * 10, "the second time")
    cause = cause_of(report)
    assert not NAMES_THROTTLING.search(cause), (
        f"expected the second watch()'s cause not to name throttling: nr_throttled grew by 4 between the two "
        f"watches and by none while the second one ran (cgroup v2's cpu.stat; a loop whose clock jumps, each wake-up "
        f"0.1 ms late, far within budget), but the cause was {cause!r}: a report counts from its own start, or an "
        f"old incident is reported as a new one (the report: {report})")


COUNTED_FROM = 1023  # where the folder's counters stand before watch() begins: 2**10 - 1, so that no bit
#                      trick on the counters gives their growth


def test_the_counters_the_report_shows_are_their_growth_while_it_watched(kata, tmp_path):
    """where the report shows the cgroup's periods, throttled periods and throttled time, they are what grew while it watched, on cgroup v1 and v2"""
    lagmon = importlib.import_module(f"{kata.__name__}.lagmon")
    for version in (1, 2):
        root = tmp_path / f"v{version}"
        root.mkdir()
        cgroup = v1_tree(root, 50_000) if version == 1 else v2_tree(root, "50000 100000")
        write_cpu_stat(cgroup, version, COUNTED_FROM, COUNTED_FROM, COUNTED_FROM * 1000)
        steps = []

        async def kernel() -> None:
            while True:
                await asyncio.sleep(0.05)
                n = len(steps) + 1
                write_cpu_stat(cgroup, version, COUNTED_FROM + n, COUNTED_FROM + n, (COUNTED_FROM + n) * 1000 + n * 2500)
                steps.append(n)

        report = watch_beside(lagmon, root, kernel)
        stats = {k: int(v) for k, v in (line.split() for line in (cgroup / "cpu.stat").read_text().splitlines())}
        grew = stats["nr_periods"] - COUNTED_FROM
        # Read at watch()'s start, or a step later by a watch() that awaits before it reads: one step of slack.
        due = {"periods": {grew, grew - 1}, "throttled_periods": {grew, grew - 1},
               "throttled_ms": {grew * 3.5, (grew - 1) * 3.5}}  # 1 ms and 2.5 ms more per step, counted in us
        shown = {name: getattr(report, name) for name in due if isinstance(getattr(report, name, None), (int, float))}
        wrong = [f"{name} {value!r}" for name, value in shown.items() if not any(abs(value - d) < 1e-6 for d in due[name])]
        assert not wrong, (
            f"expected the counters the report shows to be what grew while watch() ran: on cgroup v{version}, "
            f"nr_periods and nr_throttled grew by {grew} and the throttled time by {grew * 3.5:g} ms (from "
            f"{COUNTED_FROM} each; {COUNTERS[version]}), but the report has {', '.join(wrong)} (the report: {report})")


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
    """The same run on the fallback: the process stopped for half of every 0.1 s by SIGSTOP, in no cgroup of its own.

    No cgroup counter sees a SIGSTOP: the report must not blame throttling (unless the cgroup the process is in
    on this machine did throttle it), and the start-up must size for at most the CPUs the process may use."""
    deadline = max(hang_after(), 10.0)
    own, own_quota = own_cpu_cgroup()
    stat = str(own / "cpu.stat") if own is not None and (own / "cpu.stat").is_file() else ""
    run = Live(kata, LIVE_WINDOW, deadline, stat=stat)
    try:
        with containers.duty_cycle(run.pid, QUOTA):
            (result,) = live_results([run])
    finally:
        run.close()
    how = (f"in a process stopped {(1 - QUOTA) * 100:.0f}% of every 0.1 s (SIGSTOP, the fallback for a CPU quota) "
           "while another thread kept the CPU busy")
    cause = check_report(result, how)
    # Without a cgroup file system nothing can count a throttled period; with one, its counter says.
    judged = bool(stat) or not containers.CGROUP_FS.is_dir()
    if judged and grew(result, "nr_throttled") == 0:
        counted = (f"its own cgroup's nr_throttled stayed {result.get('after', {}).get('nr_throttled', 0)}" if stat
                   else "this machine has no cgroup file system")
        assert not NAMES_THROTTLING.search(cause), (
            f"expected the report's cause not to name throttling: {how}, the process was stopped by a signal, which "
            f"no cgroup counter sees ({counted}), but the cause was {cause!r} (the report: {result.get('report')})")

    most = result["affinity"] if own_quota is None else min(result["affinity"], math.ceil(own_quota))
    limits = affinity_words(result) + (f", and its own cgroup's quota {own_quota:g} CPUs" if own_quota else "")
    cpus = result.get("cpus")
    assert isinstance(cpus, int) and 1 <= cpus <= most, (
        f"expected effective_cpus() to return a number from 1 to {most} {how} ({limits}), but it returned {cpus!r}")
    assert result.get("workers") == cpus, (
        f"expected sizing().workers to be {cpus}, one worker per CPU that effective_cpus() returned, {how}, but it "
        f"was {result.get('workers')!r}")
    assert result.get("threads") == min(32, cpus + 4), (
        f"expected the default executor that install(loop) gives the loop to start {min(32, cpus + 4)} threads "
        f"(min(32, CPUs + 4), from the {cpus} CPUs effective_cpus() returned) {how}, but it started "
        f"{result.get('threads')}")


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
            failure = None
            try:
                quota_run, roomy_run = live_results(runs)
            except Exception as exc:  # noqa: BLE001 - said after what the service changed, if it changed anything
                failure = exc
            finally:
                for run in runs:
                    run.close()
            # A run whose container the service changed (as root it may) proves nothing, whatever it reported.
            changed = next((run.changes for run in runs if run.changes), [])
            assert not changed, containers.changed_from_inside("the service", changed)
            if failure is not None:
                raise failure
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
        f"{grew(quota_run, 'nr_throttled')} throttled periods of {grew(quota_run, 'nr_periods')} while watch() ran "
        f"({COUNTERS[limited.version]}), but the cause was {cause!r} (the report: {quota_run.get('report')})")

    want = expected(quota_run["affinity"], QUOTA)
    assert quota_run.get("cpus") == want, (
        f"expected effective_cpus() to return {want} {quota_how} ({affinity_words(quota_run)}; os.cpu_count() says "
        f"{os.cpu_count()}), but it returned {quota_run.get('cpus')!r}")
    assert quota_run.get("workers") == want, (
        f"expected sizing().workers to be {want}, one worker per CPU, {quota_how}, but it was {quota_run.get('workers')!r}")
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


# Quotas and periods as the kernel takes them, against an oracle of the tests' own. Every other test here writes a
# period of 100000 µs; the kernel takes any period from 1 ms to 1 s (cgroup v2's `cpu.max` "QUOTA PERIOD", v1's
# cpu.cfs_quota_us and cpu.cfs_period_us), "no limit" is "max" on v2 and -1 on v1, and a quota may be far larger
# than any machine. Each example is one fresh process reading up to eight trees (six random examples and the
# registered one: about as long as two other tests). The seed is in every failure message:
# LOOPKATA_HYPOTHESIS_SEED=<seed> replays the same examples.
try:
    from hypothesis import HealthCheck, Phase, example, given, settings, strategies as st
    from hypothesis import seed as hypothesis_seed
except ImportError:  # pinned in requirements.txt; without it this test is skipped, and a skip never passes a check
    st = None

SEED = property_seed()
MIN_PERIOD_US, MAX_PERIOD_US = 1_000, 1_000_000  # what the kernel accepts as a CFS period


def oracle(affinity: int, quota, period_us: int) -> int:
    """The CPUs the kernel's rule gives: quota / period rounded up, no more than the affinity, at least 1."""
    if quota in ("max", -1):
        return affinity
    return max(1, min(affinity, -(-quota // period_us)))


if st is not None:
    def _limits():
        """(version, quota, period): quotas around the affinity's few CPUs, where rounding shows, and huge ones."""
        return st.tuples(
            st.sampled_from(("v1", "v2")),
            st.integers(MIN_PERIOD_US, MAX_PERIOD_US),
        ).flatmap(lambda vp: st.tuples(
            st.just(vp[0]),
            st.one_of(st.integers(1_000, 3 * vp[1]), st.integers(10 ** 12, 2 ** 63 - 1),
                      st.just("max" if vp[0] == "v2" else -1)),
            st.just(vp[1]),
        ))

    # The machine: 1 to 64 CPUs (as if: this one has few), and PYTHON_CPU_COUNT unset, a number, 0 or a word.
    _machine = st.tuples(st.integers(1, 64), st.sampled_from((None, "0", "1", "3", "12", "default", "lots")))
    # The process's cgroup, a colon in a name too (the kernel allows it; /proc/self/cgroup splits on the first two)
    _cgroup_path = st.sampled_from(("/kubepods/pod1/c1", "/system.slice/app:blue.scope", "/a:b/c:d"))

    @hypothesis_seed(SEED)
    # No shrinking: each example runs in a fresh process, and on a busy machine shrinking one that failed could
    # outlast the check's deadline; the failing tree is named in the message as it is.
    @settings(max_examples=6, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck), phases=(Phase.explicit, Phase.reuse, Phase.generate))
    @given(st.lists(st.tuples(_limits(), _machine, _cgroup_path), min_size=1, max_size=8))
    @example([(limits, (cpus, count), "/kubepods/pod1/c1") for limits, cpus, count in (  # the cases that matter
        (("v2", 150_000, 1_000_000), 2, None), (("v1", 150_000, 1_000_000), 2, None),  # 0.15 CPU is 1, not 1.5
        (("v2", 100_001, 100_000), 8, None),  # a microsecond over one CPU is two
        (("v1", 2_000, 1_000), 4, None),  # the kernel's shortest period
        (("v2", "max", 250_000), 6, None), (("v1", -1, 50_000), 6, None),  # no limit, on another period
        (("v2", 2 ** 63 - 1, 1_000_000), 64, "12"),  # a quota far beyond any machine; PYTHON_CPU_COUNT decides
        (("v1", 50_000, 100_000), 4, None), (("v2", 250_000, 100_000), 16, None),  # rounded up, never down
        (("v2", "max", 100_000), 8, "0"), (("v1", -1, 100_000), 8, "1"),  # 0 is no number of CPUs; 1 is one
        (("v2", "max", 100_000), 2, "12"),  # PYTHON_CPU_COUNT above the affinity, no quota: it lifts nothing
    )] + [(("v1", 50_000, 100_000), (4, None), "/system.slice/app:blue.scope")])  # a colon in the cgroup's name
    def _quota_property(kata, tmp_path_factory, limits):
        folder = tmp_path_factory.mktemp("quota")
        for n, ((version, quota, period_us), _, path) in enumerate(limits):
            if version == "v1":
                v1_tree(folder / str(n), quota, period_us, path=path)
            else:
                v2_tree(folder / str(n), f"{quota} {period_us}", path=path)
        results = cases(kata, *({"root": str(folder / str(n)), "cpus_online": cpus, "executor": True,
                                 "environ": {"PYTHON_CPU_COUNT": count}}
                                for n, (_, (cpus, count), _) in enumerate(limits)))
        for ((version, quota, period_us), (cpus, count), path), result in zip(limits, results):
            files = (f"cpu.max '{quota} {period_us}'" if version == "v2"
                     else f"cpu.cfs_quota_us {quota}, cpu.cfs_period_us {period_us}")
            limit = int(count) if count is not None and count.isdigit() and int(count) > 0 else None
            want = min(oracle(cpus, quota, period_us), limit or cpus)
            machine = (f"cgroup {version} with {files}, its cgroup {path}, on a machine of {cpus} CPUs (every one "
                       f"allowed) with PYTHON_CPU_COUNT " + ("unset" if count is None else repr(count)))
            seed = " " + replay_words(SEED)
            assert "error" not in result and result.get("cpus") == want, (
                f"expected effective_cpus() to return {want} on {machine}, but {said(result)}{what_it_read(result)}"
                f"{seed}")
            assert result.get("workers") == want and result.get("threads") == min(32, want + 4), (
                f"expected sizing().workers to be {want} and install(loop)'s default executor to start "
                f"{min(32, want + 4)} threads (min(32, CPUs + 4)) on {machine}, but they were "
                f"{result.get('workers')!r} and {result.get('threads')!r}{seed}")


def test_any_period_and_quota_the_kernel_takes(kata, tmp_path_factory):
    """any period from 1 ms to 1 s and any quota, on cgroup v1 and v2, give the quota's CPUs rounded up"""
    if st is None:
        import pytest
        pytest.skip(NO_HYPOTHESIS)
    _quota_property(kata, tmp_path_factory)
