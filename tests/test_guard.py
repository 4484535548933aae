"""`loopkata guard` finds each kind of bug it names, and only there; its settings, its wrapper and its children.

The scenarios (tests/guard_scenarios/test_scenarios.py) are small programs with
one bug each and fixed twins; they run once, guarded, in a pytest of their own,
started as a team starts it: `python -m pytest -p loopkata.guard`.
"""
import ast
import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from loopkata.guard.findings import KINDS
from loopkata.guard.notebook import show_guarded

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "tests" / "guard_scenarios" / "test_scenarios.py"
NAMES = [n.name for n in ast.parse(SCENARIOS.read_text()).body
         if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]


def guarded_pytest(folder: Path, *args, timeout=240) -> subprocess.CompletedProcess:
    """`python -m pytest -p loopkata.guard ARGS` in `folder`, with its own temporary folder, and without
    the notebook plugin this project's suite has installed and a team's would not (its import takes 1.5 s)."""
    tmp = folder / "tmp"
    tmp.mkdir(exist_ok=True)
    env = {**os.environ, "TMPDIR": str(tmp)}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "loopkata.guard", "-p", "no:cacheprovider",
                           "-p", "no:nbval", "-o", "addopts=", "-q", *args], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


@pytest.fixture(scope="module")
def scenario_findings(tmp_path_factory):
    folder = tmp_path_factory.mktemp("scenarios")
    ran = guarded_pytest(folder, "--loopkata-guard=warn", "--loopkata-guard-report=report.json", str(SCENARIOS))
    report = folder / "report.json"
    assert report.exists(), f"expected the guarded run to write report.json; it exited {ran.returncode}:\n" \
                            f"{ran.stdout[-3000:]}{ran.stderr[-3000:]}"
    by_test = {}
    for f in json.loads(report.read_text())["findings"]:
        by_test.setdefault(f["test"].rsplit("::", 1)[-1], []).append(f)
    left = sorted(p.name for p in (folder / "tmp").iterdir())
    return ran, by_test, left


@pytest.mark.parametrize("name", NAMES)
def test_each_kind_is_found_where_it_happens_and_nowhere_else(scenario_findings, name):
    """each scenario with a bug gets a finding of its kind, at a line of the scenario; each fixed twin gets none"""
    _, by_test, _ = scenario_findings
    found = by_test.get(name, [])
    shown = "\n".join(f"  {f['code']} {f['message'][:200]} at {f['where'][:2]}" for f in found) or "  none"
    if name.startswith("test_LG"):
        code = name.split("_")[1]
        assert [f["code"] for f in found] == [code], (
            f"expected exactly one {code} {KINDS[code].name} finding in {name}, found:\n{shown}")
        assert any("test_scenarios.py:" in w or w.startswith("<string>") for w in found[0]["where"]), (
            f"expected the {code} finding to point at a line of the scenario, it points at {found[0]['where']}")
    else:
        assert not found, f"expected no finding in {name}, a fixed twin, found:\n{shown}"


def test_warn_mode_reports_and_fails_nothing_and_leaves_nothing_behind(scenario_findings):
    """in warn mode every scenario still passes, the summary names the findings, and no temporary folder is left"""
    ran, _, left = scenario_findings
    assert ran.returncode == 0, f"expected every scenario to pass in warn mode, it exited {ran.returncode}:\n" \
                                f"{ran.stdout[-3000:]}"
    assert "loopkata guard: " in ran.stdout and "LG01 cross-loop-use" in ran.stdout, (
        f"expected the run's summary to count the findings by kind, it ends:\n{ran.stdout[-1500:]}")
    assert not left, f"expected the guard to remove its shared folder, left in TMPDIR: {left}"


BUGGY = '''
import asyncio
LOCK = asyncio.Lock()

async def use():
    async with LOCK:
        pass

def test_two_invocations():
    asyncio.run(use())
    asyncio.run(use())

def test_nothing_wrong():
    asyncio.run(asyncio.sleep(0))
'''


