"""`loopkata scan PATH...`: the "keeping it out" checks of every notebook, run on a team's own code.

Rule LKnn is the bug that kata nn teaches; a finding names its rule, file:line,
one sentence and that notebook. Modules:

- `python_rules`: the rules that read Python source (LK01-LK06);
- `ruff_rules`: ruff's RUF006 (as LK04) and ASYNC rules (as LK05), run for real;
- `celery_routes`: Celery workers in deploy files and the queues they consume (LK07);
- `files`: which files are read, each within a size limit;
- `bounded_yaml`: deploy files' YAML, with a bound on what its aliases expand to;
- `command`: the command line and its exit status;
- `output`: text, JSON and SARIF 2.1.0.

Whatever a file holds, it costs the scan at most one warning line: the other files are scanned.
"""
from __future__ import annotations

import ast
import re
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import celery_routes, files, python_rules, ruff_rules

RULES = {  # id -> what it finds; rule LKnn is taught by kata nn
    "LK01": "a loop-bound asyncio object (Lock, Semaphore, Event, Queue...) that outlives its event loop",
    "LK02": "id() or hash() of an event loop, compared or used as a key",
    "LK03": "a mapping keyed by an event loop whose values are bound to that loop",
    "LK04": "a task whose only reference is dropped",
    "LK05": "a thread lock taken again by the thread that holds it, or a blocking call in async def",
    "LK06": "a pooled client created once at import and used from several event loops",
    "LK07": "a Celery queue that tasks are routed to and no worker consumes",
}
IGNORE = re.compile(r"#\s*loopkata:\s*ignore(?:\[(?P<rules>[A-Z0-9,\s]+)\])?")


@dataclass(frozen=True)
class Finding:
    rule: str
    path: str  # as given on the command line, joined with the file's place under it
    line: int
    column: int
    message: str

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # unreadable files, a missing ruff: one line each
    files: int = 0
    lines: int = 0
    seconds: float = 0.0


class BadSelection(ValueError):
    """--select or --ignore names a rule that does not exist."""


def rule_ids(spec: str | None) -> set[str] | None:
    """'LK01,LK04' or 'LK0' (a prefix, like ruff) -> rule ids; None when no spec."""
    if not spec:
        return None
    chosen = set()
    for part in (p.strip().upper() for p in spec.split(",") if p.strip()):
        matched = {r for r in RULES if r.startswith(part)}
        if not matched:
            raise BadSelection(f"there is no rule {part!r}: the rules are {', '.join(RULES)} (a prefix such as LK0 "
                               "selects several)")
        chosen |= matched
    return chosen


def _package_root(path: Path) -> Path:
    """The top of the package a module belongs to (the module itself when it is in none)."""
    folder = path.parent
    if not (folder / "__init__.py").exists():
        return path
    while (folder.parent / "__init__.py").exists():
        folder = folder.parent
    return folder


def _ignored(lines: list[str], line: int, rule: str) -> bool:
    if not 0 < line <= len(lines):
        return False
    match = IGNORE.search(lines[line - 1])
    if not match:
        return False
    return match.group("rules") is None or rule in {r.strip() for r in match.group("rules").split(",")}


def _exhausted(exc: BaseException) -> str:
    """Why a file that Python could hold exhausted the scan, in a few words."""
    if isinstance(exc, RecursionError):
        return "RecursionError: nested too deeply to analyse"
    return "MemoryError: too large to analyse in memory"


