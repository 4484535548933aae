"""`loopkata scan PATH...`: the "keeping it out" checks of every notebook, run on a team's own code.

Rule LKnn is the bug that kata nn teaches; a finding names its rule, file:line,
one sentence and that notebook. Modules:

- `python_rules`: the rules that read Python source (LK01-LK06);
- `ruff_rules`: ruff's RUF006 (as LK04) and ASYNC rules (as LK05), run for real;
- `celery_routes`: Celery workers in deploy files (and the shell scripts they run) and the queues they consume (LK07);
- `blocking_rules`: synchronous clients called in async routes, access lines written late (LK08);
- `stream_rules`: a timeout that cancels a step of an async generator (LK09);
- `logging_rules`: gathered exceptions logged without their traceback (LK10);
- `invocation_rules`: writes sent again without a kept key, a client made per invocation (LK11);
- `nested_loop_rules`: event loops started on a running loop's thread, across a package (LK12);
- `watchdog_rules`: loop watchdogs that run on the loop they watch, or end only their thread (LK13);
- `pid1_rules`: a container whose PID 1 is a shell that runs Python as its child, in Dockerfiles and entrypoint scripts (LK14);
- `cpu_quota_rules`: pools and worker counts sized from the host's CPU count, not the CPU quota (LK15);
- `memory_rules`: budgets taken from the host's memory, and unbounded queues filled from a feed (LK16);
- `files`: which files are read, each within a size limit;
- `newer_syntax`: modules in a newer Python's syntax, parsed by the newest Python on the machine;
- `bounded_yaml`: deploy files' YAML, with a bound on what its aliases expand to;
- `command`: the command line and its exit status;
- `output`: text, JSON and SARIF 2.1.0.

Whatever a file holds, it costs the scan at most one warning line: the other files are scanned.
"""
from __future__ import annotations

import ast
import re
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import (
    blocking_rules,
    celery_routes,
    cpu_quota_rules,
    files,
    invocation_rules,
    logging_rules,
    memory_rules,
    nested_loop_rules,
    newer_syntax,
    pid1_rules,
    python_rules,
    ruff_rules,
    stream_rules,
    watchdog_rules,
)

