"""`loopkata scan`: every kata's starter flagged by its rule on the right line, nothing on the
reference fixes and variants, every finding on real async packages explained, and the
interfaces a team wires into CI (exit status, JSON, SARIF, ignore comments, pre-commit)."""
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from loopkata import scan
from loopkata.learner import progress
from loopkata.model import alternatives, catalogue
from loopkata.scan import bounded_yaml, celery_routes, command, files, output, python_rules, ruff_rules

ROOT = Path(__file__).resolve().parents[1]
VERDICTS = tomllib.loads((ROOT / "tests" / "scan_verdicts.toml").read_text())
KATAS = [k for k in catalogue.load(ROOT) if f"LK{k.number:02d}" in scan.RULES]

# Where each starter's bug is: (file under the kata's path, the text of the line that must be flagged)
BUG_LINES = {
    "bound-semaphore": [("", "_limiter = ConcurrencyLimiter()")],
    "loop-id-reuse": [("", "if _session is None or _session_loop_id != id(loop):")],
    "leaked-loops": [("", "lock = self._locks[loop] = asyncio.Lock()")],
    "collected-tasks": [("", "asyncio.create_task(self._write_behind(sku, price))")],
    "lock-reentry": [("store.py", "doc = load(path)"), ("store.py", "save(path, doc)")],
    "cross-loop-pool": [("db.py", "engine = create_async_engine(database_url(), pool_size=5, max_overflow=5)")],
    "silent-queue": [("Procfile", "worker: celery -A reports.celery_app worker --loglevel=INFO"),
                     ("docker-compose.yml", "command: celery -A reports.celery_app worker --loglevel=INFO")],
    "blocking-handler": [("app.py", "text = model.complete(body.prompt)"), ("access_log.py", "access_log.info(")],
    "keepalive-stream": [("keepalive.py", "event = await asyncio.wait_for(anext(events), timeout=interval)")],
    "swallowed-traceback": [("", 'log.error("step %s failed: %s", name, type(outcome).__name__)')],
    "warm-invocation": [("", "async with aiohttp.ClientSession(timeout=TIMEOUT) as session:")],
    "nested-run": [("jobs.py", "result = task(*args)")],
    "half-dead-pod": [("watchdog.py", "await asyncio.sleep(tick)")],
    "pid1-sigterm": [("entrypoint.sh", "python service.py")],
    "cpu-quota": [("runtime.py", "return os.cpu_count() or 1"),
                  ("runtime.py", 'loop.set_default_executor(ThreadPoolExecutor(thread_name_prefix="blocking"))')],
    "memory-guard": [("limits.py", 'return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")'),
                     ("ingest.py", "queue: asyncio.Queue = asyncio.Queue()")],
}
# Correct fixes of one kata that another kata's rule flags, each a true finding of that rule
OTHER_KATAS_BUGS = {
    ("lock-reentry", "LK08"): "kata 05's service keeps the access log kata 08 teaches to fix: its middleware writes "
                              "its one line after `await call_next(...)`, so a request that hangs leaves none",
    ("loop-id-reuse", "LK11"): "kata 02's session-per-invocation variant runs each invocation with asyncio.run and "
                               "opens a new session in it: correct, and it pays the new TCP connection per warm "
                               "invocation that kata 11 teaches to keep",
}
SAMPLES = ROOT / "tests" / "scan_samples"
EXPECTED = re.compile(r"#\s*expect:\s*(LK\d\d(?:\s*,\s*LK\d\d)*)")