def test_a_finding_fails_the_test_it_happened_in(tmp_path):
    """by default a finding fails its test, with the kind, the line and the kata that teaches it"""
    (tmp_path / "test_app.py").write_text(BUGGY)
    ran = guarded_pytest(tmp_path, "test_app.py")
    assert ran.returncode == 1, f"expected the run to fail, it exited {ran.returncode}:\n{ran.stdout[-2000:]}"
    assert "1 failed, 1 passed" in ran.stdout, f"expected one test to fail and one to pass:\n{ran.stdout[-2000:]}"
    assert "FAILED test_app.py::test_two_invocations" in ran.stdout
    assert "LG01 cross-loop-use: asyncio.Lock made at test_app.py:3" in ran.stdout, (
        f"expected the failure to name LG01 and the line that made the lock:\n{ran.stdout[-3000:]}")
    assert "kata 01" in ran.stdout, f"expected the failure to name the kata that teaches it:\n{ran.stdout[-3000:]}"


def test_settings_in_pyproject_select_and_ignore(tmp_path):
    """[tool.loopkata.guard] in pyproject.toml is read: an ignored kind finds nothing"""
    (tmp_path / "test_app.py").write_text(BUGGY)
    (tmp_path / "pyproject.toml").write_text('[tool.loopkata.guard]\nignore = ["cross-loop-use"]\n')
    ran = guarded_pytest(tmp_path, "test_app.py")
    assert ran.returncode == 0, f"expected LG01 to be ignored and both tests to pass:\n{ran.stdout[-2000:]}"
    assert "loopkata guard: no findings" in ran.stdout


def test_a_marker_ignores_a_kind_in_one_test(tmp_path):
    """@pytest.mark.loopkata_guard_ignore("LG01") keeps that kind out of one test"""
    (tmp_path / "test_app.py").write_text(BUGGY.replace(
        "def test_two_invocations", "import pytest\n@pytest.mark.loopkata_guard_ignore('LG01')\ndef test_two_invocations"))
    ran = guarded_pytest(tmp_path, "test_app.py")
    assert ran.returncode == 0, f"expected the marker to keep LG01 out of that test:\n{ran.stdout[-2000:]}"


@pytest.mark.parametrize("table, says", [
    ('select = ["LG99"]', "select names 'LG99', which is no kind of finding"),
    ('block-threshold-ms = "soon"', "block-threshold-ms must be a number of milliseconds"),
    ('mode = "loud"', 'mode must be "fail" or "warn"'),
    ('colour = "red"', "unknown setting 'colour'"),
    ('select = [', "pyproject.toml: Invalid value"),  # pytest reads the file first, and says so in one line
])
def test_a_setting_that_cannot_be_used_is_one_line(tmp_path, table, says):
    """a wrong setting stops the run with one line that names it, never a traceback"""
    (tmp_path / "test_app.py").write_text(BUGGY)
    (tmp_path / "pyproject.toml").write_text(f"[tool.loopkata.guard]\n{table}\n")
    ran = guarded_pytest(tmp_path, "test_app.py")
    out = ran.stdout + ran.stderr
    assert ran.returncode == 4, f"expected pytest's usage error (4), got {ran.returncode}:\n{out[-2000:]}"
    assert says in out, f"expected the error to say {says!r}:\n{out[-2000:]}"
    assert "Traceback" not in out, f"expected one line, not a traceback:\n{out[-2000:]}"


