"""The grader under deliberate faults: verdicts that must not lie, no process left
behind, no deadline exceeded, bad files as one paragraph.

Each fault is a small synthetic kata graded for real; every test is bounded in
time and kills whatever it started.
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from test_grader import synthetic_kata

from loopkata.grading import runner
from loopkata.grading.report import render_text

ROOT = Path(__file__).resolve().parents[1]

TWO_TESTS = '''
from loopkata.testing import run_bounded

def test_first(kata):
    """the first scenario finishes"""
    assert run_bounded(kata.scenario, what="the first scenario") == "done"

def test_second(kata):
    """the second scenario finishes"""
    assert run_bounded(kata.scenario, what="the second scenario") == "done"
'''


def two_test_kata(tmp_path, source, **kw):
    kata, impl = synthetic_kata(tmp_path, source, **kw)
    (tmp_path / "tests" / "hidden" / "test_synthetic.py").write_text(TWO_TESTS)
    return kata, impl


def processes_with(marker: str) -> list[int]:
    """Live processes whose command line or environment holds `marker`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[-1].split()[0] == b"Z":
                    continue  # a zombie runs nothing
            blob = Path(f"/proc/{pid}/cmdline").read_bytes() + Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if marker.encode() in blob and int(pid) != os.getpid():
            found.append(int(pid))
    return found


@pytest.fixture
def marker():
    """A unique word for the processes a test starts; anything left with it is killed at the end."""
    word = f"loopkata-fault-{uuid.uuid4().hex[:10]}"
    yield word
    for pid in processes_with(word):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


needs_proc = pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")


# --- verdicts that must not lie ----------------------------------------------

@pytest.mark.parametrize("call", [
    "pytest.skip('not today', allow_module_level=True)",
    "pytest.xfail('known to fail')",
])
def test_a_skipped_test_is_not_a_pass(tmp_path, call):
    kata, impl = synthetic_kata(tmp_path, f'''
        import pytest
        {call}

        def scenario():
            return "done"
    ''')
    result = runner.check(kata, impl)
    shown = render_text(result, kata)
    assert result.verdict == runner.FAILED, f"expected a skipped test to fail the check, got:\n{shown}"
    assert result.tests[0].outcome == "skipped" and "every hidden test runs and passes" in shown, shown


def test_a_test_that_never_reports_is_named_with_the_reason(tmp_path):
    kata, impl = two_test_kata(tmp_path, '''
        import os

        def scenario():
            os._exit(0)
    ''')
    result = runner.check(kata, impl)
    shown = render_text(result, kata)
    assert not result.passed, shown
    first, second = result.tests
    assert first.outcome == runner.ERROR and "exited with status 0 while running 'the first scenario finishes'" in first.message, shown
    assert "os._exit" in first.message, shown
    assert second.outcome == runner.NOT_RUN and "ended while running 'the first scenario finishes'" in second.message, shown


def test_pytest_exit_in_the_kata_is_not_a_pass(tmp_path):
    kata, impl = two_test_kata(tmp_path, '''
        import pytest
        pytest.exit("bye", returncode=0)

        def scenario():
            return "done"
    ''')
    result = runner.check(kata, impl)
    assert not result.passed, render_text(result, kata)
    assert all(t.outcome != runner.PASSED for t in result.tests), render_text(result, kata)


def test_deleting_the_grader_files_does_not_lose_results(tmp_path):
    kata, impl = two_test_kata(tmp_path, '''
        import glob, os, tempfile

        # The code under test removes everything the grader might keep in the temp folder.
        for f in glob.glob(os.path.join(tempfile.gettempdir(), "loopkata-*", "*")):
            if os.path.isfile(f):
                os.remove(f)

        def scenario():
            return "done"
    ''')
    result = runner.check(kata, impl)
    assert result.passed and len(result.tests) == 2, render_text(result, kata)


def test_a_kill_by_a_signal_names_the_test_and_the_signal(tmp_path):
    kata, impl = two_test_kata(tmp_path, '''
        import os, signal

        def scenario():
            os.kill(os.getpid(), signal.SIGKILL)
    ''')
    result = runner.check(kata, impl)
    assert "crashed (signal 9, SIGKILL) while running 'the first scenario finishes'" in render_text(result, kata)