def run_cli(*args, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "loopkata", "scan", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def write(folder: Path, files: dict) -> Path:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(textwrap.dedent(text).lstrip())
    return folder


@pytest.mark.parametrize("kata", KATAS, ids=[k.id for k in KATAS])
def test_every_kata_starter_is_flagged_by_its_rule_on_the_line_of_the_bug(kata, tmp_path, monkeypatch):
    """the scan flags each kata's starter as shipped with the kata's own rule, on the line of the bug"""
    monkeypatch.setenv("LOOPKATA_STATE", str(tmp_path / "state"))
    starter = progress.pristine_starter(kata)
    rule = f"LK{kata.number:02d}"
    found = {(Path(f.path).resolve(), f.line) for f in scan.scan([starter]).findings if f.rule == rule}
    assert kata.id in BUG_LINES, f"name the line of {kata.id}'s bug in BUG_LINES, so its rule is held to it"
    for name, text in BUG_LINES[kata.id]:
        path = (starter / name if name else starter).resolve()
        lines = [n for n, line in enumerate(path.read_text().splitlines(), 1) if line.strip() == text]
        assert len(lines) == 1, f"expected the line {text!r} once in {kata.id}'s starter, found it {len(lines)} times"
        assert (path, lines[0]) in found, (
            f"expected {rule} on {path.name}:{lines[0]} ({text!r}) in {kata.id}'s starter, but it flagged "
            f"{sorted(f'{p.name}:{n}' for p, n in found) or 'nothing'}")


def _kata_of(path: str, variants: Path) -> str:
    """The kata a file of solutions/ or of the variants built into `variants` (<kata>/<variant>) belongs to."""
    resolved = Path(path).resolve()
    if variants.resolve() in resolved.parents:
        return resolved.relative_to(variants.resolve()).parts[0]
    relative = resolved.relative_to(ROOT)
    return next(k.id for k in catalogue.load(ROOT) if Path(k.path).name == relative.parts[1])


def test_no_finding_on_any_reference_fix_or_variant(tmp_path):
    """nothing is flagged in the reference fixes and the variants: they are correct (another kata's bug they keep is listed)"""
    variants = tmp_path / "variants"
    for kata in catalogue.load(ROOT):  # each variant as the grader builds it from its base
        for variant in kata.variants:
            alternatives.build(kata, variant, variants / kata.id)
    report = scan.scan([ROOT / "solutions", variants])
    assert report.files > 40 and not report.warnings, report.warnings
    unexpected = [f for f in report.findings if (_kata_of(f.path, variants), f.rule) not in OTHER_KATAS_BUGS]
    assert not unexpected, "expected no finding on correct code, got:\n" + "\n".join(
        f"{f.path}:{f.line}: {f.rule} {f.message}" for f in unexpected)
    listed = {(_kata_of(f.path, variants), f.rule) for f in report.findings}
    assert listed == set(OTHER_KATAS_BUGS), f"expected every listed bug of another kata to be found, found {listed}"


def test_lk06_leaves_alone_an_engine_with_nullpool_which_keeps_no_connection_between_loops(tmp_path):
    """LK06 flags a pooled engine shared with loops the package starts, not one made with NullPool for them"""
    files = {"__init__.py": "", "jobs.py": """
        import asyncio

        from . import db


        def run_job():
            return asyncio.run(db.ping())
    """}
    pooled = write(tmp_path / "pooled", {**files, "db.py": """
        from sqlalchemy.ext.asyncio import create_async_engine

        engine = create_async_engine("postgresql+asyncpg://db/orders")
    """})
    unpooled = write(tmp_path / "unpooled", {**files, "db.py": """
        from sqlalchemy.ext.asyncio import create_async_engine
        from sqlalchemy.pool import NullPool

        engine = create_async_engine("postgresql+asyncpg://db/orders", pool_size=5)
        job_engine = create_async_engine("postgresql+asyncpg://db/orders", poolclass=NullPool)  # for the jobs' loops
    """})
    found = [(Path(f.path).name, f.line) for f in scan.scan([pooled], select={"LK06"}).findings]
    assert found == [("db.py", 3)], f"expected LK06 on the pooled engine shared with asyncio.run's loops, got {found}"
    found = [(Path(f.path).name, f.line) for f in scan.scan([unpooled], select={"LK06"}).findings]
    assert found == [], f"expected nothing flagged beside an engine that pools nothing for the jobs, got {found}"


@pytest.mark.parametrize("case", sorted(p.name for p in SAMPLES.iterdir()))
def test_a_real_world_spelling_is_flagged_on_its_line_and_its_fixed_twin_is_clean(case):
    """each sample in tests/scan_samples is flagged exactly on the lines marked `# expect: LKnn`, and its fixed twin gets nothing"""
    bug, fixed = SAMPLES / case / "bug", SAMPLES / case / "fixed"
    expected = {(path.relative_to(bug).as_posix(), number, rule.strip())
                for path in bug.rglob("*") if path.is_file()
                for number, line in enumerate(path.read_text().splitlines(), 1)
                if (marked := EXPECTED.search(line)) for rule in marked.group(1).split(",")}
    assert expected, f"expected {case}/bug to mark the lines the scan must flag with `# expect: LKnn`"
    report = scan.scan([bug])
    found = {(Path(f.path).relative_to(bug).as_posix(), f.line, f.rule) for f in report.findings}
    if any("no newer Python was found" in w for w in report.warnings):
        pytest.skip(f"{case} is written in a newer Python's syntax, and there is no newer Python here to parse it")
    assert not report.warnings, f"expected {case}/bug to be read without a warning, got {report.warnings}"
    assert found == expected, (f"{case}: expected findings on {sorted(expected)}, got {sorted(found)}; missed "
                               f"{sorted(expected - found)}, extra {sorted(found - expected)}")
    clean = scan.scan([fixed])
    assert not clean.warnings and not clean.findings, (
        f"{case}: expected the fixed twin to scan clean, got " + "; ".join(
            clean.warnings + [f"{Path(f.path).name}:{f.line} {f.rule} {f.message}" for f in clean.findings]))


def test_every_finding_on_real_async_packages_has_a_verdict():
    """every finding on the installed aiohttp, starlette, fastapi, uvicorn, httpx, anyio and celery is explained"""
    import importlib.util

    folders = [Path(importlib.util.find_spec(name).origin).parent for name in VERDICTS["packages"]]
    report = scan.scan(folders)
    site = folders[0].parent
    found = {(Path(f.path).relative_to(site).as_posix() + f":{f.line}", f.rule): f.message for f in report.findings}
    listed = {(v["where"], v["rule"]): v for v in VERDICTS["finding"]}
    unexplained = sorted(set(found) - set(listed))
    stale = sorted(set(listed) - set(found))
    assert not unexplained, "findings with no verdict in tests/scan_verdicts.toml:\n" + "\n".join(
        f"{where} {rule}: {found[(where, rule)]}" for where, rule in unexplained)
    assert not stale, f"verdicts in tests/scan_verdicts.toml for findings the scan no longer reports: {stale}"
    assert all(v["verdict"] in ("true positive", "false positive") and v["why"] for v in VERDICTS["finding"])
    assert report.lines > 50_000, f"expected the packages to hold real code, scanned only {report.lines} lines"


def test_exit_status_says_whether_anything_was_found(tmp_path):
    """exit status 1 when something is found, 0 when nothing is, 2 for a path that does not exist"""
    write(tmp_path, {"bad.py": "import asyncio\nLOCK = asyncio.Lock()\n", "good.py": "import asyncio\n"})
    found = run_cli(tmp_path / "bad.py")
    assert found.returncode == 1 and "bad.py:2:1: LK01" in found.stdout, found.stdout + found.stderr
    clean = run_cli(tmp_path / "good.py")
    assert clean.returncode == 0 and "No findings" in clean.stdout, clean.stdout + clean.stderr
    missing = run_cli(tmp_path / "nowhere")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr and "nowhere" in missing.stderr


def test_a_file_that_does_not_parse_is_one_warning_not_a_crash(tmp_path):
    """a file with a syntax error, or a broken YAML file, gets one warning line each, and the rest is scanned"""
    write(tmp_path, {"broken.py": "def f(:\n", "broken.yml": "services: [unclosed\n",
                     "bad.py": "import asyncio\nLOCK = asyncio.Lock()\n",
                     "celeryconfig.py": "task_routes = {'a.*': {'queue': 'a'}}\n"})  # routes: deploy files are read
    out = run_cli(tmp_path)
    warnings = [line for line in out.stdout.splitlines() if line.startswith("warning:")]
    assert out.returncode == 1 and "Traceback" not in out.stdout + out.stderr, out.stdout + out.stderr
    assert len(warnings) == 2 and "broken.py:1" in warnings[0] and "broken.yml" in warnings[1], warnings
    assert "bad.py:2:1: LK01" in out.stdout


def test_an_ignore_comment_silences_only_the_rules_it_names(tmp_path):
    """`# loopkata: ignore[LK01]` silences LK01 on its line; a bare `# loopkata: ignore` silences every rule"""
    write(tmp_path, {"m.py": """
        import asyncio
        A = asyncio.Lock()  # loopkata: ignore[LK01]
        B = asyncio.Lock()  # loopkata: ignore[LK02]
        C = asyncio.Event()  # loopkata: ignore
        D = asyncio.Queue()
    """})
    lines = sorted(f.line for f in scan.scan([tmp_path]).findings)
    assert lines == [3, 5], f"expected LK01 on lines 3 and 5 only, got lines {lines}"


def test_select_and_ignore_work_like_ruffs(tmp_path):
    """--select and --ignore take rule ids or prefixes; an unknown rule is one sentence and exit 2"""
    write(tmp_path, {"m.py": """
        import asyncio
        LOCK = asyncio.Lock()

        async def f():
            loop = asyncio.get_running_loop()
            return id(loop) == 3
    """})
    assert {f.rule for f in scan.scan([tmp_path]).findings} == {"LK01", "LK02"}
    assert {f.rule for f in scan.scan([tmp_path], select=scan.rule_ids("LK02")).findings} == {"LK02"}
    assert {f.rule for f in scan.scan([tmp_path], ignore=scan.rule_ids("lk01")).findings} == {"LK02"}
    assert {f.rule for f in scan.scan([tmp_path], select=scan.rule_ids("LK0")).findings} == {"LK01", "LK02"}
    wrong = run_cli("--select", "LK99", tmp_path)
    assert wrong.returncode == 2 and wrong.stderr.count("\n") == 1 and "LK99" in wrong.stderr, wrong.stderr


def test_json_output_lists_each_finding_with_its_notebook(tmp_path):
    """--format json gives each finding's rule, path, line, column, message and notebook"""
    write(tmp_path, {"m.py": "import asyncio\nLOCK = asyncio.Lock()\n"})
    out = run_cli("--format", "json", tmp_path / "m.py")
    data = json.loads(out.stdout)
    [finding] = data["findings"]
    assert finding["rule"] == "LK01" and finding["line"] == 2 and finding["column"] == 1
    assert finding["notebook"] == "notebooks/01_bound_semaphore.ipynb"
    assert data["files"] == 1 and data["warnings"] == []


def test_sarif_output_has_what_code_scanning_requires(tmp_path):
    """--format sarif writes SARIF 2.1.0 with the fields GitHub code scanning requires"""
    write(tmp_path, {"pkg/m.py": "import asyncio\nLOCK = asyncio.Lock()\n"})
    out = run_cli("--format", "sarif", "pkg", cwd=tmp_path)
    log = json.loads(out.stdout)
    assert log["version"] == "2.1.0" and "sarif-2.1.0" in log["$schema"]
    [run] = log["runs"]
    driver = run["tool"]["driver"]
    ids = [rule["id"] for rule in driver["rules"]]
    assert driver["name"] == "loopkata" and ids == list(scan.RULES)
    assert all(rule["shortDescription"]["text"] and rule["helpUri"].startswith("https://") for rule in driver["rules"])
    [result] = run["results"]
    assert result["ruleId"] == "LK01" and ids[result["ruleIndex"]] == "LK01" and result["message"]["text"]
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "pkg/m.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"] == {"startLine": 2, "startColumn": 1}