@pytest.mark.parametrize("pyproject, says", [
    ("[tool]\nloopkata = 3\n", "[tool.loopkata] must be a table, not 3"),
    ("[tool.loopkata]\nguard = [1]\n", "[tool.loopkata.guard] must be a table, not [1]"),
])
def test_a_pyproject_of_the_wrong_shape_is_one_line(tmp_path, pyproject, says):
    """a [tool.loopkata] that is not a table stops the run, and the wrapper, with one line"""
    (tmp_path / "test_app.py").write_text(BUGGY)
    (tmp_path / "pyproject.toml").write_text(pyproject)
    ran = guarded_pytest(tmp_path, "test_app.py")
    out = ran.stdout + ran.stderr
    assert ran.returncode == 4 and says in out and "Traceback" not in out, (
        f"expected pytest's usage error (4) and the line {says!r}, got {ran.returncode}:\n{out[-2000:]}")
    wrapped = loopkata("guard", "--", sys.executable, "-c", "pass", cwd=tmp_path)
    assert wrapped.returncode == 2 and says in wrapped.stdout and "Traceback" not in wrapped.stderr, (
        f"expected the wrapper to exit 2 with {says!r}, got {wrapped.returncode}:\n{wrapped.stdout}{wrapped.stderr}")


def test_a_report_that_cannot_be_written_is_said_before_the_run(tmp_path):
    """a report path that is a folder, or under a file, is one line before any test runs, in both tools"""
    (tmp_path / "test_app.py").write_text("def test_runs():\n    open('ran', 'w').close()\n")
    (tmp_path / "a_file").write_text("")
    (tmp_path / "reports_folder").mkdir()
    for path in ("reports_folder", "a_file/report.json"):
        ran = guarded_pytest(tmp_path, f"--loopkata-guard-report={path}", "test_app.py")
        out = ran.stdout + ran.stderr
        assert ran.returncode == 4 and "cannot write the report to" in out and "Traceback" not in out, (
            f"expected one line and status 4 for the report path {path}, got {ran.returncode}:\n{out[-2000:]}")
        assert not (tmp_path / "ran").exists(), "expected no test to run before the report path was refused"
        wrapped = loopkata("guard", "--report", path, "--", sys.executable, "-c", "open('ran', 'w').close()",
                           cwd=tmp_path)
        assert wrapped.returncode == 2 and "cannot write the report to" in wrapped.stdout, (
            f"expected the wrapper to refuse {path} with status 2:\n{wrapped.stdout}{wrapped.stderr}")
        assert not (tmp_path / "ran").exists(), "expected the wrapper not to start the program"


def assert_refused_in_one_line(ran, status: int, says: str, what: str) -> None:
    """`ran` exited `status` with one short line saying `says`, and neither a traceback nor an INTERNALERROR."""
    out = ran.stdout + ran.stderr
    said = [line for line in out.splitlines() if says in line]
    assert ran.returncode == status and said and "Traceback" not in out and "INTERNALERROR" not in out, (
        f"expected {what} to exit {status} with one line saying {says!r}, got {ran.returncode}:\n{out[-2000:]}")
    assert len(said[0]) < 400, f"expected a line a person can read, got one of {len(said[0])} characters"


def test_a_pyproject_nested_2000_deep_is_one_line_in_both_tools(tmp_path):
    """[tool.loopkata.guard] holding arrays nested 2,000 deep: one line and no test run, never a RecursionError"""
    (tmp_path / "pyproject.toml").write_text("[tool.loopkata.guard]\nselect = " + "[" * 2000 + "]" * 2000 + "\n")
    # the suite in a folder with a pytest.ini: pytest takes its settings from there and leaves the
    # pyproject.toml above to the guard (pytest's own reading of a pyproject.toml is pytest's)
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\n")
    (suite / "test_app.py").write_text("def test_runs():\n    open('ran', 'w').close()\n")
    ran = guarded_pytest(suite, "test_app.py")
    assert_refused_in_one_line(ran, 4, "nested too deep", "pytest -p loopkata.guard")
    wrapped = loopkata("guard", "--", sys.executable, "-c", "open('ran', 'w').close()", cwd=suite)
    assert_refused_in_one_line(wrapped, 2, "nested too deep", "loopkata guard")
    assert not (suite / "ran").exists(), "expected neither tool to run anything with settings it cannot read"


