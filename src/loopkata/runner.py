"""Grades an implementation: runs a kata's hidden tests in a subprocess with a hard timeout.

The tests never run in the caller's process (a notebook kernel already runs an
event loop, and a hung or crashing kata must not wedge it). If the child is
still running when the kata's budget is spent, it is killed and the test it
was in becomes a "hang", with the stacks faulthandler wrote just before.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import services
from .catalogue import Kata
from .repro import plain_env
from .testing import describe_frames, display_path

PASSED, FAILED, HANG, ERROR, NOT_RUN = "passed", "failed", "hang", "error", "not run"


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

    @property
    def passed(self) -> bool:
        return self.verdict == PASSED

    @property
    def failures(self) -> list[TestResult]:
        return [t for t in self.tests if t.outcome not in (PASSED, "skipped")]

    def failure_text(self) -> str:
        """Everything a hint's `when` pattern may match: the problem and each failure."""
        parts = [self.problem] + [f"{t.outcome}: {t.title}: {t.message}" for t in self.failures]
        return "\n".join(p for p in parts if p)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "CheckResult":
        tests = [TestResult(**t) for t in data.get("tests", [])]
        return cls(**{**data, "tests": tests})


def syntax_problem(impl: Path) -> str:
    """A paragraph naming the first syntax error in the implementation, or ''."""
    files = sorted(impl.rglob("*.py")) if impl.is_dir() else [impl]
    for f in files:
        try:
            source = f.read_text(encoding="utf-8")
        except OSError as exc:
            return f"Could not read {display_path(f)}: {exc.strerror}."
        try:
            compile(source, str(f), "exec")
        except SyntaxError as exc:
            line = (exc.text or "").rstrip()
            shown = f"\n    {line.strip()}" if line else ""
            return (
                f"{display_path(f)} has a syntax error on line {exc.lineno}: {exc.msg}.{shown}\n"
                "Python stops reading a file at its first syntax error, so no test could run. "
                "Fix that line and check again."
            )
    return ""


def _read_records(path: Path) -> list[dict]:
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut short by the kill
    return records


_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')


def _faulthandler_stacks(text: str, impl: Path) -> str:
    """faulthandler's dump, one block per thread, trimmed to the learner's files."""
    blocks = re.split(r"\n(?=Thread 0x|Current thread 0x)", text.strip())
    out = []
    for block in blocks:
        frames = [(m["file"], int(m["line"]), m["func"]) for m in _FRAME.finditer(block)]
        frames.reverse()  # faulthandler prints the innermost frame first
        learner = describe_frames(frames, fallback=False, root=impl)
        if learner:  # threads of the grader itself have no frame of the learner's
            out.append("a thread is stuck at")
            out += [f"    {line}" for line in learner]
    return "\n".join(out)


def _overlay(kata: Kata, impl: Path, tmp: Path) -> tuple[Path, dict[str, str]]:
    """A decoy or variant folder holds only the files where it differs from the reference
    fix; the rest is taken from solutions/. Any other implementation is graded as it is.

    Returns the folder to grade and, for a merged copy, how to name each copied
    file after the file it came from (so messages never show a temporary path).
    """
    alternatives = (kata.root / "tests" / "decoys", kata.root / "tests" / "variants")
    if not (impl.is_dir() and kata.solution_path.is_dir() and any(a in impl.parents for a in alternatives)):
        return impl, {}
    merged = tmp / "impl" / impl.name
    names = {}
    for source in (kata.solution_path, impl):  # the decoy's own files win
        for f in source.rglob("*.py"):
            if "__pycache__" in f.parts:
                continue
            rel = f.relative_to(source)
            (merged / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, merged / rel)
            names[os.path.relpath(merged / rel, kata.root)] = os.path.relpath(f, kata.root)
    return merged, names


def _rename(text: str, names: dict[str, str]) -> str:
    for copied, original in names.items():
        text = text.replace(copied, original)
    return text


def check(kata: Kata, impl: Path | str | None = None) -> CheckResult:
    """Run `kata`'s hidden tests against `impl` (default: the learner's copy in katas/)."""
    impl = Path(impl).resolve() if impl else kata.kata_path
    started = time.monotonic()
    result = CheckResult(kata=kata.id, impl=display_path(impl), verdict=ERROR)
    result.problem = (
        ("" if impl.exists() else f"There is no implementation at {display_path(impl)}.")
        or syntax_problem(impl)
        or services.problem(kata.services)
    )
    if result.problem:
        return result

    with tempfile.TemporaryDirectory(prefix="loopkata-") as tmp:
        results_file, stacks_file = Path(tmp, "results.jsonl"), Path(tmp, "stacks.txt")
        graded, names = _overlay(kata, impl, Path(tmp))
        env = plain_env({
            "LOOPKATA_ROOT": str(kata.root),
            "LOOPKATA_RESULTS": str(results_file),
            "LOOPKATA_STACKS": str(stacks_file),
            "LOOPKATA_BUDGET": str(kata.budget_seconds),
            "LOOPKATA_HANG_AFTER": str(kata.hang_after),
            "PYTHONDONTWRITEBYTECODE": "1",
            # Installed pytest plugins (nbval, anyio...) cost half a second to load and grade nothing.
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        })
        cmd = [
            sys.executable, "-m", "pytest", str(kata.tests_path), "--impl", str(graded),
            "-p", "loopkata.pytest_plugin", "-p", "no:cacheprovider",
            "-q", "--assert=plain", "-c", os.devnull, "--rootdir", str(kata.tests_path.parent),
            "--confcutdir", str(kata.tests_path.parent),
        ]
        child = subprocess.Popen(
            cmd, cwd=kata.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )
        timed_out = False
        try:
            output, _ = child.communicate(timeout=kata.budget_seconds)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(child.pid, signal.SIGKILL)
            output, _ = child.communicate()
        records = _read_records(results_file)
        stacks = stacks_file.read_text(errors="replace") if stacks_file.exists() else ""

    tests: dict[str, TestResult] = {}
    running = None
    for r in records:
        if r["event"] == "collected":
            tests[r["name"]] = TestResult(name=r["name"], title=r["title"])
        elif r["event"] == "begin":
            running = r["name"]
        elif r["event"] == "result":
            fields = {k: _rename(v, names) if isinstance(v, str) else v
                      for k, v in r.items() if k in TestResult.__dataclass_fields__}
            tests[r["name"]] = TestResult(**fields)
            running = None
    if running in tests and (timed_out or child.returncode < 0):
        stuck = tests[running]
        if timed_out:
            stuck.outcome = HANG
            stuck.message = f"The whole check ran out of its {kata.budget_seconds:g} s budget here: it is stuck."
            stuck.stacks = _rename(_faulthandler_stacks(stacks, graded.resolve()), names)
        else:
            stuck.outcome = ERROR
            stuck.message = f"The test process crashed (signal {-child.returncode}) while running this test."
    result.tests = list(tests.values())
    result.seconds = round(time.monotonic() - started, 2)

    errors = [t for t in result.tests if t.outcome == ERROR]
    if not result.tests:
        tail = "\n".join((output or b"").decode(errors="replace").strip().splitlines()[-8:])
        result.problem = f"The hidden tests for {kata.id} could not be collected, so nothing was graded.\n{tail}"
    elif errors and all(t.outcome in (ERROR, NOT_RUN) for t in result.tests):
        result.problem = errors[0].message
    elif any(t.outcome == HANG for t in result.tests):
        result.verdict = HANG
    elif result.failures:
        result.verdict = FAILED
    else:
        result.verdict = PASSED
    return result