def test_lk07_reads_every_kind_of_deploy_file(tmp_path):
    """LK07 reads worker commands in a Procfile, compose (sh -c too), a Kubernetes manifest and a systemd unit"""
    write(tmp_path, {
        "app/__init__.py": "",
        "app/celeryconfig.py": """
            task_default_queue = "default"
            task_routes = {"reports.*": {"queue": "reports"}, "mail.*": "mail"}
        """,
        "Procfile": "web: gunicorn app\nworker: celery -A app worker -Q reports,mail,default\n",
        "docker-compose.yml": """
            services:
              worker:
                command: sh -c "sleep 1 && celery -A app worker -Q reports,default"
        """,
        "k8s/worker.yaml": """
            apiVersion: apps/v1
            kind: Deployment
            spec:
              template:
                spec:
                  containers:
                    - name: worker
                      command: ["celery", "-A", "app", "worker"]
                      args: ["--queues=reports,mail"]
        """,
        "deploy/worker.service": "[Service]\nExecStart=/usr/bin/celery -A app worker --queues mail,reports,default\n",
    })
    found = {(Path(f.path).name, f.line): f.message for f in scan.scan([tmp_path]).findings}
    assert set(found) == {("docker-compose.yml", 3), ("worker.yaml", 8)}, found
    assert "tasks routed to mail " in found[("docker-compose.yml", 3)]
    assert "tasks routed to default " in found[("worker.yaml", 8)]


def test_lk07_counts_a_compose_worker_behind_a_profile_as_not_started(tmp_path):
    """LK07: a compose worker behind `profiles` is not started by `docker compose up`, so its queues have no consumer"""
    write(tmp_path, {
        "app/__init__.py": "",
        "app/celeryconfig.py": 'task_routes = {"reports.*": {"queue": "reports"}}\n',
        "split/docker-compose.yml": """
            services:
              worker-reports:
                profiles: ["reports"]
                command: celery -A app worker -Q reports
              worker:
                command: celery -A app worker -Q celery
        """,
        "only/docker-compose.yml": """
            services:
              worker:
                profiles: [jobs]
                command: celery -A app worker -Q reports,celery
        """,
        "started/docker-compose.yml": """
            services:
              worker-reports:
                profiles: []
                command: celery -A app worker -Q reports
              worker:
                command: celery -A app worker -Q celery
        """,
    })
    found = {(Path(f.path).parent.name, f.line): f.message for f in scan.scan([tmp_path]).findings}
    assert set(found) == {("split", 4), ("only", 4)}, found  # on the line of the worker that does not start
    asleep = "(the service worker-reports (behind profiles: reports) is not started by a plain `docker compose up`)"
    assert f"consume only celery {asleep}; tasks routed to reports " in found[("split", 4)], found[("split", 4)]
    assert "consume only nothing (the service worker (behind profiles: jobs) is not started" in found[("only", 4)], \
        found[("only", 4)]
    consumed, workers = celery_routes.consumed_by_file(tmp_path / "split" / "docker-compose.yml")
    assert consumed == {"celery"} and [w.service for w in workers] == ["worker-reports", "worker"], workers
    assert [w.profiles for w in workers] == [("reports",), ()]


def test_lk01_follows_the_spellings_and_the_object_that_holds_the_primitive(tmp_path):
    """LK01 finds `from asyncio import Lock`, class attributes, and a global holding an object whose __init__ makes one"""
    write(tmp_path, {"m.py": """
        import asyncio
        from asyncio import Semaphore as S

        LIMIT = S(3)

        class Cache:
            lock = asyncio.Lock()

        class Limiter:
            def __init__(self):
                self._sem = asyncio.Semaphore(2)

        _limiter = None

        def limiter():
            global _limiter
            if _limiter is None:
                _limiter = Limiter()
            return _limiter

        def per_loop():
            global _limiter
            loop = asyncio.get_running_loop()   # rebuilt for each loop: not flagged
            _limiter = Limiter()
            return _limiter

        def fine():
            return asyncio.Lock()
    """})
    assert sorted(f.line for f in scan.scan([tmp_path]).findings) == [4, 7, 18]