RULES = {  # id -> what it finds; rule LKnn is taught by kata nn. The README's table is made from these.
    "LK01": "an asyncio `Lock`, `Semaphore`, `Event`, `Condition`, `Queue` or `Barrier` that outlives its event "
            "loop: created at import, as a class attribute, returned by an `lru_cache` function, stored per key in a "
            "module-level dict (or a `defaultdict(asyncio.Lock)`), or created by the `__init__` (or dataclass "
            "`__post_init__`) of an object kept in one of those",
    "LK02": "`id()` or `hash()` of an event loop, compared or used as a key (alone, in a tuple or in an f-string)",
    "LK03": "a mapping keyed by an event loop (or its `id()`) whose values are bound to that loop (an asyncio "
            "primitive, a pooled client, what a factory handed in makes) and that never lets them go",
    "LK04": "a task nobody keeps: ruff's `RUF006`, a task kept only in a local (a done callback is not a "
            "reference), and tasks created in the list passed to `asyncio.wait` whose pending set is dropped",
    "LK05": "a `threading.Lock` taken again by the thread that holds it, through the module's own functions or a "
            "class's own methods and properties (`self._lock`); and ruff's `ASYNC` rules for blocking calls in "
            "`async def`",
    "LK06": "`create_async_engine`, `aiohttp.ClientSession`, `asyncpg.create_pool` or `httpx.AsyncClient` created at "
            "import, as a class attribute, by an `lru_cache` function or by the `__init__` of an object kept there, "
            "in a package (or a folder of modules) that also starts event loops of its own (`asyncio.run`)",
    "LK07": "a Celery queue that `task_routes` sends tasks to and that no worker consumes, read from Procfiles, "
            "compose files, Kubernetes manifests, systemd units and the shell scripts they run",
    "LK08": "an `async def` route that calls a synchronous client (a `def` of the project that reaches requests, "
            "`httpx.Client`, `time.sleep`...) on the event loop, and an HTTP middleware that writes its access line "
            "only after `await call_next(...)`",
    "LK09": "`asyncio.wait_for` or `asyncio.timeout` around one step of an async generator (`anext(gen)`, "
            "`gen.__anext__()`, `asend`) in a loop that sends something on timeout: the timeout closes the generator",
    "LK10": "an exception that `gather(..., return_exceptions=True)` handed back, reported at WARNING or above "
            "without `exc_info` (its type's name or its text only), or with `log.exception()` outside an `except` "
            "block, where it attaches nothing",
    "LK11": "an HTTP write (`post`, `patch`) sent again after an error, in an `except` block or a retry loop, "
            "without an Idempotency-Key made before the first attempt (none, or a new one per attempt); and a "
            "Lambda-style `handler(event, context)` whose `asyncio.run` opens a new client every invocation",
    "LK12": "`asyncio.run` or `run_until_complete` reached from an `async def`, on the running loop's thread: a "
            "plain function of the package that starts a loop, called in a coroutine or in a task it is handed to; "
            "and `nest_asyncio.apply()`, which hides the error by blocking the loop",
    "LK13": "an event-loop watchdog that runs as a task on the loop it watches (it times its own "
            "`asyncio.sleep`), and `sys.exit(status)` in a function a `threading.Thread` runs, which ends that "
            "thread only",
    "LK14": "a container whose PID 1 is a shell that runs the Python service as its child, so SIGTERM is dropped: "
            "an entrypoint script whose last command starts Python without `exec`, or pipes it into another program, "
            "or starts it in the background with no trap that forwards SIGTERM and waits until it has exited (under "
            "`set -e`, an interrupted `wait` ends the script), and a Dockerfile `CMD`/`ENTRYPOINT` in "
            "shell form, or through `sh -c`, that starts Python",
    "LK15": "a pool, executor or worker count sized from the host's CPUs (`os.cpu_count()`, "
            "`multiprocessing.cpu_count()`, `os.process_cpu_count()`, `psutil.cpu_count()`) where the cgroup's CPU "
            "quota is not read, and a `ThreadPoolExecutor()`/`ProcessPoolExecutor()` without a size kept for the "
            "service's life or made the loop's default executor",
    "LK16": "a memory budget taken from the host's memory (`psutil.virtual_memory()`, `SC_PHYS_PAGES`, "
            "/proc/meminfo's MemTotal) where the cgroup's limit is not read, and an unbounded `asyncio.Queue` that "
            "a producer fills from a feed it does not control (`async for`, stream or socket reads) while a "
            "consumer drains it",
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
    """The top of the package a module belongs to: the folder of its outermost `__init__.py`;
    for a module in a folder without one (a namespace package, an app's folder of modules),
    that folder, whose modules import each other as one package does."""
    folder = path.absolute().parent  # absolute: the parent of a relative "." is "." again, forever
    if not (folder / "__init__.py").exists():
        return folder
    while folder.parent != folder and (folder.parent / "__init__.py").exists():
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


class NewerSyntax(SyntaxError):
    """Python could not parse the module: maybe it is written for a newer Python."""


def _parse(path: Path, text: str) -> tuple[ast.Module | None, str]:
    """The module and "", or None and the warning line that says why it could not be parsed.
    A syntax error raises NewerSyntax: the newest Python on the machine may read it."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)  # invalid escapes in old code: not ours to report
            return ast.parse(text, filename=str(path)), ""
    except SyntaxError as exc:
        raise NewerSyntax(exc.msg, (str(path), exc.lineno, exc.offset, exc.text)) from exc
    except ValueError as exc:  # a null byte
        return None, f"{path}: not parsed, so not scanned ({exc})"
    except (RecursionError, MemoryError) as exc:  # x = 1 + 1 + ... with thousands of terms
        return None, f"{path}: not parsed, so not scanned ({_exhausted(exc)})"


def _parse_newer(retry: dict[Path, tuple[str, NewerSyntax]], modules: dict, report: "Report") -> None:
    """Modules this Python could not parse, read by the newest Python on the machine; one warning
    for each that it cannot read either, with both reasons."""
    parsed, problems = newer_syntax.parse({path: text for path, (text, _) in retry.items()})
    modules.update(parsed)
    for path, (_, exc) in retry.items():
        if path in problems:
            where = f":{exc.lineno}" if exc.lineno else ""
            python = ".".join(map(str, sys.version_info[:2]))
            report.warnings.append(f"{path}{where}: not parsed, so not scanned ({exc.msg} on Python {python}; "
                                   f"{problems[path]})")


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
    containers: dict[Path, str] = {}  # Dockerfiles and entrypoint scripts, for LK14
    named = {Path(p) for p in paths if Path(p).is_file()}  # a shell script named on the command line is judged
    retry: dict[Path, tuple[str, NewerSyntax]] = {}
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
            try:
                tree, problem = _parse(path, text)
            except NewerSyntax as exc:
                retry[path] = (text, exc)
                continue
            if tree is None:
                report.warnings.append(problem)
            else:
                modules[path] = tree
        elif celery_routes.is_deploy_file(path):
            deploy[path] = text
        elif pid1_rules.is_container_file(path) or (path in named and path.suffix in (".sh", ".bash")):
            containers[path] = text
    if retry:
        _parse_newer(retry, modules, report)
        modules = dict(sorted(modules.items()))
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
    # LK08 follows calls across the project's defs only when some module has an async route
    blocking = blocking_rules.Blocking(names.values()) \
        if "LK08" in wanted and any(blocking_rules.has_routes(n) for n in names.values()) else None
    # LK12 follows loop starters across each package's modules
    starters = nested_loop_rules.Starters(names, {path: _package_root(path) for path in names}) \
        if "LK12" in wanted and names else None
    for path in modules:
        try:
            judged = list(python_rules.check(names[path], _package_root(path) in loop_packages))
            judged += blocking_rules.check(names[path], blocking)
            judged += [*stream_rules.check(names[path]), *logging_rules.check(names[path])]
            judged += [*invocation_rules.check(names[path]), *watchdog_rules.check(names[path])]
            judged += nested_loop_rules.check(path, names[path], starters)
            judged += [*cpu_quota_rules.check(names[path]), *memory_rules.check(names[path])]
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
        _lk07(routes, deploy, add, report, sources)
    if "LK14" in wanted and containers:
        _lk14(containers, deploy, add, report, sources)
    report.findings = sorted(found, key=lambda f: (f.path, f.line, f.column, f.rule))
    report.seconds = time.perf_counter() - started
    return report


def _lk07(routes: list[celery_routes.Routes], deploy_files: dict[Path, str], add, report: Report,
          sources: dict[Path, list[str]]) -> None:
    default = routes[0].default_queue
    routed = set().union(*(r.queues for r in routes)) | {default}
    setting = f"{Path(routes[0].where[0]).name}:{routes[0].where[1]}"

    scripts: dict[Path, str | None] = {}

    def read_script(script: Path) -> str | None:
        """A shell script a deploy file runs: read once within the scan's limits, its lines kept for ignore comments."""
        if script not in scripts:
            try:
                scripts[script] = files.read(script)
                sources[script] = scripts[script].splitlines()
            except files.Skipped as exc:
                report.warnings.append(f"{script}: {exc}")
                scripts[script] = None
        return scripts[script]

    for path, text in deploy_files.items():
        try:
            consumed, workers = celery_routes.consumed_by_file(path, default, text, read_script)
        except Exception as exc:  # noqa: BLE001 - a deploy file we cannot read (YAML error, alias bomb, nesting
            # too deep for PyYAML's recursion, a bad date) is a warning, never a crash
            first = " ".join(str(exc).split())[:160]  # a YAML error spans lines: one line per file
            report.warnings.append(f"{path}: not read as a deploy file ({exc.__class__.__name__}: {first})")
            continue
        missing = routed - consumed
        if not workers or not missing:  # a file that starts no worker deploys no consumer to judge
            continue
        if any("$" in queue for queue in consumed):  # -Q "$QUEUES": set where the scan cannot see
            continue
        dormant = [w for w in workers if not w.started_by_default]
        asleep = f" ({dormant[0].where()} is not started by a plain `docker compose up`)" if dormant else ""
        first = workers[0]
        where, line = (Path(first.script), first.line) if first.script else (path, first.line)
        starts = f"{path.name} starts (this one through this script)" if first.script else "this file starts"
        add("LK07", where, line, 1,
            f"the Celery workers {starts} consume only "
            f"{', '.join(sorted(consumed)) or 'nothing'}{asleep}; "
            f"tasks routed to {', '.join(sorted(missing))} (task_routes at {setting}) are accepted and stay "
            "PENDING for good, with nothing logged: add them to a worker's -Q")


def _lk14(containers: dict[Path, str], deploy_files: dict[Path, str], add, report: Report,
          sources: dict[Path, list[str]]) -> None:
    scripts: dict[Path, str | None] = {}

    def read_script(script: Path) -> str | None:
        """A script a Dockerfile runs: read once within the scan's limits, its lines kept for ignore comments."""
        if script not in scripts:
            try:
                scripts[script] = files.read(script)
                sources[script] = scripts[script].splitlines()
            except files.Skipped as exc:
                report.warnings.append(f"{script}: {exc}")
                scripts[script] = None
        return scripts[script]

    try:
        for finding in pid1_rules.check(containers, read_script, deploy_files):
            add("LK14", finding.path, finding.line, 1, finding.message)
    except (RecursionError, MemoryError) as exc:  # shell text nested past reading: one warning, the rest stands
        report.warnings.append(f"Dockerfiles and entrypoint scripts: not all judged for LK14 ({_exhausted(exc)})")


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