def test_a_report_path_with_a_nul_byte_or_a_5000_byte_name_is_one_line_in_both_tools(tmp_path):
    """report = "a\\u0000b.json" in pyproject.toml, or a 5,000-byte name on the command line: one short line each"""
    (tmp_path / "test_app.py").write_text("def test_runs():\n    open('ran', 'w').close()\n")
    (tmp_path / "pyproject.toml").write_text('[tool.loopkata.guard]\nreport = "a\\u0000b.json"\n')
    ran = guarded_pytest(tmp_path, "test_app.py")
    assert_refused_in_one_line(ran, 4, "NUL byte", "pytest -p loopkata.guard with a NUL byte in the report path")
    wrapped = loopkata("guard", "--", sys.executable, "-c", "open('ran', 'w').close()", cwd=tmp_path)
    assert_refused_in_one_line(wrapped, 2, "NUL byte", "loopkata guard with a NUL byte in the report path")
    (tmp_path / "pyproject.toml").unlink()
    long_name = "r" * 5000 + ".json"
    ran = guarded_pytest(tmp_path, f"--loopkata-guard-report={long_name}", "test_app.py")
    assert_refused_in_one_line(ran, 4, "File name too long", "pytest -p loopkata.guard with a 5,000-byte report name")
    wrapped = loopkata("guard", "--report", long_name, "--", sys.executable, "-c", "open('ran', 'w').close()",
                       cwd=tmp_path)
    assert_refused_in_one_line(wrapped, 2, "File name too long", "loopkata guard with a 5,000-byte report name")
    assert not (tmp_path / "ran").exists(), "expected no test and no program to run"


def test_a_report_path_that_is_a_fifo_is_refused_and_left_as_it_is(tmp_path):
    """a report path that is a FIFO, or a link to one (as /dev/null is a device), is refused and never replaced"""
    (tmp_path / "test_app.py").write_text("def test_runs():\n    open('ran', 'w').close()\n")
    os.mkfifo(tmp_path / "report.fifo")
    (tmp_path / "link.json").symlink_to("report.fifo")
    for path in ("report.fifo", "link.json"):
        ran = guarded_pytest(tmp_path, f"--loopkata-guard-report={path}", "test_app.py")
        assert_refused_in_one_line(ran, 4, "not a regular file", f"pytest -p loopkata.guard with the report {path}")
        wrapped = loopkata("guard", "--report", path, "--", sys.executable, "-c", "open('ran', 'w').close()",
                           cwd=tmp_path)
        assert_refused_in_one_line(wrapped, 2, "not a regular file", f"loopkata guard with the report {path}")
    assert stat.S_ISFIFO(os.lstat(tmp_path / "report.fifo").st_mode), "expected report.fifo to be a FIFO still"
    assert os.readlink(tmp_path / "link.json") == "report.fifo", "expected link.json to link to the FIFO still"
    assert not (tmp_path / "ran").exists(), "expected no test and no program to run"


def test_a_suite_that_crashes_keeps_the_findings_so_far(tmp_path):
    """the report is written as findings come: a suite that dies later keeps them, marked incomplete"""
    (tmp_path / "test_app.py").write_text(BUGGY + "\ndef test_zz_crash():\n    import os\n    os._exit(70)\n")
    ran = guarded_pytest(tmp_path, "--loopkata-guard-report=guard.json", "-p", "no:randomly", "test_app.py")
    assert ran.returncode == 70, f"expected the suite to die with status 70, got {ran.returncode}"
    written = json.loads((tmp_path / "guard.json").read_text())
    assert written["complete"] is False and written["counts"] == {"LG01": 1}, (
        f"expected an incomplete report holding the LG01 found before the crash, got {written}")


def test_the_notebooks_view_of_a_crashed_run_names_the_signal_and_what_was_found(tmp_path, capsys):
    """a guarded case that segfaults is shown as its signal, then with what the guard found before it"""
    case = tmp_path / "test_case.py"
    case.write_text(BUGGY + "\ndef test_zz_crash():\n    import os, signal\n    os.kill(os.getpid(), signal.SIGSEGV)\n")
    impl = tmp_path / "impl.py"
    impl.write_text("")
    show_guarded(case, impl, deadline=120)
    out = capsys.readouterr().out
    assert "was ended by SIGSEGV" in out and "LG01 cross-loop-use" in out, (
        f"expected the signal and the LG01 found before it, the view printed:\n{out}")