def test_lk05_finds_a_lock_taken_again_through_calls(tmp_path):
    """LK05 finds a threading.Lock taken again through a call, not an RLock, plus ruff's blocking calls in async def"""
    write(tmp_path, {"m.py": """
        import threading, time

        _lock = threading.Lock()
        _rlock = threading.RLock()

        def read():
            with _lock:
                return 1

        def update():
            with _lock:
                return read()

        def reentrant():
            with _rlock:
                with _rlock:
                    return 2

        async def handler():
            time.sleep(1)
    """})
    found = sorted((f.line, f.rule) for f in scan.scan([tmp_path]).findings)
    assert found == [(12, "LK05"), (20, "LK05")], found


def test_the_pre_commit_hook_runs_the_scan():
    """.pre-commit-hooks.yaml declares a hook whose entry is the installed `loopkata scan` command"""
    [hook] = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "loopkata-scan" and hook["language"] == "python"
    assert hook["entry"].split()[:2] == ["loopkata", "scan"]
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["scripts"]["loopkata"] == "loopkata.cli:main"
    assert {"pyyaml", "ruff"} <= {d.split("=")[0].split(">")[0].strip() for d in pyproject["project"]["dependencies"]}


def test_the_notebook_view_names_files_from_the_copy_and_prints_no_timing(tmp_path, capsys):
    """scan.show prints the findings with paths from the scanned folder's parent and no timing"""
    write(tmp_path, {"pkg/m.py": "import asyncio\nLOCK = asyncio.Lock()\n"})
    scan.show(tmp_path / "pkg")
    out = capsys.readouterr().out
    assert out.startswith("pkg/m.py:2:1: LK01") and out.rstrip().endswith("`# loopkata: ignore[LKnn]`")
    assert " s)" not in out and str(tmp_path) not in out


def test_the_notebook_links_outside_a_loop_katas_folder_name_the_kata(tmp_path, monkeypatch):
    """scanning another project, a finding names the kata that teaches it"""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LOOPKATA_ROOT", raising=False)
    output.notebook.cache_clear()
    try:
        assert output.notebook("LK03") == "Loop Katas, kata 03"
    finally:
        output.notebook.cache_clear()


# --- hostile input: one warning per file, bounded in time and memory ------------------

HANG_DEADLINE = 300  # seconds, only against a hang: a bounded probe is judged by what it reports
ADDRESS_SPACE = 1536 * 1024 * 1024  # the child's cap, so a regression cannot take the machine with it
PEAK_MB = 256  # the scan of a small folder peaks near 30 MB; an expansion or a whole parse shows far above


@dataclass
class Bounded:
    returncode: int | None  # None: killed at the deadline
    stdout: str
    stderr: str
    seconds: float
    peak_mb: float  # the child's own peak resident memory, from wait4

    def warnings(self) -> list[str]:
        return [line for line in self.stdout.splitlines() if line.startswith("warning:")]

    def __str__(self) -> str:
        return (f"exit {self.returncode} after {self.seconds:.1f} s, peak {self.peak_mb:.0f} MB\n"
                f"stdout:\n{self.stdout[-3000:]}\nstderr:\n{self.stderr[-3000:]}")


# Caps the address space, runs the scan and writes its peak resident memory (KB) to a file.
# The scan is a grandchild: a child's peak starts at its parent's at fork (and survives exec),
# so a direct child of this test process would report pytest's memory as its own.
MEASURED = """
import os, resource, subprocess, sys
cap, report, *args = sys.argv[1:]
resource.setrlimit(resource.RLIMIT_AS, (int(cap), int(cap)))
child = subprocess.Popen([sys.executable, "-m", "loopkata", "scan", *args])
_, status, usage = os.wait4(child.pid, 0)
with open(report, "w") as f:
    f.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def bounded_scan(*args, cwd: Path) -> Bounded:
    """`loopkata scan` capped in address space, with its peak memory and a deadline only against a hang."""
    report = cwd / ".scan.peak"
    started = time.monotonic()
    child = subprocess.Popen([sys.executable, "-c", MEASURED, str(ADDRESS_SPACE), str(report), *map(str, args)],
                             cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    try:
        stdout, stderr = child.communicate(timeout=HANG_DEADLINE)
        returncode = child.returncode
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        stdout, stderr = child.communicate()
        returncode = None
    peak_kb = int(report.read_text()) if report.exists() else 0
    return Bounded(returncode, stdout, stderr, time.monotonic() - started, peak_kb / 1024)


def assert_bounded(run: Bounded, expected_exit: int) -> None:
    assert run.returncode is not None, f"expected the scan to end, it was still running after {HANG_DEADLINE} s:\n{run}"
    assert "Traceback" not in run.stdout + run.stderr, f"expected no traceback, got:\n{run}"
    assert run.returncode == expected_exit, f"expected exit {expected_exit}, got:\n{run}"
    assert run.peak_mb < PEAK_MB, f"expected the scan to stay under {PEAK_MB} MB, it peaked at:\n{run}"


BAD = "import asyncio\nLOCK = asyncio.Lock()\n"  # one LK01 finding, so the rest is seen to be scanned


def test_an_expression_of_3000_terms_is_one_warning_and_the_rest_is_scanned(tmp_path):
    """`x = 1 + 1 + ...` with 3,000 terms: no crash, at most one warning naming the file and why, the other files scanned"""
    write(tmp_path, {"deep.py": "x = " + " + ".join(["1"] * 3000) + "\n", "bad.py": BAD})
    run = bounded_scan(".", cwd=tmp_path)
    assert_bounded(run, 1)
    # 3.11 and 3.12 cannot analyse it (RecursionError); 3.13 can, and then there is nothing to warn of
    expected = "warning: deep.py: not parsed, so not scanned (RecursionError: nested too deeply to analyse)"
    assert run.warnings() in ([expected], []), f"expected at most one warning, for deep.py, got:\n{run}"
    assert "bad.py:2:1: LK01" in run.stdout, f"expected bad.py still scanned, got:\n{run}"
    print(f"3,000 terms: {run.seconds:.2f} s, peak {run.peak_mb:.0f} MB")


BILLION_LAUGHS = "\n".join(
    ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]'] +
    [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)] +
    ["services:", "  worker:", "    command: *a9", ""])
ROUTES = {"app/__init__.py": "", "app/celeryconfig.py": 'task_routes = {"reports.*": {"queue": "reports"}}\n'}


def test_a_yaml_alias_bomb_a_recursive_alias_or_deep_nesting_is_one_warning_in_bounded_time_and_memory(tmp_path):
    """a billion-laughs compose file, recursive aliases and YAML nested 100,000 deep: one warning each, within bounds, and the other deploy files judged"""
    write(tmp_path, {**ROUTES, "bomb/docker-compose.yml": BILLION_LAUGHS,
                     "deep/docker-compose.yml": "services: " + "[" * 100_000 + "]" * 100_000 + "\n",
                     "loop/k8s.yaml": "kind: Deployment\nspec: &spec\n  template: *spec\n",
                     "loop/docker-compose.yml": "services: &s\n  worker:\n    command: celery -A app worker\n    x: *s\n",
                     "Procfile": "worker: celery -A app worker -Q celery\n"})
    run = bounded_scan(".", cwd=tmp_path)
    assert_bounded(run, 1)
    found = run.warnings()
    assert len(found) == 4, f"expected one warning per hostile YAML file, got:\n{run}"
    assert "bomb/docker-compose.yml" in found[0] and "expand it past 200,000 nodes" in found[0], found[0]
    assert "deep/docker-compose.yml" in found[1] and "RecursionError" in found[1], found[1]
    assert "loop/docker-compose.yml" in found[2] and "recursive alias" in found[2], found[2]
    assert "loop/k8s.yaml" in found[3] and "recursive alias" in found[3], found[3]
    assert "Procfile:1:1: LK07" in run.stdout, f"expected the Procfile still judged, got:\n{run}"
    print(f"alias bomb, recursive aliases, nesting 100,000 deep: {run.seconds:.2f} s, peak {run.peak_mb:.0f} MB")


def test_compose_anchors_and_aliases_are_still_read(tmp_path):
    """a compose file that shares a worker's command through an anchor and aliases is read as before"""
    write(tmp_path, {**ROUTES, "docker-compose.yml": """
        x-command: &command celery -A app worker -Q celery
        services:
          worker:
            command: *command
          other:
            command: *command
            environment: {A: "1"}
    """})
    report = scan.scan([tmp_path])
    assert not report.warnings, report.warnings
    assert [(Path(f.path).name, f.rule) for f in report.findings] == [("docker-compose.yml", "LK07")], report.findings
    nodes = bounded_yaml.compose_all((tmp_path / "docker-compose.yml").read_text())
    assert bounded_yaml.expanded_size(nodes[0]) < 100, "expected a small file to measure small"


