"""Each kata's bug is caught by `loopkata guard` in a plain test a team would write; its fixes never are.

For katas 01-10, tests/guard_cases/test_NN_<slug>.py is a test of the kind a
team keeps in its own repository for that code (warm handler calls, a request
through the app, the worker started from the deploy file's own command line).
It runs once per kata, as a team would add the guard to its suite:

    python -m pytest -p loopkata.guard --loopkata-guard=warn --loopkata-guard-report=R.json ...

against the starter, the reference fix and every variant at once (the case
module is parametrized over them, see tests/guard_cases/conftest.py), and the
report's findings are read per implementation:

- the starter gets at least one finding whose `where` points into the place of
  its bug, as the case module's BUG states it ((file name, function) pairs);
- the reference fix and each variant get no finding at all.

The guarded run happens in a folder of its own whose pyproject.toml has an
empty [tool.loopkata.guard]: the guard's defaults, whatever settings this
project's own pyproject.toml may one day give it. Under pytest-xdist, one
worker runs a kata's guarded run and the others read its result.

A case that the guard gets wrong today is marked xfail (strict) in XFAIL, with
the reason.
"""
import ast
import fcntl
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loopkata.guard import child
from loopkata.model import alternatives, catalogue

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tests" / "guard_cases"
KATAS = [k for k in catalogue.load(ROOT) if 1 <= k.number <= 10]
TIMEOUT = 240  # seconds for one kata's guarded run, every implementation included
MEMORY = 4 * 2**30  # bytes of address space for it (and what it starts): a runaway is an error, not a swapped machine
WHERE = re.compile(r"(?:^|\s)(\S+):(\d+) in (\S+)$")  # "used again at path/file.py:12 in func"

# (kata id, implementation) -> why the guard gets this case wrong today. Strict: once the guard is
# fixed, the case passes, the run says XPASS as a failure, and its line here must go.
XFAIL: dict[tuple[str, str], str] = {}


def case_module(kata) -> Path:
    return CASES / f"test_{Path(kata.path).stem}.py"


def bug_places(kata) -> list[tuple[str, str]]:
    """The case module's BUG: the (file name, function) pairs where the starter's bug is."""
    tree = ast.parse(case_module(kata).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "BUG" for t in node.targets):
            return [tuple(pair) for pair in ast.literal_eval(node.value)]
    raise AssertionError(f"{case_module(kata).name} states no BUG = [(file name, function), ...]")


def implementations(kata) -> list[tuple[str, str, Path]]:
    """(label, role, source) of every implementation of `kata`: the starter, the reference, each variant."""
    found = [("starter", "starter", kata.kata_path), ("reference", "reference fix", kata.solution_path)]
    found += [(v.stem, "variant", v) for v in kata.variants]
    return found


def compose(kata, source: Path, folder: Path) -> Path:
    """The implementation as it runs: a variant is built from its base, as the grader builds it (a folder kata's
    under the kata's own folder name); the starter and the reference are used as they are."""
    if not alternatives.is_difference(source):
        return source
    built = alternatives.build(kata, source, folder / source.stem)
    return built.rename(built.with_name(kata.solution_path.name)) if built.is_dir() else built


def guarded_run(kata, folder: Path) -> dict:
    """Run the kata's case module guarded against all its implementations; what it found, per label.

    A starter's bug can crash the interpreter (kata 06's asyncpg connections used from two loops
    have segfaulted), and a crashed pytest leaves its report incomplete. Then each implementation runs again
    alone, twice at most, so one crash costs only the implementation that crashed."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tmp").mkdir(exist_ok=True)
    (folder / "pyproject.toml").write_text(
        "# The guard's own defaults for this run, whatever the project's pyproject.toml says.\n"
        "[tool.pytest.ini_options]\n\n[tool.loopkata.guard]\n", encoding="utf-8")
    impls = [(label, compose(kata, source, folder / "variants")) for label, _, source in implementations(kata)]
    started = time.monotonic()
    findings, output, status = _pytest_guarded(kata, folder, impls, folder / "report.json")
    reported = {label: findings is not None for label, _ in impls}
    if findings is None and status is not None:  # it ended without its report: a crash, not a timeout
        findings = []
        for n, (label, path) in enumerate(impls):
            for attempt in (1, 2):
                alone, said, ended = _pytest_guarded(kata, folder, [(label, path)], folder / f"report-{n}-{attempt}.json")
                output += f"\n--- {label} alone (try {attempt}): exited {ended}\n{said[-2000:]}"
                if alone is not None:  # what no test of it holds is its own, too
                    findings += [f if re.search(r"\[[^\]]+\]$", f.get("test", "")) else {**f, "test": f"{f.get('test', '')}[{label}]"}
                                 for f in alone]
                    break
            reported[label] = alone is not None
    seconds = time.monotonic() - started
    by_label = {label: [] for label, _ in impls}
    outside = []
    for f in findings or []:
        m = re.search(r"\[([^\]]+)\]$", f.get("test", ""))
        (by_label[m.group(1)] if m and m.group(1) in by_label else outside).append(f)
    return {"findings": by_label, "outside": outside, "reported": reported, "output": output,
            "status": status, "seconds": seconds, "impls": {label: str(path) for label, path in impls}}


def _pytest_guarded(kata, folder: Path, impls, report: Path) -> tuple[list | None, str, int | None]:
    """One guarded pytest run of the case module over `impls`: (its report's findings or None, its output, its status)."""
    env = {**os.environ, "LOOPKATA_GUARD_CASE_IMPL": os.pathsep.join(f"{label}={path}" for label, path in impls),
           "LOOPKATA_ROOT": str(ROOT), "TMPDIR": str(folder / "tmp")}
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop(child.ENV, None)  # should this suite itself run guarded, the run below is guarded once, by -p
    env["PYTHONPATH"] = os.pathsep.join(p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                        if p and Path(p) != child.BOOT)
    command = [sys.executable, "-m", "pytest", "-p", "loopkata.guard", "--loopkata-guard=warn",
               f"--loopkata-guard-report={report}", "-p", "no:cacheprovider", "-p", "no:nbval", "-q",
               f"--rootdir={folder}", "-c", str(folder / "pyproject.toml"), f"--confcutdir={CASES}",
               "-o", "addopts=", str(case_module(kata))]
    try:
        ran = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=TIMEOUT,
                             check=False, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY)))
        output, status = ran.stdout + ran.stderr, ran.returncode
    except subprocess.TimeoutExpired as exc:
        output, status = f"{exc.stdout or ''}{exc.stderr or ''}\n(killed after {TIMEOUT} s)", None
    written = json.loads(report.read_text()) if report.exists() else {}
    findings = written["findings"] if written.get("complete") else None  # a crashed run's report is incomplete
    return findings, output, status


