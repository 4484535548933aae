"""What `loopkata guard` costs and what it finds on real async packages' own test suites.

Runs the test suites that six async packages ship in their source distributions
(asgiref, janus, async-lru, aiostream, aiofiles and tenacity: the packages and pinned
versions listed in tests/guard_verdicts.toml), each as its maintainers run it, plain and
under the guard as a team would add it:

    pytest -p loopkata.guard --loopkata-guard=warn --loopkata-guard-report=PATH.json

Prints, per package: its tests, the median wall and CPU time of the whole pytest
command (a new process each run) plain and guarded, their ratios, every test whose
outcome under the guard differs from its outcome without it (compared test by test,
from each run's JUnit XML: a defect of the guard, printed by name), the findings by
code, and each finding with its verdict from tests/guard_verdicts.toml, or "unjudged"
where it has none.

    .venv/bin/python benchmarks/guard_overhead.py [--runs N] [--package NAME ...] [--plain-only] [--guard-arg=ARG ...]

The first run prepares everything under benchmarks/.guard-suites/ (git-ignored) and
later runs reuse it: the sdists (pip download --no-binary :all: --no-deps), unpacked,
and one venv per package built from this interpreter with the package from its sdist,
its test requirements and this checkout (editable, so the guard's current code runs).
Runs go one at a time, plain and guarded in turn, after one untimed warm-up of each.

Targets on a 2-core machine: each guarded suite at most 1.3x its plain time, and no
finding without a verdict (every false positive explained or being fixed).
"""
import argparse
import fnmatch
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import tomllib
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "benchmarks" / ".guard-suites"
VERDICTS = ROOT / "tests" / "guard_verdicts.toml"
TARGET = 1.3  # guarded time / plain time
GUARD = ["-p", "loopkata.guard", "--loopkata-guard=warn"]
ERROR_LINE = re.compile(r"^(INTERNALERROR> )?([\w.]+(Error|Warning|Exception|Exit)\b|Plugin: )")
DETAILS = 6  # lines of a finding's details printed
OUTCOME = re.compile(r"(\d+) (passed|failed|skipped|xfailed|xpassed|errors?|deselected)\b")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each suite in each mode (default 3)")
    parser.add_argument("--package", action="append", help="run only this package (repeatable)")
    parser.add_argument("--plain-only", action="store_true", help="time the plain runs only")
    parser.add_argument("--guard-arg", action="append", default=[], metavar="ARG",
                        help="one more pytest argument for the guarded runs (repeatable; --guard-arg=-W...)")
    options = parser.parse_args()
    verdicts = tomllib.loads(VERDICTS.read_text())
    packages = [p for p in verdicts["packages"] if not options.package or p["name"] in options.package]
    judged = verdicts.get("finding", [])
    used = set()
    totals = {"plain": 0.0, "guarded": 0.0, "plain, guarded too": 0.0}
    unjudged = 0
    for package in packages:
        suite = Suite(package, options.guard_arg)
        suite.prepare()
        guarded = not options.plain_only and suite.guard_importable()
        print(f"\n{suite.label}: {suite.tests_line()}")
        if not options.plain_only and not guarded:
            print("  loopkata.guard cannot be imported in its venv: plain runs only")
        times = {"plain": [], "guarded": []}
        cpu = {"plain": [], "guarded": []}
        outcomes = {"plain": set(), "guarded": set()}
        each = {"plain": defaultdict(set), "guarded": defaultdict(set)}  # test -> its outcomes across runs
        seen = {}  # finding key -> (finding, runs it appeared in)
        modes = ["plain", "guarded"] if guarded else ["plain"]
        for run in range(options.runs + 1):  # run 0 is the untimed warm-up
            for mode in modes:
                took, spent, outcome, findings, tests = suite.run(mode, run)
                outcomes[mode].add(outcome)
                for test, said in tests.items():
                    each[mode][test].add(said)
                if run:
                    times[mode].append(took)
                    cpu[mode].append(spent)
                nth = Counter()
                for finding in findings or []:
                    # One finding across runs: the nth of its code in its test. Its frames are no part of
                    # it: LG04's are a sample of a stack, and may be a line apart from one run to the next.
                    nth[finding["code"], finding.get("test")] += 1
                    key = finding["code"], finding.get("test"), nth[finding["code"], finding.get("test")]
                    entry = seen.setdefault(key, [finding, set(), set()])
                    entry[1].add(run)
                    entry[2].add(tuple(sorted(finding.get("where") or [])))
        plain = statistics.median(times["plain"])
        plain_cpu = statistics.median(cpu["plain"])
        print(f"  plain:   median {plain:6.2f} s of {options.runs} runs, CPU {plain_cpu:6.2f} s  "
              f"({'; '.join(sorted(outcomes['plain']))})")
        totals["plain"] += plain
        if not guarded:
            continue
        watched = statistics.median(times["guarded"])
        watched_cpu = statistics.median(cpu["guarded"])
        totals["guarded"] += watched
        totals["plain, guarded too"] += plain
        ratio = watched / plain
        print(f"  guarded: median {watched:6.2f} s of {options.runs} runs, CPU {watched_cpu:6.2f} s  "
              f"({'; '.join(sorted(outcomes['guarded']))})")
        print(f"  ratio {ratio:.2f}x wall, {watched_cpu / plain_cpu:.2f}x CPU (target at most {TARGET}x wall)"
              f"{'  over' if ratio > TARGET else ''}")
        if outcomes["guarded"] != outcomes["plain"]:
            print(f"  the guard changed the suite's outcome: see the logs in {suite.logs.relative_to(ROOT)}")
        changed = sorted(t for t in each["plain"].keys() | each["guarded"].keys()
                         if each["plain"].get(t, {"not run"}) != each["guarded"].get(t, {"not run"}))
        flaky = sorted(t for t, said in each["plain"].items() if len(said) > 1)
        print(f"  tests compared one by one: {len(each['plain'])}; whose outcome the guard changed: {len(changed)}"
              + (f" (and {len(flaky)} whose outcome varies without it)" if flaky else ""))
        for test in changed:
            print(f"  - CHANGED {test}: {'/'.join(sorted(each['plain'].get(test, {'not run'})))} without the guard, "
                  f"{'/'.join(sorted(each['guarded'].get(test, {'not run'})))} with it")
        totals["changed"] = totals.get("changed", 0) + len(changed)
        codes = Counter(f["code"] for f, _, _ in seen.values())
        print(f"  findings: {len(seen)}" + (f" ({', '.join(f'{c} x{n}' for c, n in sorted(codes.items()))})" if seen else ""))
        for finding, runs, places in sorted(seen.values(), key=lambda item: (item[0]["code"], item[0].get("test") or "")):
            matches = [i for i, v in enumerate(judged) if suite.matches(v, finding)]
            used.update(matches)
            verdict = judged[matches[0]]["verdict"] if matches else "unjudged"
            unjudged += not matches
            flaky = "" if len(runs) == options.runs + 1 else f"  (in {len(runs)} of {options.runs + 1} runs)"
            if len(places) > 1:
                flaky += f"  ({len(places)} different `where`s across runs; the first seen below)"
            print(f"  - {finding['code']} {finding.get('name', '')}: {verdict}{flaky}")
            print(f"      test:  {finding.get('test')}")
            print(f"      says:  {_one_line(finding.get('message', ''))}")
            for frame in finding.get("where") or []:
                print(f"      where: {frame}")
            details = finding.get("details") or []
            for line in details[:DETAILS]:
                print(f"      {_one_line(line)}")
            if len(details) > DETAILS:
                print(f"      ... {len(details) - DETAILS} more lines in the JSON report")
    if not totals["guarded"]:
        print(f"\nall {len(packages)} suites, plain: {totals['plain']:.2f} s")
    else:
        both = totals["plain, guarded too"]
        print(f"\nthe suites run both ways: plain {both:.2f} s, guarded {totals['guarded']:.2f} s, "
              f"ratio {totals['guarded'] / both:.2f}x (target at most {TARGET}x)")
        names = {p["name"] for p in packages}
        stale = [v for i, v in enumerate(judged) if i not in used and v["package"] in names]
        print(f"tests whose outcome the guard changed: {int(totals.get('changed', 0))}")
        print(f"findings without a verdict (unjudged): {unjudged}")
        if stale:
            print(f"verdicts that matched no finding: {len(stale)}")
            for v in stale:
                print(f"  - {v['package']} {v['code']} {v.get('test', '')} {v.get('where', '')}")


