"""Grades an implementation: runs a kata's hidden tests in a subprocess with a hard timeout.

The tests never run in the caller's process (a notebook kernel already runs an
event loop, and a hung or crashing kata must not wedge it). If the child is
still running when the kata's budget is spent, it is killed and the test it
was in becomes a "hang", with every thread's stack as dumped just before (loopkata.grading.stackdump).
"""
from __future__ import annotations

import ast
import json
import os
import re
import signal
import subprocess
import sys
import sysconfig
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import services
from ..model import alternatives, catalogue
from ..services import containers
from ..model.catalogue import Kata
from ..model.difference import DifferenceError
from ..model.starters import StarterUnavailable
from ..model.paths import display_path
from .cpu_wait import stretch_cap
from .frames import describe_frames
from .impl_checks import impl_problem, syntax_problem
from .repro import plain_env
from . import scratch

PASSED, FAILED, HANG, ERROR, NOT_RUN = "passed", "failed", "hang", "error", "not run"
# A test that needs a kernel mechanism this machine lacks (services.containers): when nothing
# failed, the check says so instead of "solved", since the fallback cannot see every bug.
COULD_NOT_RUN, NOT_HERE = "could not run", "could not run here"
OUTPUT_KEPT = 1 << 20  # bytes of the head, and of the tail, of a check's output
NO_REPORT, SKIPPED = "did not report", "skipped"


@dataclass
class TestResult:
    name: str
    title: str
    outcome: str = NOT_RUN
    message: str = ""
    where: str = ""
    stacks: str = ""


@dataclass
class CheckResult:
    kata: str
    impl: str
    verdict: str
    tests: list[TestResult] = field(default_factory=list)
    problem: str = ""
    seconds: float = 0.0
    notice: str = ""  # said after the tests: e.g. processes the code under test left running
    waited_for_cpu: float = 0.0  # seconds the budget was moved back: a busy machine kept the check waiting for a CPU

    @property
    def passed(self) -> bool:
        return self.verdict == PASSED

    @property
    def failures(self) -> list[TestResult]:
        return [t for t in self.tests if t.outcome != PASSED]  # a skip is not a pass

    def failure_text(self) -> str:
        """Everything a hint's `when` pattern may match: the problem, each failure's outcome, message and stacks."""
        # Titles are left out: a title names what is tested, not what went wrong.
        parts = [self.problem] + [f"{t.outcome}: {t.message}\n{t.stacks}".rstrip() for t in self.failures]
        return "\n".join(p for p in parts if p)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "CheckResult":
        tests = [TestResult(**t) for t in data.get("tests", [])]
        return cls(**{**data, "tests": tests})


def expected_tests(kata: Kata) -> dict[str, str]:
    """The hidden tests of `kata`, name -> title, read from the tests file without running it.

    The grader knows what must be reported before the child starts, so a test
    whose result never arrives is "did not report", never silently absent.
    """
    tree = ast.parse(kata.tests_path.read_bytes(), filename=str(kata.tests_path))
    found = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            doc = (ast.get_docstring(node) or "").strip()
            found[node.name] = doc.splitlines()[0].strip() if doc else node.name.removeprefix("test_").replace("_", " ")
    return found


_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')


def _dumped_stacks(text: str, impl: Path) -> str:
    """The stack dump (faulthandler's layout), one block per thread, trimmed to the learner's files."""
    blocks = re.split(r"\n(?=Thread 0x|Current thread 0x)", text.strip())
    out = []
    for block in blocks:
        frames = [(m["file"], int(m["line"]), m["func"]) for m in _FRAME.finditer(block)]
        frames.reverse()  # the dump prints the innermost frame first
        learner = describe_frames(frames, fallback=False, root=impl)
        if learner:  # threads of the grader itself have no frame of the learner's
            out.append("a thread is stuck at")
            out += [f"    {line}" for line in learner]
    return "\n".join(out)


def _read_records(fd: int) -> list[dict]:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    records = []
    for line in b"".join(chunks).decode("utf-8", errors="replace").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut short by the kill
    return records