def test_a_suite_run_by_pytest_xdist_reports_every_workers_findings(tmp_path):
    """with `-n 2` the summary and the report hold what every worker found, not the controller's nothing"""
    (tmp_path / "test_app.py").write_text(BUGGY)
    (tmp_path / "test_other.py").write_text(BUGGY.replace("test_two_invocations", "test_two_more"))
    ran = guarded_pytest(tmp_path, "-n", "2", "--loopkata-guard-report=guard.json", "test_app.py", "test_other.py")
    assert ran.returncode == 1 and "2 failed, 2 passed" in ran.stdout, (
        f"expected each buggy test to fail on its worker:\n{ran.stdout[-2000:]}")
    assert "loopkata guard: 2 LG01 cross-loop-use" in ran.stdout, (
        f"expected the controller's summary to count both workers' findings:\n{ran.stdout[-2000:]}")
    written = json.loads((tmp_path / "guard.json").read_text())
    assert written["complete"] is True and written["tests"] == 4 and written["counts"] == {"LG01": 2}, (
        f"expected a complete report of 4 tests and 2 LG01 findings, got {written}")
    assert "Module already imported" not in ran.stdout, "expected each worker to load the guard once"


PROGRAM = '''
import asyncio

async def write():
    await asyncio.sleep(1)

async def handler():
    asyncio.create_task(write())

asyncio.run(handler())
'''


def loopkata(*args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "loopkata", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=False, env={**os.environ, "TMPDIR": str(cwd)})


def test_the_wrapper_guards_a_program(tmp_path):
    """`loopkata guard -- python prog.py` prints the finding with its line and exits 1; --warn exits 0"""
    (tmp_path / "prog.py").write_text(PROGRAM)
    ran = loopkata("guard", "--", sys.executable, "prog.py", cwd=tmp_path)
    assert ran.returncode == 1, f"expected exit status 1 for a finding, got {ran.returncode}:\n{ran.stderr[-2000:]}"
    assert "LG03 pending-task-lost" in ran.stderr and "prog.py:8 in handler" in ran.stderr, (
        f"expected LG03 at the line that made the task, prog.py:8:\n{ran.stderr[-2000:]}")
    warned = loopkata("guard", "--warn", "--", sys.executable, "prog.py", cwd=tmp_path)
    assert warned.returncode == 0, f"expected --warn to exit 0, got {warned.returncode}:\n{warned.stderr[-2000:]}"
    assert not list(tmp_path.glob("loopkata-guard-*")), "expected the wrapper to remove its shared folder"


def test_the_wrapper_passes_on_the_programs_own_status(tmp_path):
    """a program that fails keeps its exit status; a missing program or command is one line"""
    failing = loopkata("guard", "--", sys.executable, "-c", "raise SystemExit(3)", cwd=tmp_path)
    assert failing.returncode == 3, f"expected the program's own status 3, got {failing.returncode}"
    missing = loopkata("guard", "--", "no-such-program-here", cwd=tmp_path)
    assert missing.returncode == 127 and "cannot start no-such-program-here" in missing.stdout, (
        f"expected one line and status 127, got {missing.returncode}:\n{missing.stdout}{missing.stderr}")
    nothing = loopkata("guard", cwd=tmp_path)
    assert nothing.returncode == 2 and "name the program to run after --" in nothing.stdout