class Suite:
    """One package's test suite: its sdist, its unpacked source, its venv, its runs."""

    def __init__(self, package: dict, guard_args: list[str]):
        self.package = package
        self.guard_args = guard_args
        self.name, self.version = package["name"], package["version"]
        self.label = f"{self.name} {self.version}"
        slug = f"{self.name}-{self.version}"
        self.download = CACHE / "sdists" / slug
        self.source = CACHE / "src" / slug
        self.venv = CACHE / "venvs" / slug
        self.logs = CACHE / "logs" / slug
        self.python = self.venv / "bin" / "python"

    def prepare(self) -> None:
        """Download, unpack and install, each step only if not done already."""
        if not list(self.download.glob("*.tar.gz")):
            self.download.mkdir(parents=True, exist_ok=True)
            _quiet([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
                    "--dest", str(self.download), f"{self.name}=={self.version}"], f"download {self.label}")
        sdist = next(self.download.glob("*.tar.gz"))
        if not self.source.is_dir():
            with tempfile.TemporaryDirectory(dir=CACHE) as unpacked:
                with tarfile.open(sdist) as archive:
                    archive.extractall(unpacked, filter="data")
                (top,) = Path(unpacked).iterdir()
                self.source.parent.mkdir(parents=True, exist_ok=True)
                top.rename(self.source)
        extras = f"[{','.join(self.package['extras'])}]" if self.package.get("extras") else ""
        wanted = [f"{sdist}{extras}", *self.package.get("requires", []), "-e", str(ROOT)]
        stamp = self.venv / "loopkata-installed.json"
        if stamp.exists() and json.loads(stamp.read_text()) == wanted:
            return
        if self.venv.exists():
            shutil.rmtree(self.venv)
        print(f"preparing {self.label}: a venv in {self.venv.relative_to(ROOT)} ...", flush=True)
        _quiet([sys.executable, "-m", "venv", str(self.venv)], f"venv for {self.label}")
        _quiet([str(self.python), "-m", "pip", "install", "-q", *wanted], f"install {self.label}")
        stamp.write_text(json.dumps(wanted))

    def guard_importable(self) -> bool:
        """Is the guard there yet (a module, not the empty folder of a namespace package)?"""
        probe = "import loopkata.guard as g; assert g.__file__"
        return subprocess.run([str(self.python), "-c", probe], capture_output=True, check=False).returncode == 0

    def tests_line(self) -> str:
        files = sorted({f for t in self.package["tests"] for f in (self.source / t).rglob("*.py")})
        lines = sum(len(f.read_text().splitlines()) for f in files)
        return f"its suite ({' '.join(self.package['tests'])}): {len(files)} files, {lines:,} lines"

    def command(self, extra: list[str]) -> list[str]:
        return [str(self.python), "-m", "pytest", "-q", "--confcutdir", str(self.source),
                *self.package.get("args", []), *extra, *self.package["tests"]]

    def env(self) -> dict:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTEST_ADDOPTS")}
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        return env

    def run(self, mode: str, number: int) -> tuple[float, float, str, list | None, dict[str, str]]:
        """One run of the suite: its wall time, its CPU time, its outcome line, guarded its findings, and the
        outcome of each of its tests."""
        self.logs.mkdir(parents=True, exist_ok=True)
        report = self.logs / f"report-{number}.json"
        report.unlink(missing_ok=True)
        junit = self.logs / f"{mode}-{number}.xml"
        junit.unlink(missing_ok=True)
        extra = [*GUARD, f"--loopkata-guard-report={report}", *self.guard_args] if mode == "guarded" else []
        command = self.command([f"--junit-xml={junit}", *extra])
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        out = subprocess.run(command, capture_output=True, text=True, cwd=self.source, env=self.env(), check=False)
        took = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        spent = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        tests = _each_outcome(junit)
        log = self.logs / f"{mode}-{number}.log"
        log.write_text(f"$ cd {self.source} && {' '.join(command)}\nexit code {out.returncode}\n\n"
                       f"{out.stdout}\n--- stderr ---\n{out.stderr}")
        outcome = _outcome(out.stdout) or f"no summary, exit code {out.returncode}"
        if out.returncode not in (0, 1):
            outcome += f", exit code {out.returncode}"
        if mode == "plain":
            return took, spent, outcome, None, tests
        if out.returncode not in (0, 1):
            errors = [line for line in (out.stdout + out.stderr).splitlines() if ERROR_LINE.match(line)]
            said = " / ".join(_one_line(line.removeprefix("INTERNALERROR> "), 100) for line in errors[-3:])
            print(f"  guarded run {number}: exit code {out.returncode}: {said or 'see the log'}"
                  f"  (log {log.relative_to(ROOT)})")
        if not report.exists():
            print(f"  guarded run {number}: no report written (exit code {out.returncode}; log {log.relative_to(ROOT)})")
            return took, spent, outcome, [], tests
        data = json.loads(report.read_text())
        findings = data["findings"] if isinstance(data, dict) else data
        if isinstance(data, dict) and not data.get("complete", True):
            print(f"  guarded run {number}: its report is incomplete, the run ended early (log {log.relative_to(ROOT)})")
        for finding in findings:
            finding["where"] = [self.relative(line) for line in finding.get("where") or []]
            finding["details"] = [self.relative(line) for line in finding.get("details") or []]
            finding["message"] = self.relative(finding.get("message", ""))
        return took, spent, outcome, findings, tests

    def relative(self, line: str) -> str:
        """A line of `where` or `details` ("file:line in func", "used at file:line ...") with its paths
        relative to the sdist, site-packages, this checkout or the stdlib."""
        prefixes = [(str(self.source) + os.sep, ""),
                    (sysconfig.get_path("purelib", vars={"base": str(self.venv)}) + os.sep, ""),
                    (str(ROOT) + os.sep, "<loopkata>/"),
                    (sysconfig.get_path("stdlib") + os.sep, "<stdlib>/")]
        for prefix, short in sorted(prefixes, key=lambda p: -len(p[0])):
            line = line.replace(prefix, short)
        return line

    def matches(self, verdict: dict, finding: dict) -> bool:
        """Does an entry of tests/guard_verdicts.toml judge this finding?"""
        if verdict["package"] != self.name or verdict["code"] != finding["code"]:
            return False
        if "test" in verdict and not _like(finding.get("test") or "", verdict["test"]):
            return False
        if "where" in verdict:
            place = re.compile(rf"(^|\s){re.escape(verdict['where'])}(\s|$)")
            return any(place.search(frame) for frame in finding.get("where") or [])
        return True


def _each_outcome(junit: Path) -> dict[str, str]:
    """Each test of a run's JUnit XML and how it ended: passed, failed, error, skipped (a test with an error
    in its teardown too says "passed+error")."""
    if not junit.exists():
        return {}
    out: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        said = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}
        ended = "+".join(outcome[t] for t in said) or "passed"
        out[name] = ended if name not in out else f"{out[name]}+{ended}"
    return out


def _like(text: str, pattern: str) -> bool:
    return text == pattern or fnmatch.fnmatchcase(text, pattern)


def _outcome(stdout: str) -> str:
    for line in reversed(stdout.splitlines()):
        if OUTCOME.search(line) and " in " in line:
            return ", ".join(" ".join(m) for m in OUTCOME.findall(line))
    return ""


def _one_line(text: str, width: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _quiet(command: list[str], what: str) -> None:
    out = subprocess.run(command, capture_output=True, text=True, check=False)
    if out.returncode:
        sys.exit(f"{what} failed (exit code {out.returncode}):\n$ {' '.join(command)}\n{out.stdout}{out.stderr}")


if __name__ == "__main__":
    main()