def shown(findings: list[dict]) -> str:
    """The findings as a person reads them: one line each, with its `where`."""
    lines = [f"  {f['code']} {f['name']} in {f['test'].rsplit('::', 1)[-1]}: {f['message'][:240]}\n"
             + "".join(f"      where: {w}\n" for w in f["where"]) for f in findings]
    return "".join(lines).rstrip() or "  (none)"


def points_into(where: str, places) -> bool:
    m = WHERE.search(where)
    return bool(m) and (Path(m.group(1)).name, m.group(3)) in places


@pytest.fixture(scope="session")
def guarded(tmp_path_factory):
    """kata -> the result of its guarded run, made once per test session (shared by xdist's workers)."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    results = {}

    def result(kata) -> dict:
        if kata.id not in results:
            folder = shared / f"guard-katas-{kata.id}"
            with open(shared / f"guard-katas-{kata.id}.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # one worker runs it; the others wait, then read it
                done = folder / "result.json"
                if not done.exists():
                    done.write_text(json.dumps(guarded_run(kata, folder)))
                results[kata.id] = json.loads(done.read_text())
        return results[kata.id]
    return result


def reported(run: dict, kata, label: str) -> None:
    """Fail unless the guarded run of `label` wrote its report."""
    assert run["reported"][label], (
        f"expected the guarded run of tests/guard_cases/{case_module(kata).name} over {label} to write its report; "
        f"it exited {run['status']} after {run['seconds']:.0f} s and printed:\n{run['output'][-4000:]}")


def _cases(role_wanted: str):
    for kata in KATAS:
        for label, role, _ in implementations(kata):
            if (role == "starter") != (role_wanted == "starter"):
                continue
            marks = []
            if (kata.id, label) in XFAIL:
                marks.append(pytest.mark.xfail(strict=True, reason=XFAIL[kata.id, label]))
            yield pytest.param(kata, label, role, id=f"{kata.id}-{label}", marks=marks)


@pytest.mark.parametrize("kata, label, role", list(_cases("starter")))
def test_the_guard_finds_the_starters_bug_where_it_is(kata, label, role, guarded):
    """the starter, exercised by a team's plain test, gets a finding whose `where` points into its bug's place"""
    run = guarded(kata)
    reported(run, kata, label)
    places = bug_places(kata)
    found = run["findings"][label]
    assert any(points_into(w, places) for f in found for w in f["where"]), (
        f"expected loopkata guard to find kata {kata.number:02d} {kata.id}'s bug in the starter, in a finding whose "
        f"`where` points into {' or '.join(f'{file} in {func}()' for file, func in places)} (the case module's BUG), "
        f"when tests/guard_cases/{case_module(kata).name} runs it; it found {len(found)}:\n{shown(found)}")


@pytest.mark.parametrize("kata, label, role", list(_cases("fix")))
def test_the_guard_finds_nothing_in_a_fix(kata, label, role, guarded):
    """a reference fix or a variant, exercised by the same test, gets no finding at all"""
    run = guarded(kata)
    reported(run, kata, label)
    found = run["findings"][label] + run["outside"]
    assert not found, (
        f"expected no finding of loopkata guard in the {role} {label} of kata {kata.number:02d} {kata.id} "
        f"({run['impls'][label]}) when tests/guard_cases/{case_module(kata).name} runs it; it found "
        f"{len(found)}:\n{shown(found)}")