def _contents(impl: Path) -> dict[str, bytes]:
    """What the implementation's files hold now, relative path -> bytes (a difference: its own file)."""
    if impl.is_dir():
        return {str(f.relative_to(impl)): f.read_bytes() for f in catalogue.files_of(impl)}
    return {impl.name: impl.read_bytes()} if impl.is_file() else {}


def _snapshot(kata: Kata, impl: Path, tmp: Path) -> tuple[Path, dict[str, str], dict[str, bytes]]:
    """Copy the implementation aside and grade the copy: a file saved while the check
    runs cannot give a mix of two versions. A difference (a decoy's or a variant's .diff)
    is built from its base into the copy, once.

    Returns the copy to grade, how to name each copied file after the file it came
    from (so messages never show a temporary path), and what the sources held.
    """
    names, unchanged = {}, set()
    if alternatives.is_difference(impl):
        held = _contents(impl)  # the difference itself: a change to it while the check runs grades it again
        copy = alternatives.target_in(kata, impl, tmp / "impl")
        base = alternatives.base_path(kata, alternatives.read(kata, impl))
        built, original = alternatives.built_from_base(kata, impl)  # DifferenceError: it does not apply
        files = {(copy / rel if base.is_dir() else copy): (text.encode("utf-8"), base / rel if base.is_dir() else base)
                 for rel, text in built.items()}
        unchanged = {copy / rel if base.is_dir() else copy for rel, text in built.items() if original.get(rel) == text}
    else:
        copy = tmp / "impl" / impl.name
        files = {(copy / f.relative_to(impl) if impl.is_dir() else copy): (f.read_bytes(), f)
                 for f in catalogue.files_of(impl)}
        held = {str(f.relative_to(impl)) if impl.is_dir() else f.name: data for data, f in files.values()}
    for target, (data, f) in files.items():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        if f != impl and impl not in f.parents:  # built from a base: named after the base's file it keeps
            if target not in unchanged:  # a file the difference changes exists nowhere but in the check
                shown = f"<{alternatives.label(kata, impl)}>/{target.relative_to(copy) if target != copy else f.name}"
                names.update(dict.fromkeys((os.path.relpath(target, kata.root), display_path(target), str(target)), shown))
                continue
            starter = kata.kata_path / f.relative_to(kata.solution_path) if kata.solution_path in f.parents else None
            if starter is not None and _same_file(starter, data):
                f = starter  # a reference file the starter ships unchanged: named as the learner knows it
        # the child names files relative to the project, this process relative to its cwd
        names[os.path.relpath(target, kata.root)] = os.path.relpath(f, kata.root)
        names[display_path(target)] = display_path(f)
        names[str(target)] = os.path.relpath(f, kata.root) if kata.root in f.resolve().parents else str(f)
    # A message quoting a repr (an asyncio Task's "running at FILE") names library files by
    # where this machine keeps them; say which library instead.
    for key, shown in (("purelib", "<site-packages>"), ("stdlib", "<python>")):
        names[sysconfig.get_paths()[key]] = shown
    # The project's own files (the hidden tests and their scenarios) by their place in it.
    names[str(kata.root.resolve()) + os.sep] = ""
    # The relative spelling of a copy contains its absolute one: replace the longer first.
    names = dict(sorted(names.items(), key=lambda kv: -len(kv[0])))
    return copy, names, held


def _same_file(path: Path, data: bytes) -> bool:
    return path.is_file() and path.read_bytes() == data


def _rename(text: str, names: dict[str, str]) -> str:
    for copied, original in names.items():
        text = text.replace(copied, original)
    return text


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _memory_cap(kata: Kata) -> int:
    return kata.memory_mib * 2**20


