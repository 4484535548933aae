"""A busy machine does not change a verdict: the grader's deadlines allow the time the code
under test waited for a CPU (loopkata.grading.cpu_wait), and a deadlock is still a hang.

Each test makes its own busy machine: the check and five CPU burners share one CPU (affinity),
so the code under test gets a sixth of it or less, while the rest of the suite keeps the
machine's other CPUs. The rest of a loaded suite may share that CPU too, so how busy it is has
no bound: the tests of the allowance lift its cap (LOOPKATA_STRETCH_CAP), and what they assert
holds at any load. One test shows the cap, at its own small value, ends code that spins.
"""
import contextlib
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from test_grader import SELF_DEADLOCK, synthetic_kata

from loopkata.grading import runner
from loopkata.grading.bounded import Hang, run_bounded
from loopkata.grading.cpu_wait import STRETCH_CAP, CpuWait, Deadline, stretch_cap
from loopkata.grading.report import render_text

pytestmark = pytest.mark.skipif(not os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/schedstat"),
                                reason="this kernel keeps no schedstat: deadlines cannot allow for a busy CPU")

BURNERS = 5  # processes that keep the shared CPU busy beside the check
NO_CAP = "1000"  # a deadline may grow a thousandfold: more than any load the suite meets


@contextlib.contextmanager
def one_busy_cpu():
    """This process, everything it starts meanwhile and BURNERS spinning processes, on one CPU."""
    before = os.sched_getaffinity(0)
    cpu = {min(before)}
    os.sched_setaffinity(0, cpu)
    # Each in a session of its own, as the check's supervisor is: where the kernel shares a CPU
    # between sessions first (autogroup), burners in one session would take only one share.
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
               for _ in range(BURNERS)]
    try:
        time.sleep(0.2)  # the burners are spinning
        yield
    finally:
        for b in burners:
            b.kill()
            b.wait()
        os.sched_setaffinity(0, before)


def cpu_for(seconds: float) -> str:
    """Code that computes for `seconds` of its own CPU time, however long that takes on the clock."""
    return f"""
        import time

        def compute():
            started = time.thread_time()
            while time.thread_time() - started < {seconds}:
                pass
            return "done"
    """


def test_a_check_slowed_by_a_busy_cpu_still_passes(tmp_path, monkeypatch):
    """a right fix that needs 0.3 s of CPU passes its 0.8 s scenario and 3 s check while it gets a sixth of a CPU or less"""
    monkeypatch.setenv("LOOPKATA_STRETCH_CAP", NO_CAP)
    kata, impl = synthetic_kata(tmp_path, cpu_for(0.3) + "\n        def scenario():\n            return compute()\n",
                                budget=3.0, hang_after=0.8)
    with one_busy_cpu():
        started = time.monotonic()
        result = runner.check(kata, impl)
        took = time.monotonic() - started
    assert result.passed, f"expected the check to pass on a busy CPU, got:\n{render_text(result, kata)}"
    # What makes this test able to fail: without the allowance the check ran past its budget.
    assert took > kata.budget_seconds, (
        f"expected the busy CPU to slow the check past its {kata.budget_seconds:g} s budget, it took {took:.1f} s")


def test_a_deadlock_on_a_busy_cpu_is_still_a_hang_at_once(tmp_path, monkeypatch):
    """a thread waiting on a lock it holds is a hang on a busy CPU too, seen by the hang guard, not the budget"""
    monkeypatch.setenv("LOOPKATA_STRETCH_CAP", NO_CAP)
    kata, impl = synthetic_kata(tmp_path, SELF_DEADLOCK, budget=5.0)
    with one_busy_cpu():
        result = runner.check(kata, impl)
    assert result.verdict == runner.HANG, render_text(result, kata)
    assert "with lock:  # not reentrant" in result.tests[0].stacks, result.tests[0].stacks
    assert "budget" not in result.tests[0].message, (
        f"expected the hang guard to see the deadlock, not the whole check's budget: {result.tests[0].message}")


def test_a_sleeping_process_earns_no_time_on_a_busy_cpu():
    """a process asleep waits for no CPU, however busy the CPU it shares: it is given no extra time"""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; print('asleep', flush=True); time.sleep(60)"],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert sleeper.stdout.readline().strip() == "asleep"
        while state(sleeper.pid) != "S":  # past the print, inside the sleep
            time.sleep(0.01)
        with one_busy_cpu():
            os.sched_setaffinity(sleeper.pid, {min(os.sched_getaffinity(0))})
            waited = CpuWait([sleeper.pid])
            time.sleep(1.0)
            allowed = waited.update([sleeper.pid])
    finally:
        sleeper.kill()
        sleeper.wait()
    assert allowed == 0.0, f"expected a sleeping process to earn no time, it was given {allowed:.3f} s"