def _parse(path: Path, text: str) -> tuple[ast.Module | None, str]:
    """The module and "", or None and the warning line that says why it could not be parsed."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)  # invalid escapes in old code: not ours to report
            return ast.parse(text, filename=str(path)), ""
    except (SyntaxError, ValueError) as exc:  # ValueError: a null byte
        where = f":{exc.lineno}" if getattr(exc, "lineno", None) else ""
        return None, f"{path}{where}: not parsed, so not scanned ({getattr(exc, 'msg', exc)})"
    except (RecursionError, MemoryError) as exc:  # x = 1 + 1 + ... with thousands of terms
        return None, f"{path}: not parsed, so not scanned ({_exhausted(exc)})"


def scan(paths: list[str | Path], select: set[str] | None = None, ignore: set[str] | None = None) -> Report:
    """Scan files and folders; findings sorted by file and line. A file that cannot be read,
    parsed or analysed is one warning in the report, and the rest is scanned."""
    started = time.perf_counter()
    report = Report()
    wanted = (select or set(RULES)) - (ignore or set())
    missing = [str(p) for p in paths if not Path(p).exists()]
    if missing:
        raise FileNotFoundError(f"nothing to scan at {', '.join(missing)}: give a file or a folder that exists")
    found_files, report.warnings = files.find([Path(p) for p in paths])
    sources: dict[Path, list[str]] = {}
    modules: dict[Path, ast.Module] = {}
    deploy: dict[Path, str] = {}
    for path in found_files:
        try:
            text = files.read(path)
        except files.Skipped as exc:
            report.warnings.append(f"{path}: {exc}")
            continue
        sources[path] = text.splitlines()
        report.files += 1
        report.lines += len(sources[path])
        if path.suffix == ".py":
            tree, problem = _parse(path, text)
            if tree is None:
                report.warnings.append(problem)
            else:
                modules[path] = tree
        elif celery_routes.is_deploy_file(path):
            deploy[path] = text
    found: list[Finding] = []

    seen = set()

    def add(rule: str, path: Path, line: int, column: int, message: str) -> None:
        # one finding per rule and line: where ruff and our own rule see the same call, ours speaks
        if rule in wanted and (rule, path, line) not in seen and not _ignored(sources.get(path, []), line, rule):
            seen.add((rule, path, line))
            found.append(Finding(rule, str(path), line, column, message))

    # A module that parses can still be too deep for the rules (ast.unparse recurses): it is
    # left out with one warning, the others are judged. Any other exception is a fault of
    # the scanner's own and propagates.
    names, starts, apart, routes = {}, set(), set(), []
    for path, tree in list(modules.items()):
        try:
            names[path] = python_rules.Names(tree)
            if python_rules.starts_loops(tree, names[path]):
                starts.add(_package_root(path))
            if python_rules.keeps_loops_apart(tree, names[path]):
                apart.add(_package_root(path))
            if r := celery_routes.routes_in(tree, str(path)):
                routes.append(r)
        except (RecursionError, MemoryError) as exc:
            report.warnings.append(f"{path}: not scanned ({_exhausted(exc)})")
            names.pop(path, None)
            del modules[path]
    # LK06 needs the whole package: one module starts loops, another keeps the client
    loop_packages = starts - apart
    for path in modules:
        try:
            judged = list(python_rules.check(names[path], _package_root(path) in loop_packages))
        except (RecursionError, MemoryError) as exc:
            report.warnings.append(f"{path}: not scanned ({_exhausted(exc)})")
            continue
        for rule, node, message in judged:
            add(rule, path, node.lineno, node.col_offset + 1, message)
    if wanted & {"LK04", "LK05"} and modules:
        try:
            checked, problems = ruff_rules.run(sorted(modules))
            report.warnings += problems
            for rule, path, line, column, message in checked:
                add(rule, path, line, column, message)
        except ruff_rules.RuffUnavailable as exc:
            report.warnings.append(str(exc))
    if "LK07" in wanted and routes:
        _lk07(routes, deploy, add, report)
    report.findings = sorted(found, key=lambda f: (f.path, f.line, f.column, f.rule))
    report.seconds = time.perf_counter() - started
    return report


def _lk07(routes: list[celery_routes.Routes], deploy_files: dict[Path, str], add, report: Report) -> None:
    default = routes[0].default_queue
    routed = set().union(*(r.queues for r in routes)) | {default}
    setting = f"{Path(routes[0].where[0]).name}:{routes[0].where[1]}"
    for path, text in deploy_files.items():
        try:
            consumed, workers = celery_routes.consumed_by_file(path, default, text)
        except Exception as exc:  # noqa: BLE001 - a deploy file we cannot read (YAML error, alias bomb, nesting
            # too deep for PyYAML's recursion, a bad date) is a warning, never a crash
            first = " ".join(str(exc).split())[:160]  # a YAML error spans lines: one line per file
            report.warnings.append(f"{path}: not read as a deploy file ({exc.__class__.__name__}: {first})")
            continue
        missing = routed - consumed
        if not workers or not missing:  # a file that starts no worker deploys no consumer to judge
            continue
        dormant = [w for w in workers if not w.started_by_default]
        asleep = f" ({dormant[0].where()} is not started by a plain `docker compose up`)" if dormant else ""
        add("LK07", path, workers[0].line, 1,
            f"the Celery workers this file starts consume only {', '.join(sorted(consumed)) or 'nothing'}{asleep}; "
            f"tasks routed to {', '.join(sorted(missing))} (task_routes at {setting}) are accepted and stay "
            "PENDING for good, with nothing logged: add them to a worker's -Q")


def show(*paths, select: str | None = None) -> None:
    """For a notebook: print what `loopkata scan` says of `paths`, each file named from the first
    path's folder (a private copy's place varies; its file names do not), without timings."""
    from . import output

    base = Path(paths[0]).parent
    chosen = rule_ids(select)
    report = scan(list(paths), chosen)
    report.findings = [Finding(f.rule, str(Path(f.path).relative_to(base)), f.line, f.column, f.message)
                       for f in report.findings]
    report.warnings = [w.replace(f"{base}/", "") for w in report.warnings]
    print(output.text(report, {r: RULES[r] for r in (chosen or RULES)}, timed=False))