def test_a_file_over_the_size_limit_is_skipped_with_a_warning_that_says_the_limit(tmp_path):
    """a 20 MB Python file and a 300 KB YAML file are skipped, each with a warning that says the limit, in bounded memory"""
    write(tmp_path, {"bad.py": BAD})
    body = "".join(f"def f{i}(a, b):\n    return a + b + {i}\n" for i in range(600_000))
    (tmp_path / "generated.py").write_text(body)
    (tmp_path / "data.yml").write_text("values:\n" + "  - 1\n" * 60_000)
    assert (tmp_path / "generated.py").stat().st_size > 20_000_000
    run = bounded_scan(".", cwd=tmp_path)
    assert_bounded(run, 1)
    size = (tmp_path / "generated.py").stat().st_size / 2**20
    assert run.warnings() == [
        "warning: data.yml: skipped: 352 KB is over the 256 KB limit for a deploy file",
        f"warning: generated.py: skipped: {size:.1f} MB is over the 2.0 MB limit for a Python file",
    ], f"expected a warning for each big file, got:\n{run}"
    assert "bad.py:2:1: LK01" in run.stdout and "1 finding in 1 file " in run.stdout, run
    print(f"20 MB Python file: {run.seconds:.2f} s, peak {run.peak_mb:.0f} MB")


def test_an_unreadable_folder_is_a_warning_and_a_scan_that_read_nothing_says_so(tmp_path, monkeypatch, capsys):
    """an unreadable folder is one warning naming it; a scan that could read nothing says so, not "No findings in 0 files\""""
    write(tmp_path, {"team/secret/m.py": BAD, "team/ok.py": BAD})
    secret = tmp_path / "team" / "secret"
    listing = files._listing

    def no_permission(folder):  # chmod 000 does not stop root, so root gets what everyone else gets
        if Path(folder) == secret:
            raise PermissionError(13, "Permission denied", str(folder))
        return listing(folder)

    secret.chmod(0)
    if os.geteuid() == 0:
        monkeypatch.setattr(files, "_listing", no_permission)
    try:
        report = scan.scan([tmp_path / "team"])
        status = command.run([str(secret)], None, None, "text")
    finally:
        secret.chmod(0o755)
    assert report.warnings == [f"{secret}: folder not read (Permission denied), so nothing under it was scanned"], \
        f"expected one warning naming the folder, got {report.warnings}"
    assert [Path(f.path).name for f in report.findings] == ["ok.py"], f"expected ok.py still scanned, got {report.findings}"
    assert status == 0, f"expected exit 0 for a scan of the unreadable folder alone (a warning is not a finding), got {status}"
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "Nothing scanned: no file could be read (see the warnings above)", \
        f"expected the summary to say nothing was read, got {out}"
    (tmp_path / "latin1.py").write_bytes(b"name = '\xe9t\xe9'\n")
    run = run_cli(tmp_path / "latin1.py")
    assert run.returncode == 0 and run.stdout.splitlines() == [
        f"warning: {tmp_path / 'latin1.py'}: not read (not UTF-8: invalid continuation byte at byte 8)",
        "Nothing scanned: no file could be read (see the warnings above)"], run.stdout + run.stderr


def test_a_module_too_deep_for_the_rules_is_one_warning(tmp_path, monkeypatch):
    """a module that parses but exhausts a rule (RecursionError, MemoryError) is one warning; the others are judged"""
    write(tmp_path, {"deep.py": "import asyncio\nA = asyncio.Lock()\n", "bad.py": BAD})
    check = python_rules.check

    def exhausted(names, starts_loops):
        if any(isinstance(n, python_rules.ast.Assign) and n.targets[0].id == "A" for n in names.tree.body):
            raise RecursionError("maximum recursion depth exceeded")
        return check(names, starts_loops)

    monkeypatch.setattr(python_rules, "check", exhausted)
    report = scan.scan([tmp_path])
    assert report.warnings == [f"{tmp_path / 'deep.py'}: not scanned (RecursionError: nested too deeply to analyse)"], \
        report.warnings
    assert [Path(f.path).name for f in report.findings] == ["bad.py"], report.findings


def test_a_file_that_makes_ruff_abort_costs_only_that_file_its_ruff_checks(tmp_path, monkeypatch):
    """when ruff aborts on one file, the others are checked by ruff again and that file gets one warning"""
    write(tmp_path, {f"m{i}.py": "import asyncio\n\nasync def f():\n    asyncio.create_task(f())\n" for i in range(5)})
    poisoned = tmp_path / "m3.py"
    real = ruff_rules._check

    def aborts_on_m3(command_, paths):
        if poisoned in paths:
            return None, "exit status -6: thread '<unknown>' has overflowed its stack"
        return real(command_, paths)

    monkeypatch.setattr(ruff_rules, "_check", aborts_on_m3)
    report = scan.scan([tmp_path], select=scan.rule_ids("LK04"))
    assert len(report.warnings) == 1 and str(poisoned) in report.warnings[0] and "overflowed" in report.warnings[0], \
        report.warnings
    ruff_found = sorted(Path(f.path).name for f in report.findings if "RUF006" in f.message)
    assert ruff_found == ["m0.py", "m1.py", "m2.py", "m4.py"], f"expected ruff's RUF006 on every other file, got {ruff_found}"