def test_a_child_python_without_loopkata_says_it_runs_unguarded(tmp_path):
    """a child process whose Python cannot import loopkata says so in one line, and runs"""
    env = {**os.environ, "PYTHONNOUSERSITE": "1"}
    boot = ROOT / "src" / "loopkata" / "guard" / "boot"
    env.update({"PYTHONPATH": str(boot), "LOOPKATA_GUARD_CHILD": json.dumps({"settings": {}, "share": str(tmp_path)})})
    ran = subprocess.run([sys.executable, "-I", "-c", "print('ran')"], env=env, capture_output=True, text=True,
                         timeout=60, check=False)  # -I: no PYTHONPATH, as a foreign interpreter would be
    assert ran.stdout.strip() == "ran", f"expected the child to run, it said {ran.stdout!r} {ran.stderr!r}"
    bare = subprocess.run([sys.executable, "-S", "-c", textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(boot)!r}); sys.modules['loopkata'] = None
        import sitecustomize
        print('ran')""")], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert "ran" in bare.stdout and "cannot import loopkata" in bare.stderr and "Traceback" not in bare.stderr, (
        f"expected one line saying the child runs unguarded, got:\n{bare.stdout}{bare.stderr}")


SUITE_WITH_ITS_OWN_WAYS = '''
import asyncio, gc, weakref
from unittest import mock

LOCK = asyncio.Lock()

async def use():
    async with LOCK:
        pass

def test_two_invocations_under_filterwarnings_error():
    asyncio.run(use())
    asyncio.run(use())

class Payload:
    pass

async def fails(payload):
    raise ValueError("no")

def test_gathered_exceptions_are_not_kept_alive_by_the_guard():
    payload = Payload()
    alive = weakref.ref(payload)

    async def main():
        return await asyncio.gather(fails(payload), return_exceptions=True)

    results = asyncio.run(main())
    del results, payload
    gc.collect()
    assert alive() is None, "the guard kept the exception, its traceback and the test's object alive"

async def fresh_lock():
    async with asyncio.Lock():
        pass

def test_the_guard_does_not_call_a_loops_methods_a_test_counts():
    loop = asyncio.new_event_loop()
    with mock.patch.object(loop, "is_closed", side_effect=AssertionError("is_closed() called")):
        loop.run_until_complete(fresh_lock())  # its first use: the guard notes the loop and asks it nothing
    loop.close()
'''


def test_a_suite_with_filterwarnings_error_and_leak_checks_runs_as_before(tmp_path):
    """warn mode never turns into an error under a suite's `filterwarnings = error`, and holds none of its objects"""
    (tmp_path / "test_own.py").write_text(SUITE_WITH_ITS_OWN_WAYS)
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\nfilterwarnings = ["error"]\n')
    ran = guarded_pytest(tmp_path, "--loopkata-guard=warn", "test_own.py")
    assert ran.returncode == 0 and "INTERNALERROR" not in ran.stdout, (
        f"expected the suite to pass in warn mode, with its findings listed; it exited {ran.returncode}:\n"
        f"{ran.stdout[-3000:]}")
    assert "loopkata guard findings (warn mode" in ran.stdout and "LG01 cross-loop-use" in ran.stdout


def test_the_report_is_not_written_through_a_link_planted_beside_it(tmp_path):
    """a link planted where the report's temporary file would go is not followed: its target keeps its content"""
    from loopkata.guard import report

    target = tmp_path / "someone_elses_file"
    target.write_text("unchanged\n")
    path = tmp_path / "report.json"
    for pid in {os.getpid(), os.getpid() + 1}:  # the name a temporary file named after the pid would take
        (tmp_path / f".{path.name}.{pid}.partial").symlink_to(target)
    report.write_json(path, [], "defaults", tests=0)
    assert target.read_text() == "unchanged\n", "the report was written through a planted link"
    assert json.loads(path.read_text())["findings"] == []


def plain_pytest(folder: Path, *args, timeout=240) -> subprocess.CompletedProcess:
    """The same pytest as `guarded_pytest`, without the guard: what the team's run says without it."""
    tmp = folder / "tmp"
    tmp.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:nbval", "-o", "addopts=",
                           "-q", *args], cwd=folder, env={**os.environ, "TMPDIR": str(tmp)}, capture_output=True,
                          text=True, timeout=timeout, check=False)