def test_a_keyboard_interrupt_in_the_code_names_the_test(tmp_path):
    kata, impl = two_test_kata(tmp_path, '''
        def scenario():
            raise KeyboardInterrupt
    ''')
    result = runner.check(kata, impl)
    shown = render_text(result, kata)
    assert not result.passed, shown
    assert "KeyboardInterrupt while running 'the first scenario finishes'" in shown, shown


# --- no process left behind, no deadline exceeded ----------------------------

@needs_proc
def test_processes_started_by_the_kata_are_gone_after_the_check(tmp_path, marker):
    kata, impl = synthetic_kata(tmp_path, f'''
        import os, subprocess

        subprocess.Popen(["sh", "-c", "exec sleep 600", "{marker}"])

        def scenario():
            if os.fork() == 0:  # escapes the process group, keeps the output pipe open
                os.setsid()
                if os.fork() == 0:
                    os.execvp("sh", ["sh", "-c", "exec sleep 600", "{marker}"])
                os._exit(0)
            return "done"
    ''', budget=15)
    started = time.monotonic()
    result = runner.check(kata, impl)
    took = time.monotonic() - started
    assert result.passed, render_text(result, kata)
    assert took < 5, f"expected the check to end with its tests, not to wait for escaped processes ({took:.1f} s)"
    time.sleep(0.2)
    left = processes_with(marker)
    assert not left, f"expected no process of the kata after the check, found {len(left)}: {left}"
    assert "left" in result.notice and "stopped them" in result.notice, result.notice


def test_the_budget_is_a_hard_deadline_for_the_whole_check(tmp_path):
    kata, impl = synthetic_kata(tmp_path, '''
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a polite stop is not enough

        def scenario():
            while True:
                time.sleep(0.01)
    ''', budget=3.0, hang_after=60)
    started = time.monotonic()
    result = runner.check(kata, impl)
    took = time.monotonic() - started
    assert result.verdict == runner.HANG, render_text(result, kata)
    budget = kata.budget_seconds + result.waited_for_cpu  # moved back by what a busy machine kept it waiting
    assert took < budget + 1.5, f"expected the check to end at its {budget:g} s budget, took {took:.1f} s"


def test_memory_without_bound_is_a_verdict(tmp_path):
    kata, impl = synthetic_kata(tmp_path, '''
        def scenario():
            hoard = []
            while True:
                hoard.append(bytearray(64 * 2**20))
    ''', budget=20, hang_after=15)
    kata = type(kata)(**{**kata.__dict__, "memory_mib": 512})
    started = time.monotonic()
    result = runner.check(kata, impl)
    took = time.monotonic() - started
    shown = render_text(result, kata)
    assert not result.passed and "more than 0.5 GiB of memory" in shown, shown
    assert took < 10, f"expected the cap to stop it quickly, took {took:.1f} s"


def test_memory_is_capped_for_the_whole_check_not_each_process(tmp_path):
    """three processes that each stay under the memory cap, but not together, are stopped"""
    kata, impl = synthetic_kata(tmp_path, '''
        import subprocess, sys

        HOLD = "import sys, time; held = b'x' * (200 * 2**20); print('holding', flush=True); time.sleep(60)"

        def scenario():
            children = [subprocess.Popen([sys.executable, "-c", HOLD], stdout=subprocess.PIPE) for _ in range(3)]
            for child in children:
                child.stdout.readline()  # each holds its 200 MiB now
            for child in children:
                child.wait()
            return "done"
    ''', budget=60, hang_after=55)
    kata = type(kata)(**{**kata.__dict__, "memory_mib": 512})
    result = runner.check(kata, impl)
    shown = render_text(result, kata)
    assert not result.passed and "more than 0.5 GiB of memory together" in shown, (
        f"expected three children holding 200 MiB each to pass the 512 MiB cap of the check, got:\n{shown}")


