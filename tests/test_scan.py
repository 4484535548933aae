"""`loopkata scan`: every kata's starter flagged by its rule on the right line, nothing on the
reference fixes and variants, every finding on real async packages explained, and the
interfaces a team wires into CI (exit status, JSON, SARIF, ignore comments, pre-commit)."""
import json
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
import yaml

from loopkata import catalogue, progress, scan
from loopkata.scan import celery_routes, output

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
}


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


def test_no_finding_on_any_reference_fix_or_variant():
    """nothing is flagged in the reference fixes and the variants: they are correct"""
    report = scan.scan([ROOT / "solutions", ROOT / "tests" / "variants"])
    assert report.files > 40 and not report.warnings, report.warnings
    assert not report.findings, "expected no finding on correct code, got:\n" + "\n".join(
        f"{f.path}:{f.line}: {f.rule} {f.message}" for f in report.findings)


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