def test_a_failure_of_the_scanners_own_exits_2_never_1(tmp_path, monkeypatch, capsys):
    """a bug in the scanner itself is one line on stderr and exit 2, never 1 (which means findings)"""
    write(tmp_path, {"bad.py": BAD})

    def broken(names, starts_loops):
        raise KeyError("a rule's own bug")

    monkeypatch.setattr(python_rules, "check", broken)
    status = command.run([str(tmp_path)], None, None, "text")
    captured = capsys.readouterr()
    err = [line for line in captured.err.splitlines() if line.strip()]
    assert status == 2, f"expected exit 2 for the scanner's own failure, got {status}"
    assert len(err) == 1 and "KeyError" in err[0] and "bug in loopkata" in err[0], f"expected one line, got {err}"
    assert not captured.out, f"expected no report when the scan failed, got:\n{captured.out}"


# --- what the rules read beyond the katas' own spellings ------------------------------

def test_lk07_reads_the_shell_script_a_deploy_file_runs(tmp_path):
    """LK07 follows a Procfile or compose command into the shell script it runs (a container path too), with the variables it is given"""
    write(tmp_path, {
        **ROUTES,
        "missing/Procfile": "worker: bin/worker.sh\n",
        "missing/bin/worker.sh": "#!/bin/sh\nset -e\nexec celery -A app worker \\\n  --loglevel=INFO\n",
        "env/Procfile": "worker: CELERY_WORKER_QUEUES=reports,celery bin/worker.sh\n",
        "env/bin/worker.sh": "#!/bin/sh\nexec celery -A app worker\n",
        "exported/docker-compose.yml": "services:\n  worker:\n    command: sh /app/bin/worker.sh\n",
        "exported/bin/worker.sh": "export CELERY_WORKER_QUEUES=reports,celery\nexec celery -A app worker\n",
        "unknown/Procfile": "worker: bin/worker.sh\n",
        "unknown/bin/worker.sh": 'exec celery -A app worker -Q "$QUEUES"\n',
        "outside/Procfile": "worker: ../missing/bin/worker.sh\n",
        "latin1/Procfile": "worker: bin/worker.sh\n",
    })
    (tmp_path / "latin1" / "bin").mkdir()
    (tmp_path / "latin1" / "bin" / "worker.sh").write_bytes(b"# d\xe9marre le worker\nexec celery -A app worker\n")
    report = scan.scan([tmp_path])
    found = {(Path(f.path).relative_to(tmp_path).as_posix(), f.line): f.message for f in report.findings}
    assert report.warnings == [f"{tmp_path / 'latin1' / 'bin' / 'worker.sh'}: not read (not UTF-8: invalid "
                               "continuation byte at byte 3)"], f"expected one warning, for the latin-1 script: {report}"
    assert set(found) == {("missing/bin/worker.sh", 3)}, found
    assert "the Celery workers Procfile starts (this one through this script) consume only celery; tasks routed " \
           "to reports " in found[("missing/bin/worker.sh", 3)], found
    commands = celery_routes.worker_commands(tmp_path / "missing" / "Procfile")
    assert commands == [], f"expected kata 07's reading of a deploy file to stay as it was (no script), got {commands}"


def test_a_module_in_newer_syntax_is_parsed_by_a_newer_python_or_says_why_not(tmp_path, monkeypatch):
    """a module the running Python cannot parse is read by the newest Python here; with none, its warning says so"""
    write(tmp_path, {"new.py": "import asyncio\n\nLOCK = asyncio.Lock()\n\n\ndef first[T](items: list[T]) -> T:\n"
                               "    return items[0]\n"})
    if sys.version_info < (3, 12):
        monkeypatch.setattr(scan.newer_syntax, "newest_python", lambda: None)
        report = scan.scan([tmp_path])
        assert report.warnings == [f"{tmp_path / 'new.py'}:6: not parsed, so not scanned (expected '(' on Python "
                                   f"3.{sys.version_info.minor}; no newer Python was found to try it with)"], \
            report.warnings
        monkeypatch.undo()
        if scan.newer_syntax.newest_python() is None:
            pytest.skip("no Python 3.12 or newer on this machine to parse the module with")
    report = scan.scan([tmp_path])
    assert [(f.rule, f.line) for f in report.findings] == [("LK01", 3)] and not report.warnings, report


def test_lk08_leaves_alone_a_call_handed_to_a_thread_and_an_error_only_middleware(tmp_path):
    """LK08 flags nothing for a blocking call run on a thread (lambda, to_thread) or a middleware that logs only errors"""
    write(tmp_path, {"api.py": """
        import asyncio
        import logging
        import requests
        from fastapi import FastAPI

        app = FastAPI()
        log = logging.getLogger(__name__)


        def fetch(url):
            return requests.get(url, timeout=5).text


        @app.get("/page")
        async def page(url: str):
            loop = asyncio.get_running_loop()
            first = await loop.run_in_executor(None, lambda: fetch(url))
            second = await asyncio.to_thread(fetch, url)
            return {"length": len(first) + len(second)}


        @app.get("/blocked")
        async def blocked(url: str):
            return {"text": fetch(url)}


        @app.middleware("http")
        async def errors(request, call_next):
            try:
                return await call_next(request)
            except Exception:
                log.exception("request failed")
                raise
    """})
    found = [(f.rule, f.line) for f in scan.scan([tmp_path], select={"LK08"}).findings]
    assert found == [("LK08", 24)], f"expected LK08 only on the route that calls fetch() itself, got {found}"


# Decoys of katas 11 to 16 whose mistake their rule can read; the others' mistakes are in what
# they do at run time (a freeze, a threshold, a queue), which the hidden tests catch.
DECOYS_FLAGGED = {
    "warm-invocation": {"new_key_per_attempt", "retry_every_post_without_key"},
    "nested-run": {"fall_back_to_create_task", "nest_asyncio_apply", "new_event_loop_in_run_async",
                   "run_until_complete_on_the_running_loop"},
    "half-dead-pod": {"sys_exit_from_the_watchdog_thread", "watchdog_as_asyncio_task"},
    "pid1-sigterm": {"handler_without_exec", "trap_forwards_and_leaves", "trap_waits_once"},
    "cpu-quota": {"executor_left_to_python", "process_cpu_count_only"},
    # the two that change their own cgroup also leave the queue unbounded, which is what LK16 reads
    "memory-guard": {"catch_memory_error", "host_memory_from_proc_meminfo", "moves_itself_out_of_its_cgroup",
                     "raises_its_own_memory_limit"},
}