def test_a_check_has_a_temporary_folder_of_its_own_removed_when_it_ends(tmp_path):
    """a file the code under test leaves in the temporary folder is gone when the check ends"""
    where = tmp_path / "where.txt"
    kata, impl = synthetic_kata(tmp_path, f'''
        import pathlib, tempfile

        def scenario():
            left = pathlib.Path(tempfile.gettempdir(), "left-behind.bin")
            left.write_bytes(b"x" * 1024)
            pathlib.Path({str(where)!r}).write_text(str(left))
            return "done"
    ''')
    result = runner.check(kata, impl)
    assert result.passed, render_text(result, kata)
    left = Path(where.read_text())
    assert left.parent != Path(tempfile.gettempdir()), f"the check's code wrote into the shared {left.parent}"
    assert not left.exists(), f"the file the check's code left in its temporary folder is still there: {left}"


def test_a_killed_checks_folder_is_removed_by_the_next_check_and_a_running_ones_is_not(tmp_path, monkeypatch):
    """the temporary folder of a check killed with SIGKILL is removed when the next check starts; a running check's stays"""
    from loopkata.grading import scratch

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    code = ("import sys, time\nfrom loopkata.grading import scratch\n"
            "with scratch.check_folder() as f:\n    (f / 'copy.py').write_text('x')\n    print(f, flush=True)\n"
            "    time.sleep(60)\n")
    maker = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        killed = Path(maker.stdout.readline().strip())
    finally:
        maker.kill()
        maker.wait(10)
    assert killed.parent == tmp_path and (killed / "copy.py").exists(), f"expected a check folder in {tmp_path}, got {killed}"
    with scratch.check_folder() as running:
        elsewhere = tmp_path / "loopkata-3c7a"  # a folder under another name: not a check's
        elsewhere.mkdir()
        runner.sweep_leftovers()  # what every check begins with
        assert not killed.exists(), f"expected the killed check's folder {killed} to be removed by the next check"
        assert running.is_dir() and elsewhere.is_dir(), (
            f"expected the running check's folder ({running}) and a folder not named as a check's to stay")
    assert not running.exists(), f"expected a check's folder to be removed when its check ends: {running}"


def test_a_file_past_the_size_cap_stops_the_test_that_writes_it(tmp_path, monkeypatch):
    """a file the code under test writes stops growing at the size cap, and the test fails there"""
    monkeypatch.setenv("LOOPKATA_FILE_SIZE_CAP", str(16 * 2**20))
    kata, impl = synthetic_kata(tmp_path, '''
        import tempfile

        def scenario():
            with tempfile.TemporaryFile() as f:
                for _ in range(32):
                    f.write(b"x" * 2**20)
            return "done"
    ''')
    result = runner.check(kata, impl)
    shown = render_text(result, kata)
    # Python ignores SIGXFSZ, so the write past the cap raises OSError (EFBIG) in the learner's line
    assert not result.passed and "File too large" in shown, (
        f"expected the 32 MiB file to be stopped at the 16 MiB cap, got:\n{shown}")