FACES = '''
import asyncio, inspect, json, sys
from loopkata.guard.config import Settings
from loopkata.guard.core import Guard

ASKED = {
    "inspect.iscoroutinefunction": inspect.iscoroutinefunction,
    "asyncio.iscoroutinefunction": asyncio.iscoroutinefunction,
    "inspect.signature": lambda f: str(inspect.signature(f)),
    "inspect.unwrap": lambda f: (type(inspect.unwrap(f)).__name__, inspect.unwrap(f).__qualname__,
                                 str(inspect.signature(inspect.unwrap(f)))),
    "__wrapped__": lambda f: hasattr(f, "__wrapped__"),
    "__name__": lambda f: f.__name__,
    "__qualname__": lambda f: f.__qualname__,
    "__module__": lambda f: f.__module__,
    "__doc__": lambda f: f.__doc__,
}


def answers(f):
    out = {}
    for question, ask in ASKED.items():
        try:
            out[question] = repr(ask(f))
        except Exception as exc:
            out[question] = f"raises {type(exc).__name__}"
    return out


def faces(replaced):
    """What introspection says of each replaced attribute, on its owner and, for a class, on an instance."""
    out = {}
    for owner, name in replaced:
        label = f"{getattr(owner, '__qualname__', getattr(owner, '__name__', owner))}.{name}"
        if not hasattr(owner, name):
            continue
        out[label] = answers(getattr(owner, name))
        if isinstance(owner, type):
            try:
                instance = owner.__new__(owner)
            except Exception:
                continue
            try:
                out[label + " (on an instance)"] = answers(getattr(instance, name))
            except Exception:
                pass
    return out


guard = Guard(Settings())
guard.install()
replaced = [(owner, name) for owner, name, _ in guard.patches._undo]
guarded = faces(replaced)
guard.uninstall()
plain = faces(replaced)
json.dump({"plain": plain, "guarded": guarded}, sys.stdout)
'''


def test_every_callable_the_guard_replaces_looks_the_same_to_introspection(tmp_path):
    """Queue.put, Lock.acquire, wait_for and every other callable the guard wraps answer iscoroutinefunction,
    signature, unwrap and their names exactly as they do without the guard"""
    ran = subprocess.run([sys.executable, "-c", FACES], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         check=False)
    assert ran.returncode == 0, f"expected the probe to run, it said:\n{ran.stderr[-3000:]}"
    seen = json.loads(ran.stdout)
    assert len(seen["plain"]) >= 20, f"expected the probe to see the guard's replacements, it saw {list(seen['plain'])}"
    differ = [f"{label}: {question} is {plain} without the guard, {seen['guarded'][label][question]} with it"
              for label, answers in seen["plain"].items() for question, plain in answers.items()
              if seen["guarded"].get(label, {}).get(question) != plain]
    assert not differ, "expected introspection to see what it sees without the guard; it differs in:\n  " + \
        "\n  ".join(differ)


DISPATCHER = '''
import asyncio, inspect, threading


async def call(f, *args):
    """As a library calls a callback it was handed: awaited when it is a coroutine function, called when not."""
    return await f(*args) if inspect.iscoroutinefunction(f) else f(*args)


async def main():
    queue = asyncio.Queue()
    await call(queue.put, 1)
    await call(queue.put_nowait, 2)
    assert await call(queue.get) == 1
    assert await call(queue.get_nowait) == 2
    await call(queue.task_done)
    await call(queue.task_done)
    await call(queue.join)
    lock, sem, event, condition = asyncio.Lock(), asyncio.Semaphore(), asyncio.Event(), asyncio.Condition()
    assert await call(lock.acquire) is True
    await call(lock.release)
    assert await call(sem.acquire) is True
    await call(sem.release)
    await call(event.set)
    assert await call(event.wait) is True
    await call(condition.acquire)
    await call(condition.notify_all)
    condition.release()
    assert await call(asyncio.wait_for, asyncio.sleep(0, "slept"), 1) == "slept"
    if hasattr(asyncio, "Barrier"):
        assert await call(asyncio.Barrier(1).wait) == 0


def test_a_library_that_dispatches_on_iscoroutinefunction_uses_every_primitive():
    asyncio.run(main())


class Store:
    make_lock = threading.Lock  # a builtin kept on a class is not bound: called with no argument


def test_a_lock_factory_kept_on_a_class_is_called_as_it_is():
    with Store().make_lock():
        pass
'''