@pytest.mark.parametrize("kata_id", sorted(DECOYS_FLAGGED))
def test_the_rules_of_katas_11_to_16_flag_the_decoys_whose_mistake_is_in_their_syntax(kata_id, tmp_path):
    """LK11 to LK16 flag the decoys whose mistake the code spells out, and leave the others to the hidden tests"""
    kata = catalogue.find(kata_id, ROOT)
    rule = f"LK{kata.number:02d}"
    flagged = set()
    for decoy in kata.decoys:  # each as the grader builds it from its base
        if scan.scan([alternatives.build(kata, decoy, tmp_path)], select={rule}).findings:
            flagged.add(decoy.stem)
    assert flagged == DECOYS_FLAGGED[kata_id], (
        f"expected {rule} to flag the decoys {sorted(DECOYS_FLAGGED[kata_id])}, it flagged {sorted(flagged)}")


def test_lk11_leaves_alone_reads_batches_and_a_key_made_before_the_attempts(tmp_path):
    """LK11 flags a write sent again without a kept key, not a GET or PUT retried, a batch, a key handed in or **kwargs"""
    write(tmp_path, {"client.py": """
        import uuid
        import aiohttp


        async def retried(session, url, body, key, **options):
            for attempt in range(3):
                try:
                    await session.get(url)
                    await session.put(url, json=body)
                    await session.post(url, json=body, headers={"Idempotency-Key": key})
                    await session.post(url, json=body, **options)
                    await session.post(url, json={**body, "idempotency_key": key})
                    await session.post(url, json=body, headers={"Idempotency-Key": uuid.uuid4().hex})
                    return
                except aiohttp.ClientConnectionError:
                    pass


        async def batch(session, url, rows):
            for row in rows:
                try:
                    await session.post(url, json=row)
                except aiohttp.ClientError:
                    continue
    """})
    found = [(f.rule, f.line) for f in scan.scan([tmp_path], select={"LK11"}).findings]
    assert found == [("LK11", 13)], f"expected LK11 only on the write with a key made per attempt, got {found}"


def test_lk12_leaves_alone_a_loop_starter_handed_to_a_thread_or_run_at_the_top(tmp_path):
    """LK12 flags a loop starter called in a coroutine, not one handed to a thread, a guarded one, or asyncio.run at the top"""
    write(tmp_path, {"pkg/__init__.py": "", "pkg/sync.py": """
        import asyncio


        def run_async(coro):
            return asyncio.run(coro)


        def run_anywhere(coro):
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                return asyncio.run(coro)
            raise RuntimeError("await it instead")
    """, "pkg/app.py": """
        import asyncio
        import threading
        from concurrent.futures import ThreadPoolExecutor

        from .sync import run_async, run_anywhere

        POOL = ThreadPoolExecutor()


        async def work():
            return 1


        async def handler():
            await asyncio.to_thread(run_async, work())
            await asyncio.get_running_loop().run_in_executor(POOL, run_async, work())
            threading.Thread(target=run_async, args=(work(),)).start()
            POOL.submit(lambda: run_async(work()))
            run_anywhere(work())
            return run_async(work())


        if __name__ == "__main__":
            asyncio.run(handler())
    """})
    found = [(Path(f.path).name, f.line) for f in scan.scan([tmp_path], select={"LK12"}).findings]
    assert found == [("app.py", 20)], f"expected LK12 only on the direct call of run_async() in handler(), got {found}"


def test_a_scan_of_dot_inside_a_package_ends(tmp_path):
    """`loopkata scan .` run inside a package's folder ends with its findings (the package's top is looked for upwards)"""
    write(tmp_path, {"pkg/__init__.py": "", "pkg/jobs.py": """
        import asyncio


        def run_async(coro):
            return asyncio.run(coro)


        async def job():
            return run_async(asyncio.sleep(0))
    """})
    out = run_cli(".", cwd=tmp_path / "pkg")
    assert out.returncode == 1 and "jobs.py:9:12: LK12" in out.stdout, out.stdout + out.stderr


def test_lk14_leaves_alone_exec_an_init_that_signals_the_group_and_a_trap_that_waits(tmp_path):
    """LK14 flags a shell left as PID 1 above Python, not `exec`, `exec "$@"`, dumb-init, bash's lone command, a trap that waits or an unused script"""
    write(tmp_path, {
        "web/Dockerfile": """
            FROM python:3.12-slim
            COPY docker-entrypoint.sh /usr/local/bin/
            ENTRYPOINT ["docker-entrypoint.sh"]
            CMD ["gunicorn", "app:app"]
        """,
        "web/docker-entrypoint.sh": """
            #!/bin/sh
            set -e
            python manage.py migrate --noinput
            exec "$@"
        """,
        "worker/Dockerfile": """
            FROM python:3.12-slim
            COPY run-worker.sh /run-worker.sh
            ENTRYPOINT ["dumb-init", "--"]
            CMD ["/run-worker.sh"]
        """,
        "worker/run-worker.sh": """
            #!/bin/sh
            celery -A app worker
        """,
        "bash/Dockerfile": """
            FROM python:3.12-slim
            SHELL ["/bin/bash", "-c"]
            CMD python app.py
        """,
        "trap/entrypoint.sh": """
            #!/bin/sh
            python app.py &
            child=$!
            trap 'kill -TERM "$child"; wait "$child"' TERM INT
            wait "$child"
        """,
        "heredoc/entrypoint.sh": """
            #!/bin/sh
            cat > /etc/app.conf <<EOF
            python app.py
            EOF
            exec python app.py
        """,
        "silenced/entrypoint.sh": """
            #!/bin/sh
            python app.py  # loopkata: ignore[LK14]
        """,
        "unused/Dockerfile": """
            FROM python:3.12-slim
            COPY . /app
            ENTRYPOINT ["python", "/app/app.py"]
        """,
        "unused/entrypoint.sh": """
            #!/bin/sh
            python app.py
        """,
        "composed/Dockerfile": """
            FROM python:3.12-slim
            COPY . /app
            CMD ["python", "/app/app.py"]
        """,
        "composed/compose.yaml": """
            services:
              worker:
                build: .
                entrypoint: ["/app/worker-entrypoint.sh"]
        """,
        "composed/worker-entrypoint.sh": """
            #!/bin/sh
            python -m app.worker
        """,
        "flagged/entrypoint.sh": """
            #!/bin/sh
            if [ -n "$DEBUG" ]; then
              exec python -X dev app.py
            else
              python app.py
            fi
        """,
    })
    found = [(Path(f.path).relative_to(tmp_path).as_posix(), f.line) for f in scan.scan([tmp_path], select={"LK14"}).findings]
    assert found == [("composed/worker-entrypoint.sh", 2), ("flagged/entrypoint.sh", 5)], (
        f"expected LK14 only on the compose worker's script and the branch without exec, got {found}")