def test_a_flood_of_output_does_not_grow_the_grader(tmp_path):
    """a test that prints 200 MB costs the grader only a bounded part of it"""
    kata, impl = synthetic_kata(tmp_path, '''
        import os

        def scenario():
            chunk = b"flood " * 10000 + b"\\n"
            for _ in range(200 * 2**20 // len(chunk)):
                os.write(1, chunk)
            return "done"
    ''', budget=60, hang_after=55)
    code = ("import resource, sys, dataclasses\n"
            "from pathlib import Path\n"
            "from loopkata.grading import runner\n"
            "from loopkata.model import catalogue\n"
            "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            f"kata = dataclasses.replace(catalogue.find('bound-semaphore'), root=Path({str(tmp_path)!r}), "
            "tests='hidden/test_synthetic.py', budget_seconds=60, hang_after=55)\n"
            f"result = runner.check(kata, Path({str(impl)!r}))\n"
            "after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            "print(result.verdict, (after - before) // 1024)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=ROOT, env={**os.environ, "LOOPKATA_ROOT": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    verdict, grew_mib = done.stdout.split()
    assert verdict == "passed" and int(grew_mib) < 50, (
        f"expected the check to pass with the grader growing by a few MiB, got {verdict} and {grew_mib} MiB")


@needs_proc
def test_ctrl_c_stops_the_check_and_everything_it_started(tmp_path, marker):
    project = tmp_path / marker
    for part in ("katas", "solutions", "tests/hidden"):
        shutil.copytree(ROOT / part, project / part)
    (project / "katas" / "01_bound_semaphore.py").write_text("while True:\n    pass  # spins at import\n")
    env = {**os.environ, "LOOPKATA_ROOT": str(project), "LOOPKATA_STATE": str(tmp_path / "state")}
    cli = subprocess.Popen(
        [sys.executable, "-m", "loopkata", "check", "bound-semaphore"], env=env, cwd=project,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        # As a terminal starts it: a suite launched in the background by a script inherits
        # SIGINT ignored, and Python then never turns Ctrl-C into KeyboardInterrupt.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 20
        while len(processes_with(marker)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)  # the CLI, the supervisor and the spinning test process
        os.killpg(cli.pid, signal.SIGINT)  # what Ctrl-C in a terminal sends
        try:  # a deadline against a hang only: a loaded machine may take a while to stop
            out, err = cli.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail("the check was still running 120 s after Ctrl-C", pytrace=False)
    finally:
        if cli.poll() is None:
            os.killpg(cli.pid, signal.SIGKILL)
    until = time.monotonic() + 10  # a process the CLI killed may still be on its way out
    while processes_with(marker) and time.monotonic() < until:
        time.sleep(0.05)
    said = out + err
    assert "Stopped; nothing was recorded." in said and "Traceback" not in said, said
    assert cli.returncode == 130, f"expected exit status 130 after Ctrl-C, got {cli.returncode}"
    left = processes_with(marker)
    assert not left, f"expected every grading process to be gone after Ctrl-C, found {left}"
    assert not (tmp_path / "state" / "progress.json").exists() or "bound-semaphore" not in (
        tmp_path / "state" / "progress.json").read_text(), "expected nothing recorded for an interrupted check"


# --- bad files are one paragraph --------------------------------------------

def test_a_latin1_file_with_its_coding_line_is_graded(tmp_path):
    kata, impl = synthetic_kata(tmp_path, "")
    impl.write_bytes('# coding: latin-1\nGREETING = "caf\xe9"\n\ndef scenario():\n    return "done"\n'.encode("latin-1"))
    result = runner.check(kata, impl)
    assert result.passed, render_text(result, kata)


def test_a_stray_byte_is_one_paragraph(tmp_path):
    kata, impl = synthetic_kata(tmp_path, "")
    impl.write_bytes(b'def scenario():\n    return "done"  # \xff\n')
    result = runner.check(kata, impl)
    shown = render_text(result, kata)
    assert result.verdict == runner.ERROR and "Traceback" not in shown, shown
    assert "not valid text" in shown and "line 2" in shown and "0xff" in shown, shown


def test_a_null_byte_names_its_line(tmp_path):
    kata, impl = synthetic_kata(tmp_path, "")
    impl.write_bytes(b'def scenario():\n\n    return "done"\x00\n')
    result = runner.check(kata, impl)
    shown = render_text(result, kata)
    assert "null byte on line 3" in shown and "None" not in shown, shown


@pytest.mark.parametrize("name", ["notes.txt", "/dev/null"])
def test_an_impl_that_is_not_python_says_so(tmp_path, name):
    kata, _ = synthetic_kata(tmp_path, "")
    impl = Path(name) if name.startswith("/") else tmp_path / name
    if not impl.exists():
        impl.write_text("def scenario():\n    return 'done'\n")
    result = runner.check(kata, impl)
    shown = render_text(result, kata)
    assert "not a Python file" in shown and "There is no implementation" not in shown, shown


def test_a_file_saved_during_the_check_is_graded_again(tmp_path):
    kata, impl = synthetic_kata(tmp_path, '''
        import time

        def scenario():
            time.sleep(0.6)
            return "first version"
    ''', budget=20, hang_after=5)
    fixed = 'def scenario():\n    return "done"\n'

    def save_later():
        time.sleep(0.5)  # while the first version is being graded
        impl.write_text(fixed)

    import threading
    saver = threading.Thread(target=save_later)
    saver.start()
    result = runner.check(kata, impl)
    saver.join()
    shown = render_text(result, kata)
    assert result.passed, f"expected the version saved during the check to be graded again, got:\n{shown}"