def test_a_library_dispatching_on_iscoroutinefunction_passes_guarded_as_it_does_plain(tmp_path):
    """a test that awaits a callback only when iscoroutinefunction says so passes with the guard as without it"""
    (tmp_path / "test_dispatch.py").write_text(DISPATCHER)
    plain = plain_pytest(tmp_path, "test_dispatch.py")
    assert plain.returncode == 0, f"expected the test to pass without the guard:\n{plain.stdout[-2000:]}"
    guarded = guarded_pytest(tmp_path, "test_dispatch.py")
    assert guarded.returncode == 0, (
        f"expected the test to pass under the guard as it does without it; it exited {guarded.returncode}:\n"
        f"{guarded.stdout[-3000:]}")


LOGS = '''
import logging

log = logging.getLogger("pricing")


def warn_for(caller):
    log.warning("quote for %s is stale", caller, stacklevel=2)  # the record names the helper's caller


def test_a_record_names_the_line_that_logged_it(caplog):
    log.warning("quote is stale"); line = 12
    log.error("quote failed", exc_info=ValueError("no price")); again = 13
    warn_for("basket"); helped = 14
    places = [(r.filename, r.lineno, r.funcName) for r in caplog.records]
    me = "test_a_record_names_the_line_that_logged_it"
    assert places == [("test_logs.py", line, me), ("test_logs.py", again, me), ("test_logs.py", helped, me)], places
'''


def test_log_records_keep_the_file_line_and_function_that_logged_them(tmp_path):
    """a record logged from a test says the test's file, line and function with the guard, as without it"""
    (tmp_path / "test_logs.py").write_text(LOGS)
    plain = plain_pytest(tmp_path, "test_logs.py")
    assert plain.returncode == 0, f"expected the test to pass without the guard:\n{plain.stdout[-2000:]}"
    guarded = guarded_pytest(tmp_path, "test_logs.py")
    assert guarded.returncode == 0, (
        f"expected each record to name the test's own line under the guard, as without it; it exited "
        f"{guarded.returncode}:\n{guarded.stdout[-3000:]}")


SHORT_TESTS = '''
import asyncio, gc, json, pytest

FULL = []
gc.callbacks.append(lambda phase, info: FULL.append(1) if phase == "start" and info["generation"] == 2 else None)


async def numbers():
    yield 1
    yield 2


class Cycle:
    pass


async def first_number():
    gen = numbers()
    box = Cycle()
    box.gen, box.me = gen, box  # the generator in a reference cycle: it keeps the loop's finalizer hook alive
    return await anext(gen)


@pytest.mark.parametrize("n", range(40))
def test_short(n):
    assert asyncio.run(first_number()) == 1


def test_zz_count():
    with open("full_collections.json", "w") as f:
        json.dump(len(FULL), f)
'''


def test_a_suite_of_short_tests_pays_no_full_collection_per_test(tmp_path):
    """forty short tests, each leaving its loop to young garbage (an async generator in a cycle): the guard
    finds each loop gone by collecting the young generations, not the whole heap after every test"""
    (tmp_path / "test_short.py").write_text(SHORT_TESTS)
    counts = {}
    for mode, run in (("plain", plain_pytest), ("guarded", guarded_pytest)):
        ran = run(tmp_path, "-p", "no:randomly", "test_short.py")
        assert ran.returncode == 0, f"expected the suite to pass {mode}:\n{ran.stdout[-2000:]}"
        counts[mode] = json.loads((tmp_path / "full_collections.json").read_text())
    assert counts["guarded"] - counts["plain"] <= 10, (
        f"expected the guard to collect the whole heap after at most one test in four (a loop whose garbage "
        f"grew old during its test), it did after {counts['guarded'] - counts['plain']} of 40 "
        f"(the suite made {counts['plain']} full collections plain)")
