"""`loopkata scan PATH...`: the "keeping it out" checks of every notebook, run on a team's own code.

Rule LKnn is the bug that kata nn teaches; a finding names its rule, file:line,
one sentence and that notebook. Modules:

- `python_rules`: the rules that read Python source (LK01-LK06);
- `ruff_rules`: ruff's RUF006 (as LK04) and ASYNC rules (as LK05), run for real;
- `celery_routes`: Celery workers in deploy files and the queues they consume (LK07);
- `output`: text, JSON and SARIF 2.1.0.
"""
from __future__ import annotations

import ast
import re
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import celery_routes, python_rules, ruff_rules

RULES = {  # id -> what it finds; rule LKnn is taught by kata nn
    "LK01": "a loop-bound asyncio object (Lock, Semaphore, Event, Queue...) that outlives its event loop",
    "LK02": "id() or hash() of an event loop, compared or used as a key",
    "LK03": "a mapping keyed by an event loop whose values are bound to that loop",
    "LK04": "a task whose only reference is dropped",
    "LK05": "a thread lock taken again by the thread that holds it, or a blocking call in async def",
    "LK06": "a pooled client created once at import and used from several event loops",
    "LK07": "a Celery queue that tasks are routed to and no worker consumes",
}
SKIPPED_FOLDERS = {".git", ".hg", ".venv", "venv", "node_modules", "__pycache__", ".tox", ".nox",
                   ".mypy_cache", ".ruff_cache", ".pytest_cache", "build", "dist", ".ipynb_checkpoints"}
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


def _files(paths: list[Path]) -> list[Path]:
    found = []
    for path in paths:
        if path.is_file():
            found.append(path)
            continue
        for child in sorted(path.rglob("*")):
            parts = child.relative_to(path).parts
            if any(p in SKIPPED_FOLDERS or p.endswith(".egg-info") for p in parts[:-1]):
                continue
            if child.is_file() and (child.suffix == ".py" or celery_routes.is_deploy_file(child)):
                found.append(child)
    return found


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


def scan(paths: list[str | Path], select: set[str] | None = None, ignore: set[str] | None = None) -> Report:
    """Scan files and folders; findings sorted by file and line."""
    started = time.perf_counter()
    report = Report()
    wanted = (select or set(RULES)) - (ignore or set())
    missing = [str(p) for p in paths if not Path(p).exists()]
    if missing:
        raise FileNotFoundError(f"nothing to scan at {', '.join(missing)}: give a file or a folder that exists")
    files = _files([Path(p) for p in paths])
    sources: dict[Path, list[str]] = {}
    modules: dict[Path, ast.Module] = {}
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            report.warnings.append(f"{path}: not read ({exc.__class__.__name__}: {exc})")
            continue
        sources[path] = text.splitlines()
        report.files += 1
        report.lines += len(sources[path])
        if path.suffix == ".py":
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", SyntaxWarning)  # invalid escapes in old code: not ours to report
                    modules[path] = ast.parse(text, filename=str(path))
            except (SyntaxError, ValueError) as exc:
                where = f":{exc.lineno}" if getattr(exc, "lineno", None) else ""
                report.warnings.append(f"{path}{where}: not parsed, so not scanned ({getattr(exc, 'msg', exc)})")
    found: list[Finding] = []

    seen = set()

    def add(rule: str, path: Path, line: int, column: int, message: str) -> None:
        # one finding per rule and line: where ruff and our own rule see the same call, ours speaks
        if rule in wanted and (rule, path, line) not in seen and not _ignored(sources.get(path, []), line, rule):
            seen.add((rule, path, line))
            found.append(Finding(rule, str(path), line, column, message))

    # LK06 needs the whole package: one module starts loops, another keeps the client
    names = {p: python_rules.Names(tree) for p, tree in modules.items()}
    loop_packages = {_package_root(p) for p, tree in modules.items() if python_rules.starts_loops(tree, names[p])}
    loop_packages -= {_package_root(p) for p, tree in modules.items()
                      if python_rules.keeps_loops_apart(tree, names[p])}
    for path, tree in modules.items():
        for rule, node, message in python_rules.check(names[path], _package_root(path) in loop_packages):
            add(rule, path, node.lineno, node.col_offset + 1, message)
    if wanted & {"LK04", "LK05"} and modules:
        try:
            for rule, path, line, column, message in ruff_rules.run(sorted(modules)):
                add(rule, path, line, column, message)
        except ruff_rules.RuffUnavailable as exc:
            report.warnings.append(str(exc))
    if "LK07" in wanted:
        _lk07(modules, [p for p in sources if celery_routes.is_deploy_file(p)], add, report)
    report.findings = sorted(found, key=lambda f: (f.path, f.line, f.column, f.rule))
    report.seconds = time.perf_counter() - started
    return report


def _lk07(modules: dict, deploy_files: list[Path], add, report: Report) -> None:
    routes = [r for path, tree in modules.items() if (r := celery_routes.routes_in(tree, str(path)))]
    if not routes:
        return
    default = routes[0].default_queue
    routed = set().union(*(r.queues for r in routes)) | {default}
    setting = f"{Path(routes[0].where[0]).name}:{routes[0].where[1]}"
    for path in deploy_files:
        try:
            consumed, workers = celery_routes.consumed_by_file(path, default)
        except Exception as exc:  # noqa: BLE001 - a deploy file we cannot read is a warning, never a crash
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