def test_lk14_flags_a_wait_that_set_e_ends_and_a_service_piped_into_another_command(tmp_path):
    """LK14 flags a second `wait` that `set -e` never reaches and a service piped into `tee`, not the same with `|| true` or a pipe earlier"""
    trap_and_two_waits = """
        python app.py &
        child=$!
        trap 'kill -TERM "$child"' TERM INT
        wait "$child"{guard}
        wait "$child"
    """
    write(tmp_path, {
        "set-e/entrypoint.sh": "#!/bin/sh\nset -eu\n" + textwrap.dedent(trap_and_two_waits.format(guard="")),
        "shebang-e/entrypoint.sh": "#!/bin/sh -e\n" + textwrap.dedent(trap_and_two_waits.format(guard="")),
        "errexit/entrypoint.sh": "#!/bin/bash\nset -o errexit\n" + textwrap.dedent(trap_and_two_waits.format(guard="")),
        "guarded/entrypoint.sh": "#!/bin/sh\nset -e\n" + textwrap.dedent(trap_and_two_waits.format(guard=" || true")),
        "set+e/entrypoint.sh": "#!/bin/sh\nset -e\nset +e\n" + textwrap.dedent(trap_and_two_waits.format(guard="")),
        "no-set-e/entrypoint.sh": "#!/bin/sh\n" + textwrap.dedent(trap_and_two_waits.format(guard="")),
        "trap-waits/entrypoint.sh": """
            #!/bin/sh
            set -e
            python app.py &
            child=$!
            trap 'kill -TERM "$child"; wait "$child"' TERM INT
            wait "$child"
        """,
        "tee/entrypoint.sh": """
            #!/bin/sh
            set -e
            exec python service.py 2>&1 | tee -a /var/log/service.log
        """,
        "tee-no-exec/entrypoint.sh": """
            #!/bin/sh
            python service.py | tee /var/log/service.log
        """,
        "pipe-earlier/entrypoint.sh": """
            #!/bin/sh
            python make_config.py | tee /etc/service.conf
            exec python service.py
        """,
    })
    found = sorted((Path(f.path).relative_to(tmp_path).as_posix(), f.line)
                   for f in scan.scan([tmp_path], select={"LK14"}).findings)
    assert found == [("errexit/entrypoint.sh", 7), ("set-e/entrypoint.sh", 7), ("shebang-e/entrypoint.sh", 6),
                     ("tee-no-exec/entrypoint.sh", 2), ("tee/entrypoint.sh", 3)], (
        "expected LK14 on the first `wait` of each script under set -e (from `set -eu`, `set -o errexit` or the #! "
        f"line) and on the service piped into tee, and nowhere else; got {found}")


def test_lk15_leaves_alone_a_count_weighed_against_the_quota_and_a_pool_in_a_with_block(tmp_path):
    """LK15 flags a host CPU count that sizes a pool, not one only logged, one capped by the quota, or a short-lived pool"""
    write(tmp_path, {"pools.py": """
        import logging
        import math
        import os
        from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
        from pathlib import Path

        from joblib import cpu_count

        log = logging.getLogger(__name__)
        log.info("host CPUs: %d", os.cpu_count())


        def allowed_cpus() -> int:
            quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()
            cpus = os.cpu_count() or 1
            return cpus if quota == "max" else min(cpus, math.ceil(int(quota) / int(period)))


        POOL = ThreadPoolExecutor(max_workers=allowed_cpus() * 2)
        JOBS = ProcessPoolExecutor(max_workers=cpu_count())


        def convert(files):
            with ProcessPoolExecutor() as pool:
                return list(pool.map(str.upper, files))


        def report() -> str:
            return f"{os.cpu_count()} CPUs on the host, {allowed_cpus()} for us"


        class Service:
            def __init__(self):
                self.threads = os.cpu_count() * 5
    """})
    found = [(f.rule, f.line) for f in scan.scan([tmp_path], select={"LK15"}).findings]
    assert found == [("LK15", 34)], f"expected LK15 only on the thread count of Service, got {found}"


def test_lk16_leaves_alone_bounded_queues_a_queue_of_known_items_and_memory_only_shown(tmp_path):
    """LK16 flags a host memory budget and an unbounded queue a feed fills, not a bounded one, a list's items or a log line"""
    write(tmp_path, {"pipeline.py": """
        import asyncio
        import logging

        import psutil

        log = logging.getLogger(__name__)
        log.info("host memory %d MiB", psutil.virtual_memory().total >> 20)


        async def crawl(urls, fetch):
            todo = asyncio.Queue()
            for url in urls:
                todo.put_nowait(url)
            while not todo.empty():
                await fetch(await todo.get())


        async def follow(reader, handle):
            lines = asyncio.Queue(maxsize=100)
            consumer = asyncio.create_task(drain(lines, handle))
            while line := await reader.readline():
                await lines.put(line)
            consumer.cancel()


        async def drain(queue, handle):
            while True:
                await handle(await queue.get())


        async def firehose(stream, handle):
            events = asyncio.Queue()
            consumer = asyncio.create_task(drain(events, handle))
            async for event in stream:
                events.put_nowait(event)
            consumer.cancel()


        def worker_budget() -> int:
            return psutil.virtual_memory().available // (512 << 20)
    """})
    found = [(f.rule, f.line) for f in scan.scan([tmp_path], select={"LK16"}).findings]
    assert found == [("LK16", 32), ("LK16", 40)], f"expected LK16 on the firehose's queue and the worker budget, got {found}"


def test_lk14_reads_a_shell_script_named_on_the_command_line(tmp_path):
    """a start script that is not named like an entrypoint is judged when it is named on the command line"""
    write(tmp_path, {"deploy/start.sh": """
        #!/bin/sh
        python -m app
    """})
    assert not scan.scan([tmp_path], select={"LK14"}).findings, "expected a folder's start.sh to be left unread"
    found = [(Path(f.path).name, f.line) for f in scan.scan([tmp_path / "deploy" / "start.sh"]).findings]
    assert found == [("start.sh", 2)], f"expected LK14 on start.sh:2 when the script is named, got {found}"