def state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def test_a_process_asleep_past_its_budget_is_stopped(tmp_path, monkeypatch):
    """code that sleeps for ever at import is stopped by the check's budget on a busy CPU, with the line it sleeps on"""
    # Its start-up may wait for the CPU for as long as the machine is busy; its sleep never does
    # (the test above), so a cap of 100 is never reached, and would end the check if it were.
    monkeypatch.setenv("LOOPKATA_STRETCH_CAP", "100")
    kata, impl = synthetic_kata(tmp_path, '''
        import time
        while True:  # stuck at import: no guard can catch this, the budget must
            time.sleep(0.05)
    ''', budget=3.0)
    with one_busy_cpu():
        result = runner.check(kata, impl)
    assert result.verdict == runner.HANG, render_text(result, kata)
    assert "budget" in result.tests[0].message, result.tests[0].message
    assert "time.sleep(0.05)" in result.tests[0].stacks, result.tests[0].stacks


def test_the_cap_ends_code_that_spins_on_a_busy_cpu(monkeypatch):
    """code that spins for ever on a busy CPU waits for it all the time: its deadline grows to the cap, and no further"""
    monkeypatch.setenv("LOOPKATA_STRETCH_CAP", "2")
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            pass

    with one_busy_cpu():
        spinner = threading.Thread(target=spin, daemon=True)
        spinner.start()
        try:
            deadline, given_up = Deadline(0.5), time.monotonic() + 60  # a cap that held nothing would wait for ever
            while not deadline.passed() and time.monotonic() < given_up:
                time.sleep(0.02)
        finally:
            stop.set()
            spinner.join()
    # The spinner gets a sixth of the CPU or less, so it waits for it five sixths of the time or
    # more: the allowance reaches the cap (0.5 s more) however busy the machine, and stops there.
    assert deadline.allowed == pytest.approx(0.5), (
        f"expected the 0.5 s deadline moved back by its cap (0.5 s more), it was moved back by {deadline.allowed:.2f} s")


def test_the_cap_is_read_from_the_environment(monkeypatch):
    """LOOPKATA_STRETCH_CAP sets the cap; a value that is no number of 1 or more leaves it at its default"""
    for value, cap in (("10", 10.0), ("1", 1.0), ("0.5", STRETCH_CAP), ("inf", STRETCH_CAP), ("nan", STRETCH_CAP),
                       ("lots", STRETCH_CAP), ("", STRETCH_CAP)):
        monkeypatch.setenv("LOOPKATA_STRETCH_CAP", value)
        assert stretch_cap() == cap, f"LOOPKATA_STRETCH_CAP={value!r}: expected a cap of {cap:g}, got {stretch_cap():g}"


def compute(seconds: float) -> str:
    started = time.thread_time()
    while time.thread_time() - started < seconds:
        pass
    return "done"


def test_a_scenario_slowed_by_a_busy_cpu_is_no_hang(monkeypatch):
    """run_bounded gives a scenario the time its threads waited for a CPU: 0.15 s of work in a 0.4 s window"""
    monkeypatch.setenv("LOOPKATA_STRETCH_CAP", NO_CAP)
    with one_busy_cpu():
        started = time.monotonic()
        try:
            said = run_bounded(compute, 0.15, what="a computation", seconds=0.4)
        except Hang as hang:
            pytest.fail(f"expected the computation to finish on a busy CPU, got a hang: {hang}\n{hang.stacks}")
        took = time.monotonic() - started
    assert said == "done"
    assert took > 0.4, f"expected the busy CPU to slow the computation past its 0.4 s window, it took {took:.2f} s"


def test_the_stacks_wait_for_a_deadline_moved_back(tmp_path):
    """the grading child's dump of its stacks follows the deadline the supervisor moves back"""
    moved, stacks = tmp_path / "deadline", tmp_path / "stacks.txt"
    code = textwrap.dedent(f"""
        import os, time
        from loopkata.grading.stackdump import dump_stacks_later

        def still_running_past_the_first_deadline():
            time.sleep(30)

        with open({str(moved)!r}, "w") as f:  # as the supervisor does: 3 s from now, not 0.2
            f.write(repr(time.time() + 3.0))
        fd = os.open({str(stacks)!r}, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        dump_stacks_later(0.2, fd, moved_by={str(moved)!r})
        time.sleep(1.0)
        print(os.path.getsize({str(stacks)!r}), flush=True)  # before the moved deadline: nothing yet
        still_running_past_the_first_deadline()
    """)
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        early = child.stdout.readline().strip()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not stacks.read_text():
            time.sleep(0.05)
        late = stacks.read_text()
    finally:
        child.kill()
        child.wait()
    assert early == "0", f"expected no stacks before the moved deadline, the file had {early} bytes"
    assert "still_running_past_the_first_deadline" in late, f"expected the stacks once the moved deadline came, got: {late!r}"