def _run_child(kata: Kata, graded: Path, tmp: Path, until_failed: bool) -> tuple[list[dict], str, str]:
    """Run the hidden tests on `graded` under the supervisor; (records, stacks, output)."""
    private_tmp = tmp / "tmp"
    private_tmp.mkdir()
    results_fd = os.open(tmp / "results.jsonl", os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
    stacks_fd = os.open(tmp / "stacks.txt", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        env = plain_env({
            "LOOPKATA_ROOT": str(kata.root),
            "LOOPKATA_RESULTS_FD": str(results_fd),
            "LOOPKATA_STACKS_FD": str(stacks_fd),
            "LOOPKATA_PASS_FDS": f"{results_fd},{stacks_fd}",
            "LOOPKATA_BUDGET": str(kata.budget_seconds),
            # the stacks are dumped half a second before the supervisor's deadline, which it
            # moves back by the time a busy machine keeps the check waiting for a CPU
            "LOOPKATA_DEADLINE": str(time.time() + kata.budget_seconds),
            "LOOPKATA_DEADLINE_FILE": str(tmp / "deadline"),
            "LOOPKATA_HANG_AFTER": str(kata.hang_after),
            "LOOPKATA_MEMORY": str(_memory_cap(kata)),
            # a temporary folder of the check's own, removed with everything in it when it ends
            "TMPDIR": str(private_tmp),
            "PYTHONDONTWRITEBYTECODE": "1",
            # Installed pytest plugins (nbval, anyio...) cost half a second to load and grade nothing.
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        })
        for stale in ("LOOPKATA_RESULTS", "LOOPKATA_STACKS", "LOOPKATA_IMPL", "LOOPKATA_UNTIL_FAILED"):
            env.pop(stale, None)
        if until_failed:
            env["LOOPKATA_UNTIL_FAILED"] = "1"
        pytest_cmd = [
            sys.executable, "-m", "pytest", str(kata.tests_path), "--impl", str(graded),
            "-p", "loopkata.grading.pytest_plugin", "-p", "no:cacheprovider",
            "-q", "--assert=plain", "-c", os.devnull, "--rootdir", str(kata.tests_path.parent),
            "--confcutdir", str(kata.tests_path.parent),
        ]
        # the supervisor removes `tmp` if this process dies before it can (SIGKILL)
        cmd = [sys.executable, "-I", "-S", str(Path(__file__).with_name("supervise.py")),
               str(kata.budget_seconds), str(_memory_cap(kata)), str(results_fd), str(tmp), "--", *pytest_cmd]
        # Output goes to a file, not a pipe: a process that escaped with the pipe's
        # write end must not keep the check waiting.
        with open(tmp / "output.txt", "w+b") as output:
            supervisor = subprocess.Popen(
                cmd, cwd=kata.root, env=env, stdout=output, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True, pass_fds=(results_fd, stacks_fd),
            )
            try:
                # The supervisor keeps the deadline; this wait is only a backstop.
                supervisor.wait(timeout=kata.budget_seconds * stretch_cap() + 10)
            except subprocess.TimeoutExpired:
                _stop(supervisor)
            except BaseException:  # Ctrl-C: stop the check and everything it started, then go
                _stop(supervisor)
                raise
            text = _bounded_text(output)
        records = _read_records(results_fd)
        os.lseek(stacks_fd, 0, os.SEEK_SET)
        stacks = os.read(stacks_fd, 1 << 20).decode(errors="replace")
    finally:
        os.close(results_fd)
        os.close(stacks_fd)
    return records, stacks, text


def _bounded_text(output) -> str:
    """The child's output, its head and tail only when it is long: a test that prints
    hundreds of megabytes must not take as much memory in the grader (a learner's kernel)."""
    size = output.seek(0, os.SEEK_END)
    output.seek(0)
    if size <= 2 * OUTPUT_KEPT:
        return output.read().decode(errors="replace")
    head = output.read(OUTPUT_KEPT)
    output.seek(size - OUTPUT_KEPT)
    tail = output.read(OUTPUT_KEPT)
    dropped = f"\n[... {size - 2 * OUTPUT_KEPT} bytes of output left out ...]\n"
    return head.decode(errors="replace") + dropped + tail.decode(errors="replace")


def _stop(supervisor: subprocess.Popen) -> None:
    """Ask the supervisor to kill everything under it; kill it too if it does not answer."""
    try:
        supervisor.send_signal(signal.SIGTERM)
        supervisor.wait(timeout=3)
    except subprocess.TimeoutExpired:
        os.killpg(supervisor.pid, signal.SIGKILL)
        supervisor.wait()
    except ProcessLookupError:
        pass


def _grade(kata: Kata, impl: Path, until_failed: bool) -> tuple[CheckResult, dict[str, bytes] | None]:
    """One grading run; the result and what the implementation's files held when it started."""
    result = CheckResult(kata=kata.id, impl=display_path(impl), verdict=ERROR)
    difference = alternatives.is_difference(impl)  # its files are read once built, below
    result.problem = impl_problem(impl) or (not difference and syntax_problem(impl)) or services.problem(kata.services)
    if result.problem:
        return result, None
    try:
        expected = expected_tests(kata)
    except (OSError, SyntaxError, ValueError) as exc:
        result.problem = f"The hidden tests of {kata.id} ({display_path(kata.tests_path)}) could not be read: {exc}."
        return result, None
    if not expected:
        result.problem = f"{display_path(kata.tests_path)} defines no test, so nothing can be graded."
        return result, None

    with scratch.check_folder() as tmp:
        try:
            graded, names, held = _snapshot(kata, impl, tmp)
        except DifferenceError as exc:
            result.problem = f"{exc}. Nothing was graded: the implementation could not be built from its base."
            return result, None
        except StarterUnavailable as exc:  # a difference from the starter, whose shipped copy is lost
            result.problem = f"{alternatives.label(kata, impl)} is a difference from the starter as shipped. {exc}"
            return result, None
        if difference and (problem := syntax_problem(graded)):
            result.problem = _rename(problem, names)
            return result, held
        records, stacks, output = _run_child(kata, graded, tmp, until_failed)
        stacks = _rename(_dumped_stacks(stacks, graded), names)  # reads the copy's lines
    result.tests = _results(kata, expected, records, stacks, names, output)
    ended = next((r for r in records if r.get("event") == "exit"), {})
    result.waited_for_cpu = float(ended.get("cpu_wait_allowed") or 0)
    if ended.get("left_behind"):
        n = ended["left_behind"]
        result.notice = (f"The code under test left {n} process{'es' if n > 1 else ''} running when the tests "
                         "ended; the grader stopped them.")
    if not any(r.get("event") == "collected" for r in records):
        tail = "\n".join(output.strip().splitlines()[-8:])
        result.problem = f"The hidden tests for {kata.id} could not be collected, so nothing was graded.\n{tail}"
        return result, held
    errors = [t for t in result.tests if t.outcome == ERROR]
    if errors and all(t.outcome in (ERROR, NOT_RUN, NO_REPORT) for t in result.tests):
        result.problem = errors[0].message
    elif any(t.outcome == HANG for t in result.tests):
        result.verdict = HANG
    elif any(t.outcome != COULD_NOT_RUN for t in result.failures):
        result.verdict = FAILED
    elif result.failures:
        result.verdict = NOT_HERE
        result.problem = result.failures[0].message
    else:
        result.verdict = PASSED
    return result, held


def _internal_error(output: str, records: list[dict]) -> str:
    """The exception of a pytest INTERNALERROR, or ''."""
    reported = [r["message"] for r in records if r.get("event") == "internalerror"]
    if reported:
        return f"INTERNALERROR {reported[-1]}"
    lines = [ln.removeprefix("INTERNALERROR>").strip() for ln in output.splitlines() if ln.startswith("INTERNALERROR>")]
    lines = [ln for ln in lines if ln]
    return f"INTERNALERROR {lines[-1]}" if lines else ""


def _results(kata: Kata, expected: dict[str, str], records: list[dict], stacks: str,
             names: dict[str, str], output: str) -> list[TestResult]:
    """Every expected test with its outcome; a test with no result says why it has none."""
    tests = {name: TestResult(name=name, title=title) for name, title in expected.items()}
    running, ended, interrupted, enough = None, {}, "", None
    for r in records:
        event = r.get("event")
        if event == "collected" and r["name"] not in tests:
            tests.pop(r["name"].split("[")[0], None)  # a parametrized test reports each case
            tests[r["name"]] = TestResult(name=r["name"], title=r["title"])
        elif event == "begin":
            running = r["name"]
        elif event == "result" and r.get("name") in tests:
            fields = {k: _rename(v, names) if isinstance(v, str) else v
                      for k, v in r.items() if k in TestResult.__dataclass_fields__}
            tests[r["name"]] = TestResult(**fields)
            running = None if running == r["name"] else running
        elif event == "enough":
            enough = r.get("after")
        elif event == "interrupted":
            interrupted = r.get("message", "KeyboardInterrupt")
        elif event == "exit":
            ended = r
    status = ended.get("status")
    crash = _internal_error(output, records)
    stuck = tests.get(running)
    if stuck is not None and stuck.outcome == NOT_RUN:
        if ended.get("stopped") == "timed out" or not ended:
            stuck.outcome, stuck.stacks = HANG, stacks
            waited = float(ended.get("cpu_wait_allowed") or 0)
            busy = (f" (and {waited:g} s more, the time a busy machine kept it waiting for a CPU)"
                    if waited >= 1 else "")
            stuck.message = f"The whole check ran out of its {kata.budget_seconds:g} s budget{busy} here: it is stuck."
        elif ended.get("stopped") == "memory":
            stuck.outcome = ERROR
            stuck.message = (
                f"The code under test and the processes it started held more than {_memory_cap(kata) / 2**30:g} GiB "
                f"of memory together while running '{stuck.title}' (the cap for one check), so the check stopped them."
            )
        elif crash:
            stuck.outcome = ERROR
            stuck.message = (
                f"pytest itself failed while running '{stuck.title}' ({crash}). Code under test that changes "
                "pytest or the interpreter while the tests run (monkeypatching, threads that keep logging) "
                "can cause this; check again, and if it happens every time, look for such code."
            )
        elif status is not None and status < 0:
            memory = " It was using more memory than the cap allows (MemoryError)." if "MemoryError" in output else ""
            stuck.outcome = ERROR
            stuck.message = (f"The test process crashed (signal {-status}, {_signal_name(-status)}) "
                             f"while running '{stuck.title}'.{memory}")
        elif interrupted:
            stuck.outcome = ERROR
            stuck.message = (f"The test process stopped with {interrupted} while running '{stuck.title}': "
                             "the code under test raised it or sent SIGINT.")
        else:
            stuck.outcome = ERROR
            stuck.message = (f"The test process exited with status {status} while running '{stuck.title}' "
                             "(os._exit, or pytest.exit, called by the code under test?).")
    why = f"the test process ended while running '{stuck.title}'" if stuck is not None else crash or (
        f"the test process ended (status {status}) before this test reported; "
        "did the code under test end it (os._exit, pytest.exit) or remove the test?"
    )
    if enough in tests and stuck is None:
        why = f"this check stopped at its first failure ('{tests[enough].title}' failed)"
    stopped = stuck is not None or enough in tests
    for t in tests.values():
        if t.outcome == NOT_RUN:
            t.outcome = NOT_RUN if stopped else NO_REPORT
            t.message = f"Did not run: {why}." if stopped else f"Did not report: {why}"
    return list(tests.values())


def sweep_leftovers() -> None:
    """Remove what checks killed with SIGKILL left: their cgroups and their temporary folders (with a copy of
    the code they graded). Only loopkata's own, and only those whose check has ended."""
    containers.sweep()
    scratch.sweep()


def check(kata: Kata, impl: Path | str | None = None, *, until_failed: bool = False) -> CheckResult:
    """Run `kata`'s hidden tests against `impl` (default: the learner's copy in katas/).

    With `until_failed`, the tests stop at the first that fails or hangs (the rest are
    "not run"): enough to prove that a wrong fix fails, in a fraction of the time.

    The files graded are the files as saved when the check began; if they
    change while it runs, it runs again on the new version (up to 3 times).
    """
    impl = Path(impl).resolve() if impl else kata.kata_path
    started = time.monotonic()
    sweep_leftovers()
    for _ in range(3):
        result, held = _grade(kata, impl, until_failed)
        try:
            if held is None or _contents(impl) == held:
                break
        except OSError:
            break
    result.seconds = round(time.monotonic() - started, 2)
    return result
