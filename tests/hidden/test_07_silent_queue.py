"""Hidden tests for kata 07, silent-queue.

Part 1 runs the learner's guard on deploy files it has not seen, written by the
test, and checks that it reads them as the platform and Celery do (no workers:
these are quick, and come first). Part 2 starts real Celery workers from the
deploy files' own command lines (those a default deploy starts: a compose
service behind `profiles` is left out, as `docker compose up` leaves it out),
with options that make them quick to start added at the end, against a broker
that is a fresh folder of files per test (or $CELERY_BROKER_URL), sends every
kind of task by name (and a schema sync with .delay(), as the API sends it),
and waits for each. Every worker is killed with its process group when the
test ends, whatever happened.
"""
import json
import re
import shlex
import textwrap
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from loopkata.services import celery_workers
from loopkata.scan import celery_routes
from loopkata.testing import NO_HYPOTHESIS, property_seed, replay_words

TASKS = {  # name -> args: one task of every kind the app routes
    "schema.sync_source": [1],
    "insight.answer": ["which source grew fastest?"],
    "digest.send": ["ada"],
}
# Seconds a task in a queue that a worker consumes may take: it is done in about 0.1 s, and the wait
# ends then, so this bound only says how long a task that never runs is watched; a busy machine
# must not turn a right deploy file into a wrong one.
DONE_WITHIN = 10.0
STRANDED_AFTER = 0.4  # seconds a task in a queue that no worker consumes is watched, to show it stays PENDING


@pytest.fixture(autouse=True)
def broker(tmp_path, monkeypatch):
    """A fresh broker folder, set before the kata is imported (its app reads the environment)."""
    folder = tmp_path / "broker"
    for key, value in celery_workers.broker_env(folder).items():
        monkeypatch.setenv(key, value)
    return folder


def app_of(kata):
    import importlib

    return importlib.import_module(f"{kata.__name__}.celery_app").app


# --- part 1: the guard -------------------------------------------------------

def guard(kata, tmp_path, name: str, text: str, default_queue: str | None = None, routes: dict | None = None,
          task_routes=None) -> set:
    """The learner's guard on a deploy file the test writes; `routes` are added to the app's, `task_routes` replaces them."""
    import importlib

    app = app_of(kata)
    if default_queue:
        app.conf.task_default_queue = default_queue
    if routes:
        app.conf.task_routes = {**(app.conf.task_routes or {}), **routes}
    if task_routes is not None:
        app.conf.task_routes = task_routes
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip())
    found = importlib.import_module(f"{kata.__name__}.guard").unconsumed_queues(app, path)
    return set(found)


def expect(found: set, wanted: set, case: str) -> None:
    assert found == wanted, (
        f"expected the guard to name {sorted(wanted) or 'no queue'} for {case}, got {sorted(found) or 'no queue'} "
        "(calling guard.unconsumed_queues(app, path) directly on a deploy file the test wrote)"
    )


PROCFILE_WEB = "web: uvicorn reports.web:app --host 0.0.0.0 --port $PORT\n"


def test_the_guard_names_what_a_worker_without_a_queue_option_leaves_out(kata, tmp_path):
    """the guard names the routed queues a worker with no -Q leaves without a consumer"""
    found = guard(kata, tmp_path, "Procfile", PROCFILE_WEB + "worker: celery -A reports.celery_app worker -l INFO\n")
    expect(found, {"schema", "insight"}, "a Procfile whose worker has no -Q (it consumes only 'celery')")


SPELLINGS = [  # (worker options, queues left without a consumer)
    ("-Q schema", {"insight", "celery"}),
    ("--queues=schema,insight", {"celery"}),
    ("--queues schema,insight,celery", set()),
    ("-Qschema,insight,celery", set()),
    ("--loglevel=INFO -Q insight,celery,schema", set()),
]


def test_the_guard_reads_every_spelling_of_the_queue_option(kata, tmp_path):
    """the guard reads -Q a,b, -Qa,b, --queues=a,b and --queues a,b"""
    wrong = []
    for option, wanted in SPELLINGS:
        command = f"worker: celery -A reports.celery_app worker {option} --loglevel=INFO\n"
        found = guard(kata, tmp_path, "Procfile", PROCFILE_WEB + command)
        if found != wanted:
            wrong.append(f"`{option}`: expected {sorted(wanted) or 'no queue'}, got {sorted(found) or 'no queue'}")
    assert not wrong, (
        "expected the guard to read every spelling of the queue option (calling guard.unconsumed_queues(app, path) "
        "directly on a Procfile the test wrote, one per spelling); for a worker started with " + "; ".join(wrong)
    )


def test_the_guard_counts_every_worker_service(kata, tmp_path):
    """the guard counts every worker in a Procfile and in a compose file: two that split the queues cover them all"""
    procfile = (PROCFILE_WEB + "worker: celery -A reports.celery_app worker -Q insight,celery --loglevel=INFO\n"
                "schema_worker: celery -A reports.celery_app worker -Q schema --loglevel=INFO\n")
    expect(guard(kata, tmp_path, "Procfile", procfile), set(),
           "a Procfile with two workers, one on 'insight,celery' and one on 'schema'")
    renamed = procfile.replace("worker: celery", "jobs: celery", 1).replace("schema_worker:", "sync:")
    expect(guard(kata, tmp_path, "Procfile", renamed), set(),
           "a Procfile whose two workers are the process types 'jobs' (on 'insight,celery') and 'sync' (on "
           "'schema'): what makes a worker is its command, not its name")
    expect(guard(kata, tmp_path, "Procfile", procfile.replace("-Q insight,celery", "-Q celery")), {"insight"},
           "a Procfile whose two workers consume 'celery' and 'schema' only")
    compose = """
        services:
          web:
            command: uvicorn reports.web:app --host 0.0.0.0 --port 8000
          worker-schema:
            command: celery -A reports.celery_app worker --queues=schema --concurrency=2
          worker-rest:
            command: ["celery", "-A", "reports.celery_app", "worker", "-Q", "insight,celery"]
    """
    expect(guard(kata, tmp_path, "docker-compose.yml", compose), set(),
           "a compose file with two workers, one on 'schema' and one on 'insight,celery'")
    partial = compose.replace('"insight,celery"', '"celery"')
    expect(guard(kata, tmp_path, "docker-compose.yml", partial), {"insight"},
           "a compose file whose two workers consume 'schema' and 'celery' only")


def test_the_guard_follows_a_renamed_default_queue(kata, tmp_path):
    """the guard uses the app's own default queue, even when it is not called 'celery'"""
    plain = PROCFILE_WEB + "worker: celery -A reports.celery_app worker\n"
    expect(guard(kata, tmp_path, "Procfile", plain, default_queue="default"), {"schema", "insight"},
           "an app whose default queue is 'default' and a worker with no -Q (it consumes 'default')")
    old_name = PROCFILE_WEB + "worker: celery -A reports.celery_app worker -Q schema,insight,celery\n"
    expect(guard(kata, tmp_path, "Procfile", old_name, default_queue="default"), {"default"},
           "an app whose default queue is 'default' and a worker on 'schema,insight,celery'")


def test_the_guard_names_a_queue_for_tasks_defined_elsewhere(kata, tmp_path):
    """the guard names every queue the routes send to, also for tasks this process does not define"""
    # Another service defines the export tasks; this app sends them by name (app.send_task("export.csv")),
    # and its routes send them to 'export'. No task registered here goes there.
    routes = {"export.*": {"queue": "export"}}
    worker = PROCFILE_WEB + "worker: celery -A reports.celery_app worker -Q schema,insight,celery\n"
    expect(guard(kata, tmp_path, "Procfile", worker, routes=routes), {"export"},
           "an app that also routes 'export.*' (tasks another service defines) to 'export', and a worker on "
           "'schema,insight,celery'")
    covered = worker.replace("insight,celery", "insight,celery,export")
    expect(guard(kata, tmp_path, "Procfile", covered, routes=routes), set(),
           "an app that also routes 'export.*' to 'export', and a worker on 'schema,insight,celery,export'")


def test_the_guard_counts_no_beat_as_a_consumer(kata, tmp_path):
    """the guard counts only `celery worker` as a consumer: `celery beat` and `celery flower` consume no queue"""
    procfile = (PROCFILE_WEB + "worker: celery -A reports.celery_app worker -Q schema,insight --loglevel=INFO\n"
                "beat: celery -A reports.celery_app beat --loglevel=INFO\n")
    expect(guard(kata, tmp_path, "Procfile", procfile), {"celery"},
           "a Procfile whose worker consumes 'schema,insight' and whose other Celery process is "
           "`celery -A reports.celery_app beat` (the scheduler: it sends tasks when they are due, and runs none)")
    monitored = procfile.replace("beat: celery -A reports.celery_app beat --loglevel=INFO",
                                 "flower: celery -A reports.celery_app flower --port=5555")
    expect(guard(kata, tmp_path, "Procfile", monitored), {"celery"},
           "a Procfile whose worker consumes 'schema,insight' and whose other Celery process is "
           "`celery -A reports.celery_app flower` (the monitoring web UI: it watches the workers, and runs no task)")


def test_the_guard_skips_a_commented_out_worker(kata, tmp_path):
    """the guard does not count a commented-out Procfile line: the platform starts nothing from it"""
    procfile = (PROCFILE_WEB + "worker: celery -A reports.celery_app worker -Q insight,celery --loglevel=INFO\n"
                "#schema_worker: celery -A reports.celery_app worker -Q schema --loglevel=INFO\n")
    expect(guard(kata, tmp_path, "Procfile", procfile), {"schema"},
           "a Procfile whose worker consumes 'insight,celery' and whose line for a 'schema' worker is commented out "
           "(`#schema_worker: celery -A reports.celery_app worker -Q schema`: a comment, which honcho and the "
           "platforms skip)")
    trailing = PROCFILE_WEB + "worker: celery -A reports.celery_app worker  # -Q schema,insight,celery\n"
    expect(guard(kata, tmp_path, "Procfile", trailing), {"schema", "insight"},
           "a Procfile whose worker line is `celery -A reports.celery_app worker  # -Q schema,insight,celery` (a "
           "Procfile command runs in a shell, where `#` starts a comment: that worker has no -Q, and consumes "
           "'celery' only)")


COMPOSE_SPLIT = """
    services:
      web:
        command: uvicorn reports.web:app --host 0.0.0.0 --port 8000
      worker-rest:
        command: celery -A reports.celery_app worker -Q insight,celery
      worker-schema:
        command: celery -A reports.celery_app worker -Q schema
        profiles: ["schema"]
"""


def test_the_guard_leaves_out_a_compose_service_behind_a_profile(kata, tmp_path):
    """the guard does not count a compose worker behind `profiles`: a plain `docker compose up` does not start it"""
    expect(guard(kata, tmp_path, "docker-compose.yml", COMPOSE_SPLIT), {"schema"},
           "a compose file whose worker-rest consumes 'insight,celery' and whose worker-schema, on 'schema', has "
           "`profiles: [\"schema\"]` (started only by `docker compose --profile schema up`, not by a plain "
           "`docker compose up`)")
    started = COMPOSE_SPLIT.replace('        profiles: ["schema"]\n', "")
    expect(guard(kata, tmp_path, "docker-compose.yml", started), set(),
           "the same compose file with the profile taken off worker-schema")


def test_the_guard_reads_a_route_given_as_a_queue_name(kata, tmp_path):
    """the guard reads a route written as the queue's name alone ({"export.*": "export"}), as Celery does"""
    routes = {"export.*": "export"}  # Celery's short form of {"export.*": {"queue": "export"}}
    worker = PROCFILE_WEB + "worker: celery -A reports.celery_app worker -Q schema,insight,celery\n"
    expect(guard(kata, tmp_path, "Procfile", worker, routes=routes), {"export"},
           "an app that also routes 'export.*' with the short form {\"export.*\": \"export\"} (the queue's name "
           "alone: Celery sends export.csv to 'export'), and a worker on 'schema,insight,celery'")
    covered = worker.replace("insight,celery", "insight,celery,export")
    expect(guard(kata, tmp_path, "Procfile", covered, routes=routes), set(),
           "an app that also routes {\"export.*\": \"export\"}, and a worker on 'schema,insight,celery,export'")


def test_the_guard_reads_a_list_of_routers(kata, tmp_path):
    """the guard reads task_routes given as a list of route tables, every one of them"""
    routers = [{"schema.*": {"queue": "schema"}},
               {"insight.*": {"queue": "insight"}, "export.*": {"queue": "export"}}]
    shown = "task_routes = [{'schema.*': {'queue': 'schema'}}, {'insight.*': {'queue': 'insight'}, " \
            "'export.*': {'queue': 'export'}}] (a list of routers, each asked in turn)"
    worker = PROCFILE_WEB + "worker: celery -A reports.celery_app worker -Q schema,insight,celery\n"
    expect(guard(kata, tmp_path, "Procfile", worker, task_routes=routers), {"export"},
           f"an app with {shown} and a worker on 'schema,insight,celery'")
    expect(guard(kata, tmp_path, "Procfile", worker.replace("insight,", ""), task_routes=routers),
           {"insight", "export"}, f"an app with {shown} and a worker on 'schema,celery'")


def test_the_guard_refuses_a_procfile_that_defines_a_process_type_twice(kata, tmp_path):
    """the guard refuses a Procfile with two `worker:` lines: a platform runs only one of them"""
    procfile = (PROCFILE_WEB + "worker: celery -A reports.celery_app worker -Q schema --loglevel=INFO\n"
                "worker: celery -A reports.celery_app worker -Q insight,celery --loglevel=INFO\n")
    try:
        found = guard(kata, tmp_path, "Procfile", procfile)
    except Exception as exc:  # noqa: BLE001 - refusing the file outright is a right answer
        said = re.findall(r"\blines? (\d+)(?: and (\d+))?", str(exc))
        named = {int(n) for pair in said for n in pair if n}
        assert named <= {2, 3}, (
            f"expected the guard's refusal, where it gives line numbers, to name lines 2 and 3 of the Procfile (the "
            f"two `worker:` lines, counting from 1 as an editor does), but it says: {exc}")
        return
    assert found, (
        "expected the guard to refuse a Procfile that defines the process type 'worker' on lines 2 and 3, one on "
        "'schema' and one on 'insight,celery' (by raising, or by naming the queues a kept line leaves out), but it "
        "named no queue (calling guard.unconsumed_queues(app, path) directly on a Procfile the test wrote): honcho "
        "refuses such a file, and a platform keeps one command per process type, so one of these lines never runs"
    )


def test_the_guard_splits_the_queue_list_on_commas_only(kata, tmp_path):
    """the guard splits -Q on commas only, as Celery does: in `-Q "schema, insight"` the second queue is ' insight'"""
    spaced = PROCFILE_WEB + 'worker: celery -A reports.celery_app worker -Q "schema, insight, celery"\n'
    expect(guard(kata, tmp_path, "Procfile", spaced), {"insight", "celery"},
           "a Procfile whose worker has `-Q \"schema, insight, celery\"` (Celery splits the list on commas only, "
           "so that worker consumes 'schema', ' insight' and ' celery', spaces included)")
    listed = """
        services:
          worker:
            command: ["celery", "-A", "reports.celery_app", "worker", "-Q", "schema,insight, celery"]
    """
    expect(guard(kata, tmp_path, "docker-compose.yml", listed), {"celery"},
           "a compose file whose worker's command is [..., \"-Q\", \"schema,insight, celery\"] (it consumes "
           "'schema', 'insight' and ' celery', spaces included)")


def test_the_guard_takes_out_the_queues_a_worker_excludes(kata, tmp_path):
    """the guard takes out the queues a worker excludes with -X / --exclude-queues"""
    excluded = PROCFILE_WEB + "worker: celery -A reports.celery_app worker -Q schema,insight,celery -X schema\n"
    expect(guard(kata, tmp_path, "Procfile", excluded), {"schema"},
           "a Procfile whose worker has `-Q schema,insight,celery -X schema` (-X excludes a queue from the list: it "
           "consumes 'insight' and 'celery')")
    long_form = PROCFILE_WEB + ("worker: celery -A reports.celery_app worker --exclude-queues=insight "
                                "-Q schema,insight,celery\n")
    expect(guard(kata, tmp_path, "Procfile", long_form), {"insight"},
           "a Procfile whose worker has `--exclude-queues=insight -Q schema,insight,celery` (it consumes 'schema' "
           "and 'celery')")
    beside = PROCFILE_WEB + ("worker: celery -A reports.celery_app worker -Q insight\n"
                             "rest: celery -A reports.celery_app worker -X schema\n")
    expect(guard(kata, tmp_path, "Procfile", beside), {"schema"},
           "a Procfile whose worker consumes 'insight' and whose other worker has no -Q and `-X schema` (it consumes "
           "the default queue 'celery': excluding a queue never adds it)")
    no_queue = PROCFILE_WEB + "worker: celery -A reports.celery_app worker -X insight\n"
    expect(guard(kata, tmp_path, "Procfile", no_queue), {"schema", "insight"},
           "a Procfile whose worker has no -Q and `-X insight` (it consumes the default queue 'celery' only)")


def test_the_guard_knows_a_worker_without_a_queue_option_reads_task_queues(kata, tmp_path):
    """with task_queues set, a worker with no -Q consumes every queue it lists, as Celery does"""
    from kombu import Queue

    app = app_of(kata)
    app.conf.task_queues = [Queue("schema"), Queue("insight"), Queue("celery")]
    plain = PROCFILE_WEB + "worker: celery -A reports.celery_app worker --loglevel=INFO\n"
    expect(guard(kata, tmp_path, "Procfile", plain), set(),
           "an app whose task_queues declares 'schema', 'insight' and 'celery', and a worker with no -Q (Celery "
           "starts it on every queue task_queues declares)")
    app.conf.task_queues = [Queue("schema"), Queue("celery")]
    expect(guard(kata, tmp_path, "Procfile", plain), {"insight"},
           "an app whose task_queues declares 'schema' and 'celery' only, and a worker with no -Q")
    excluding = plain.replace("--loglevel=INFO", "-X insight")
    expect(guard(kata, tmp_path, "Procfile", excluding), {"insight"},
           "an app whose task_queues declares 'schema' and 'celery' only, and a worker with no -Q and `-X insight` "
           "(excluding a queue never adds it: it consumes 'schema' and 'celery')")


def test_the_guard_reads_a_queue_list_given_through_the_environment(kata, tmp_path):
    """the guard reads CELERY_WORKER_QUEUES, which Celery takes for a missing -Q, and lets -Q win over it"""
    compose = """
        services:
          worker:
            command: celery -A reports.celery_app worker --loglevel=INFO
            environment:
              CELERY_WORKER_QUEUES: schema,insight,celery
    """
    expect(guard(kata, tmp_path, "docker-compose.yml", compose), set(),
           "a compose file whose worker has no -Q and `environment: {CELERY_WORKER_QUEUES: schema,insight,celery}` "
           "(Celery's command line reads a missing option from CELERY_<COMMAND>_<OPTION>: that worker consumes "
           "all three)")
    listed = compose.replace("CELERY_WORKER_QUEUES: schema,insight,celery", "- CELERY_WORKER_QUEUES=schema")
    expect(guard(kata, tmp_path, "docker-compose.yml", listed), {"insight", "celery"},
           "a compose file whose worker has no -Q and `environment: [CELERY_WORKER_QUEUES=schema]` (it consumes "
           "'schema' only)")
    prefixed = PROCFILE_WEB + "worker: CELERY_WORKER_QUEUES=schema,insight celery -A reports.celery_app worker\n"
    expect(guard(kata, tmp_path, "Procfile", prefixed), {"celery"},
           "a Procfile whose worker is `CELERY_WORKER_QUEUES=schema,insight celery -A reports.celery_app worker` "
           "(a Procfile line runs in a shell: the variable is the worker's, and it consumes 'schema,insight')")
    both = PROCFILE_WEB + "worker: CELERY_WORKER_QUEUES=schema,insight,celery celery -A reports.celery_app worker " \
                          "-Q schema\n"
    expect(guard(kata, tmp_path, "Procfile", both), {"insight", "celery"},
           "a Procfile whose worker has both CELERY_WORKER_QUEUES=schema,insight,celery and -Q schema (the option "
           "on the command line wins: it consumes 'schema' only)")



def refusal_or_names(kata, tmp_path, name: str, text: str) -> set | None:
    """The queues the guard names for a deploy file, or None if it refuses the file (ValueError, SystemExit)."""
    try:
        return guard(kata, tmp_path, name, text)
    except (ValueError, SystemExit):
        return None


REFUSED = [  # (a worker line Celery 5 refuses, why): it prints "No such option" and starts no worker
    ("celery -A reports.celery_app worker --queue schema,insight",
     "click, Celery's parser, takes no abbreviation: `--queue` is not `--queues`"),
    ("celery -A reports.celery_app worker --autoreload -Q schema,insight",
     "`--autoreload` is no option of Celery 5's worker (it went in Celery 4)"),
    ("celery worker -A reports.celery_app -Q schema,insight",
     "Celery 4's order: in Celery 5, -A belongs to `celery` and comes before `worker`, never after it"),
    ("celery -A reports.celery_app workers -Q schema,insight", "there is no command `workers`, only `worker`"),
]


def test_the_guard_reads_a_worker_started_as_python_m_celery(kata, tmp_path):
    """the guard reads a worker started as `python -m celery`, or through `exec`, as one started as `celery`"""
    procfile = PROCFILE_WEB + ("worker: python -m celery -A reports.celery_app worker -Q schema,insight\n"
                               "rest: exec celery -A reports.celery_app worker -Q celery\n")
    expect(guard(kata, tmp_path, "Procfile", procfile), set(),
           "a Procfile whose workers are `python -m celery -A reports.celery_app worker -Q schema,insight` and `exec "
           "celery -A reports.celery_app worker -Q celery` (Celery's command line either way: they consume all three)")


def test_the_guard_counts_no_worker_for_a_command_line_celery_refuses(kata, tmp_path):
    """the guard counts no consumer for a worker command line Celery 5 refuses: `--queue`, an option it lacks, `worker -A`"""
    wrong = []
    for command, why in REFUSED:
        procfile = PROCFILE_WEB + f"worker: {command}\nrest: celery -A reports.celery_app worker -Q celery\n"
        found = refusal_or_names(kata, tmp_path, "Procfile", procfile)
        if found is not None and found != {"schema", "insight"}:
            wrong.append(f"`{command}` ({why}): expected ['insight', 'schema'] (or the file refused), got "
                         f"{sorted(found) or 'no queue'}")
    assert not wrong, (
        "expected the guard to count no consumer for a worker whose command line Celery refuses (it prints `No such "
        "option` and exits: no worker starts), calling guard.unconsumed_queues(app, path) directly on a Procfile "
        "whose other worker consumes 'celery'; for " + "; ".join(wrong))


def test_the_guard_reads_an_equals_sign_after_a_short_option_as_part_of_the_value(kata, tmp_path):
    """the guard reads `-Q=schema` as Celery does: a short option's value is all that follows it, so the queue is '=schema'"""
    equals = PROCFILE_WEB + "worker: celery -A reports.celery_app worker -Q=schema,insight,celery\n"
    expect(refusal_or_names(kata, tmp_path, "Procfile", equals), {"schema"},
           "a Procfile whose worker has `-Q=schema,insight,celery` (click reads a short option's value as "
           "everything after the letter, `=` included: that worker consumes '=schema', 'insight' and 'celery', and "
           "nothing is ever sent to '=schema')")
    excluded = PROCFILE_WEB + "worker: celery -A reports.celery_app worker -Q schema,insight,celery -X=schema\n"
    expect(refusal_or_names(kata, tmp_path, "Procfile", excluded), set(),
           "a Procfile whose worker has `-Q schema,insight,celery -X=schema` (-X=schema excludes the queue "
           "'=schema', which it does not consume anyway: it consumes all three)")


def test_the_guard_counts_no_consumer_for_a_detached_worker(kata, tmp_path):
    """the guard counts no consumer for a worker started with -D/--detach: the process the platform started exits at once"""
    wrong = []
    for how, name, text in [
        ("-D", "Procfile", PROCFILE_WEB + "worker: celery -A reports.celery_app worker -D -Q schema,insight\n"
                                          "rest: celery -A reports.celery_app worker -Q celery\n"),
        ("--detach", "docker-compose.yml", json.dumps({"services": {
            "worker": {"command": "celery -A reports.celery_app worker -Q schema,insight --detach"},
            "rest": {"command": "celery -A reports.celery_app worker -Q celery"}}})),
        ("CELERY_WORKER_DETACH=1 in its environment", "docker-compose.yml", json.dumps({"services": {
            "worker": {"command": "celery -A reports.celery_app worker -Q schema,insight",
                       "environment": {"CELERY_WORKER_DETACH": "1"}},
            "rest": {"command": "celery -A reports.celery_app worker -Q celery"}}})),
    ]:
        found = refusal_or_names(kata, tmp_path, name, text)
        if found is not None and found != {"schema", "insight"}:
            wrong.append(f"a {name} whose worker on 'schema,insight' has {how}: expected ['insight', 'schema'] (or "
                         f"the file refused), got {sorted(found) or 'no queue'}")
    assert not wrong, (
        "expected the guard to count no consumer for a detached worker (calling guard.unconsumed_queues(app, path) "
        "directly on a deploy file whose other worker consumes 'celery'): --detach forks the worker into the "
        "background and the command exits at once, so a Procfile runner sees its process end and a container "
        "whose main process it was stops, and no worker stays up; for " + "; ".join(wrong))


def test_the_guard_takes_out_the_queues_excluded_through_the_environment(kata, tmp_path):
    """the guard reads CELERY_WORKER_EXCLUDE_QUEUES, which Celery takes for a missing -X, and lets -X win over it"""
    compose = {"services": {"worker": {"command": "celery -A reports.celery_app worker -Q schema,insight,celery",
                                       "environment": {"CELERY_WORKER_EXCLUDE_QUEUES": "schema"}}}}
    expect(guard(kata, tmp_path, "docker-compose.yml", json.dumps(compose)), {"schema"},
           "a compose file whose worker has `-Q schema,insight,celery` and `environment: {CELERY_WORKER_EXCLUDE_QUEUES: "
           "schema}` (Celery's command line reads a missing -X from CELERY_WORKER_EXCLUDE_QUEUES: it consumes "
           "'insight' and 'celery')")
    both = PROCFILE_WEB + ("worker: CELERY_WORKER_EXCLUDE_QUEUES=schema celery -A reports.celery_app worker "
                           "-Q schema,insight,celery -X insight\n")
    expect(guard(kata, tmp_path, "Procfile", both), {"insight"},
           "a Procfile whose worker has CELERY_WORKER_EXCLUDE_QUEUES=schema before the command and `-Q "
           "schema,insight,celery -X insight` (the option on the command line wins: it consumes 'schema' and 'celery')")


NOT_A_PROCESS = [  # Procfile lines that honcho, foreman and the platforms do not read as a process
    "schema worker: celery -A reports.celery_app worker -Q schema",  # a space in the name
    "schema.worker: celery -A reports.celery_app worker -Q schema",  # a dot in the name
    "celery -A reports.celery_app worker -Q schema",  # no name at all
]


def test_the_guard_reads_only_lines_a_procfile_runner_starts(kata, tmp_path):
    """the guard counts a Procfile line only in the form a Procfile runner starts: `name: command`, the name of letters, digits, - and _"""
    wrong = []
    for line in NOT_A_PROCESS:
        procfile = PROCFILE_WEB + "worker: celery -A reports.celery_app worker -Q insight,celery\n" + line + "\n"
        found = guard(kata, tmp_path, "Procfile", procfile)
        if found != {"schema"}:
            wrong.append(f"`{line}`: expected ['schema'], got {sorted(found) or 'no queue'}")
    assert not wrong, (
        "expected the guard to skip a Procfile line that is not `name: command` with a name of letters, digits, - "
        "and _ (honcho and foreman read a line with ^([A-Za-z0-9_-]+):\\s*(.+)$ and start nothing from any other), "
        "calling guard.unconsumed_queues(app, path) directly on a Procfile whose worker consumes 'insight,celery' "
        "and whose line for a 'schema' worker is malformed; for " + "; ".join(wrong))

# Deploy files as teams write them, against an oracle of the tests' own that knows what each worker was given
# (never by parsing the file): one to three workers, each with its queue option in any spelling, given once,
# twice (the last counts) or not at all, queues excluded in any spelling, CELERY_WORKER_QUEUES in its
# environment, other options anywhere, as a Procfile line or a compose service (command as a string or a list,
# environment as a mapping or a list); and a command line Celery refuses, an option last with no value, which
# starts no worker: the guard names what that leaves unconsumed, or refuses the file (ValueError, or argparse's
# SystemExit, with its reason), never another exception. The seed is in every failure message: LOOPKATA_HYPOTHESIS_SEED=<seed> replays the examples.
try:
    from hypothesis import HealthCheck, example, given, settings, strategies as st
    from hypothesis import seed as hypothesis_seed
except ImportError:  # pinned in requirements.txt; without it this test is skipped, and a skip never passes a check
    st = None

SEED = property_seed()
ROUTED = {"schema", "insight", "celery"}  # the app's routes, and its default queue
# "-Q={}": click reads a short option's value as all that follows the letter, so the first queue is "=schema"
QUEUE_SPELLINGS = ("-Q {}", "-Q{}", "--queues={}", "--queues {}", "-Q={}")
EXCLUDE_SPELLINGS = ("-X {}", "-X{}", "--exclude-queues={}", "--exclude-queues {}", "-X={}")
# Command lines Celery 5 refuses ("No such option", or a missing value), each starting no worker: True is an
# option given last with no value.
REFUSALS = {True: ["-Q"], "--queue": ["--queue", "schema,insight,celery"], "--autoreload": ["--autoreload"],
            "worker -A": []}
OTHER_OPTIONS = ("--loglevel=INFO", "-l INFO", "-c 2", "--concurrency 4", "-O fair")


OTHER_PROCESSES = (  # lines of a deploy file that start no Celery worker
    ("rq", "rq worker default"),  # another queue library's worker
    ("jobs", "bundle exec rake worker"),  # a word 'worker' in someone else's command line
    ("flower", "celery -A reports.celery_app flower"),  # Celery, but no worker
)


def consumed_by(worker: dict, task_queues) -> set:
    """The oracle: what a worker consumes, from what it was given."""
    if worker["refused"] or any(kind == "detach" for kind, _, _ in worker["options"]):
        return set()  # no worker starts, or it detaches and nothing stays up
    given = [as_read(spelling, names) for kind, spelling, names in worker["options"] if kind == "Q"]
    listed = given[-1] if given else worker["env"]
    excluded = [as_read(spelling, names) for kind, spelling, names in worker["options"] if kind == "X"]
    excluded = set(excluded[-1]) if excluded else set(worker["env_exclude"] or ())
    return (set(listed) if listed else set(task_queues) if task_queues else {"celery"}) - excluded


def as_read(spelling: str, names: list) -> list:
    """The queue names an option gives, as click reads them: `-Q=a,b` names '=a' and 'b'."""
    return ["=" + names[0], *names[1:]] if spelling in ("-Q={}", "-X={}") else names


def environment_of(w: dict) -> dict:
    """A worker's environment: its queue variables, and one whose value holds '=' as a URL's query does."""
    env = {"DATABASE_URL": "postgresql://db/reports?sslmode=require"}
    if w["env"]:
        env["CELERY_WORKER_QUEUES"] = ",".join(w["env"])
    if w["env_exclude"]:
        env["CELERY_WORKER_EXCLUDE_QUEUES"] = ",".join(w["env_exclude"])
    return env


def deploy_text(form: str, workers: list, others: list) -> tuple[str, str]:
    """(file name, text) of a deploy file that starts `workers`, with `others` (indexes into OTHER_PROCESSES, and
    None for a comment and a blank line) among them."""
    commands = []
    for w in workers:
        tokens = ["celery", "-A", "reports.celery_app", "worker"]
        if w["refused"] == "worker -A":  # Celery 4's order: -A after `worker`
            tokens = ["celery", "worker", "-A", "reports.celery_app"]
        for _, spelling, names in w["options"]:
            tokens += spelling.format(",".join(names)).split(" ") if names is not None else spelling.split(" ")
        commands.append(tokens + (REFUSALS[w["refused"]] if w["refused"] else []))
    if form == "Procfile":
        lines = [PROCFILE_WEB.strip()]
        for i, (w, tokens) in enumerate(zip(workers, commands)):
            prefix = "".join(f"{k}={shlex.quote(v)} " for k, v in environment_of(w).items())
            lines.append(f"worker{i}: {prefix}{' '.join(shlex.quote(t) for t in tokens)}")
        for j, other in enumerate(others):
            at = 1 + j % len(lines)
            lines[at:at] = (["# an old worker: celery -A reports.celery_app worker -Q schema", ""] if other is None
                            else [f"{OTHER_PROCESSES[other][0]}{j}: {OTHER_PROCESSES[other][1]}"])
        return "Procfile", "\n".join(lines) + "\n"
    services = {}
    for i, (w, tokens) in enumerate(zip(workers, commands)):
        service = {"command": tokens if form == "compose, command as a list" else shlex.join(tokens)}
        env = environment_of(w)
        service["environment"] = env if i % 2 == 0 else [f"{k}={v}" for k, v in env.items()]
        services[f"worker{i}"] = service
    for j, other in enumerate(o for o in others if o is not None):
        services[f"{OTHER_PROCESSES[other][0]}{j}"] = {"command": OTHER_PROCESSES[other][1]}
    return "docker-compose.yml", json.dumps({"services": services})  # JSON is YAML


if st is not None:
    # Queue names as Celery takes them: a one-letter one, and one with '=' in it, too.
    _names = st.lists(st.sampled_from(("schema", "insight", "celery", "reports", "q", "tier=gold")), min_size=1,
                      max_size=3, unique=True)
    _option = st.one_of(
        st.tuples(st.just("Q"), st.sampled_from(QUEUE_SPELLINGS), _names),
        st.tuples(st.just("X"), st.sampled_from(EXCLUDE_SPELLINGS), _names),
        st.tuples(st.just("other"), st.sampled_from(OTHER_OPTIONS), st.none()),
        st.tuples(st.just("detach"), st.sampled_from(("-D", "--detach")), st.none()),
    )
    _worker = st.fixed_dictionaries({"options": st.lists(_option, max_size=4), "env": st.none() | _names,
                                     "env_exclude": st.none() | _names,
                                     "refused": st.sampled_from((False, *REFUSALS))})

    @hypothesis_seed(SEED)
    @settings(max_examples=60, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(("Procfile", "compose, command as a string", "compose, command as a list")),
           st.lists(_worker, min_size=1, max_size=3),
           st.lists(st.none() | st.integers(0, len(OTHER_PROCESSES) - 1), max_size=3),
           st.none() | _names)
    @example("Procfile", [{"options": [("Q", "-Q {}", ["schema"]), ("Q", "--queues {}", ["insight", "celery"])],
                           "env": None, "env_exclude": None, "refused": False}], [], None)  # the last -Q counts
    @example("Procfile", [{"options": [("Q", "-Q {}", ["schema", "insight", "celery"])], "env": None,
                           "env_exclude": None, "refused": True}], [], None)  # a -Q with no value: no worker starts
    @example("compose, command as a list", [{"options": [("other", "-c 2", None)], "env": ["schema", "insight"],
                                             "env_exclude": None, "refused": False}], [0], None)  # the environment's
    @example("Procfile", [{"options": [("X", "-X {}", ["insight"])], "env": None, "env_exclude": None,
                           "refused": False}], [None, 1, 0], ["schema", "insight", "celery"])  # task_queues, less -X
    @example("Procfile", [{"options": [("Q", "-Q{}", ["q"]), ("other", "-l INFO", None)], "env": None,
                           "env_exclude": None, "refused": False},
                          {"options": [("Q", "--queues={}", ["tier=gold", "schema"])], "env": None, "env_exclude": None,
                           "refused": False}], [], None)  # -Qq, a one-letter queue; --queues=tier=gold,schema
    @example("compose, command as a string", [{"options": [("Q", "-Q {}", ["schema", "insight", "celery"])],
                                               "env": None, "env_exclude": ["insight"], "refused": False}],
             [], None)  # CELERY_WORKER_EXCLUDE_QUEUES stands in for a missing -X
    @example("Procfile", [{"options": [("Q", "-Q={}", ["schema", "insight", "celery"])], "env": None,
                           "env_exclude": None, "refused": False}], [], None)  # -Q=schema names '=schema'
    @example("Procfile", [{"options": [("Q", "-Q {}", ["schema", "insight"])], "env": None, "env_exclude": None,
                           "refused": "--queue"},
                          {"options": [("detach", "--detach", None), ("Q", "-Q {}", ["celery"])], "env": None,
                           "env_exclude": None, "refused": False}], [], None)  # no abbreviations; detached
    def _guard_property(kata, tmp_path, form, workers, others, task_queues):
        from kombu import Queue

        name, text = deploy_text(form, workers, others)
        consumed = set().union(*(consumed_by(w, task_queues) for w in workers))
        wanted = ROUTED - consumed
        refused = any(w["refused"] for w in workers)
        app_of(kata).conf.task_queues = [Queue(n) for n in task_queues] if task_queues else None
        if task_queues:
            text += f"\n# (the app's task_queues: {', '.join(task_queues)})\n"  # a comment, in a Procfile as in YAML
        try:
            found = guard(kata, tmp_path, name, text)
        except (ValueError, SystemExit) as exc:
            if refused:
                return  # it refuses a deploy file that Celery would not start: as right as naming the queues
            raise AssertionError(
                f"expected the guard to read this {form}, whose workers consume {sorted(consumed) or 'nothing'}, "
                f"and name {sorted(wanted) or 'no queue'}; it raised {type(exc).__name__}: {exc}\n{text}"
                + replay_words(SEED)) from None
        except Exception as exc:  # noqa: BLE001 - a guard that breaks on a deploy file is shown with it
            raise AssertionError(
                f"expected the guard to read this {form}, whose workers consume {sorted(consumed) or 'nothing'}, "
                f"and name {sorted(wanted) or 'no queue'}; it raised {type(exc).__name__}: {exc}\n{text}"
                + replay_words(SEED)) from None
        assert found == wanted, (
            f"expected the guard to name {sorted(wanted) or 'no queue'} for this {form}, got "
            f"{sorted(found) or 'no queue'}: as Celery reads them, its workers consume {sorted(consumed) or 'nothing'} "
            f"(the last queue option counts, CELERY_WORKER_QUEUES stands in for a missing one, excluded queues are "
            f"taken out, `-Q=a` names the queue '=a', a detached worker does not stay up, and a command line Celery "
            f"refuses (an option with no value, one the worker lacks, -A after `worker`) starts no worker)\n{text}"
            + replay_words(SEED)
        )


def test_the_guard_reads_any_worker_command_as_celery_does(kata, tmp_path):
    """any worker command, in any deploy file: queue options in every spelling, repeated, excluded, from the environment, or refused by Celery (named, or the file refused)"""
    if st is None:
        pytest.skip(NO_HYPOTHESIS)
    _guard_property(kata, tmp_path)


# --- part 2: real workers from the deploy files -------------------------------

def importable(kata, tmp_path) -> Path:
    """A folder where `reports` is the package under test, as the deploy files' `-A reports.celery_app` expects."""
    where = tmp_path / "app"
    where.mkdir(parents=True)
    (where / "reports").symlink_to(Path(kata.__file__).parent, target_is_directory=True)
    return where


def worker_commands(deploy_file: Path) -> tuple[list[str], list[dict]]:
    """The commands of the Celery workers a default deploy of the file starts (a Procfile's lines, a
    compose file's services, except those behind `profiles`, which a plain `docker compose up` leaves out),
    and for each the CELERY_WORKER_* options its deploy file gives it through the environment (a compose
    service's `environment`, a NAME=value before the command): Celery reads a missing option from them.
    The broker and the rest of the environment are the test's own."""
    found = celery_routes.worker_commands(deploy_file)
    if deploy_file.name == "Procfile":  # only `name: command` lines: a Procfile runner starts nothing from the others
        lines = deploy_file.read_text().splitlines()
        found = [c for c in found if PROCFILE_LINE.match(lines[c.line - 1])]
    own = [{k: v for k, v in c.environment().items() if k.startswith("CELERY_WORKER_")} for c in found]
    return [shlex.join(c.args) for c in found], own


def shown_with_env(command: str, own: dict) -> str:
    """`command`, with the options its environment gives it that the command line does not show."""
    extra = " ".join(f"{k}={v}" for k, v in own.items() if f"{k}=" not in command)
    return f"{extra} {command}" if extra else command


def left_out(deploy_file: Path) -> str:
    """The workers the file names but a default deploy does not start, as a clause ('' if none)."""
    dormant = celery_routes.worker_commands(deploy_file, dormant=True)
    if not dormant:
        return ""
    names = " and ".join(w.where() for w in dormant)
    return (f"; {names} {'is' if len(dormant) == 1 else 'are'} not started by a plain `docker compose up` "
            "(a service with `profiles` starts only once one of them is enabled), so not here either")


@contextmanager
def published():
    """task id -> the queue each message the app publishes meanwhile really went to (its routing key)."""
    from celery.signals import after_task_publish

    seen = {}

    def record(sender=None, headers=None, routing_key=None, **_):
        seen[(headers or {}).get("id")] = routing_key

    after_task_publish.connect(record, weak=False)
    try:
        yield seen
    finally:
        after_task_publish.disconnect(record)


def own_queue_note(app, names) -> str:
    """Why a queue= on a task's decorator did not keep these tasks out of their routed queues, or ''.

    Reading the tasks loads them into the app, which changes where a later send_task goes:
    call this only once every task of the test has been sent."""
    own = {name: getattr(app.tasks.get(name), "queue", None) for name in names}
    routed = {name: app.amqp.router.route({}, name)["queue"].name for name in names}
    differ = sorted(n for n in names if own[n] and own[n] != routed[n])
    if not differ:
        return ""
    one = len(differ) == 1
    owned = " and ".join(f"{n} (queue={own[n]!r})" for n in differ)
    return (f"\n{owned} {'has its' if one else 'have their'} own queue on the decorator, but the test sent "
            f"{'it' if one else 'them'} by name (app.send_task) from an app that had not loaded "
            f"{'it' if one else 'them'}, as a service that does not import these tasks does: then task_routes alone "
            "picks the queue "
            f"({', '.join(repr(routed[n]) for n in differ)}). A decorator's queue= counts only where the task itself "
            "is loaded (.delay(), .apply_async(), send_task once the app has loaded it), and there it wins over the "
            "route: the same task goes to a different queue depending on who sends it")


def purge(app) -> None:
    """Empty every queue the app knows, so one run's stranded messages are not the next one's."""
    queues = {app.conf.task_default_queue} | {r["queue"] for r in (app.conf.task_routes or {}).values()
                                               if isinstance(r, dict) and "queue" in r}
    with app.connection_for_write() as conn:
        for queue in queues:
            conn.default_channel.queue_purge(queue)


def stranded(broker: Path) -> dict:
    """Messages still waiting in the filesystem broker, per queue."""
    found = {}
    for message in (broker / "queue").glob("*.msg") if (broker / "queue").is_dir() else []:
        queue = message.name.rsplit(".", 2)[-2]
        found[queue] = found.get(queue, 0) + 1
    return found


def wait_for(app, sent: dict, seconds: float) -> dict:
    """name -> final state, polling until every task finished or `seconds` passed."""
    deadline, states = time.monotonic() + seconds, {}
    while time.monotonic() < deadline:
        states = {name: app.AsyncResult(task_id).state for name, task_id in sent.items()}
        if all(state in ("SUCCESS", "FAILURE") for state in states.values()):
            break
        time.sleep(0.05)
    return states


PROCFILE_LINE = re.compile(r"^([A-Za-z0-9_-]+):\s*(.+)$")  # a Procfile line as honcho reads it


def defined_twice(procfile: Path) -> dict:
    """process type -> [(line number, command)] for every type the Procfile defines more than once."""
    lines = {}
    for number, line in enumerate(procfile.read_text().splitlines(), 1):
        match = PROCFILE_LINE.match(line)
        if match:
            lines.setdefault(match.group(1), []).append((number, match.group(2).strip()))
    return {name: found for name, found in lines.items() if len(found) > 1}


def celery_queue_list(args: list, env: dict) -> list:
    """The queues a worker's -Q/--queues names as Celery reads it: the last such option (else
    CELERY_WORKER_QUEUES from its environment), split on commas only."""
    value = celery_routes.worker_option(args, "-Q", "--queues") or env.get(celery_routes.QUEUES_VARIABLE)
    return value.split(",") if value is not None else []


def detaches(deploy: str, commands: list[str], own_env: list[dict]) -> str:
    """Why the test starts none of these workers if one of them detaches (-D, --detach, CELERY_WORKER_DETACH), or ''.

    A detached worker leaves the process that started it, which exits at once: under a Procfile runner or as a
    container's main process nothing stays up; here it would also outlive the test, so it is never started."""
    for command, own in zip(commands, own_env):
        args = shlex.split(command)
        flag = own.get("CELERY_WORKER_DETACH", "").lower() in ("1", "true", "yes", "on")
        if "-D" in args or "--detach" in args or flag:
            return (f"expected {deploy}'s workers to stay in the foreground, but `{shown_with_env(command, own)}` "
                    "detaches: the worker forks into the background and the command exits at once, so a Procfile "
                    "runner sees its process end, a container whose main process it is stops, and no worker stays "
                    "up to consume; the test started no worker")
    return ""


def run_deploy(kata, tmp_path, broker, deploy: str) -> tuple[list[str], list[str]]:
    """Start deploy's workers, send every kind of task; what went wrong, as sentences, and the tasks left PENDING."""
    app = app_of(kata)
    deploy_file = Path(kata.__file__).parent / deploy
    commands, own_env = worker_commands(deploy_file)
    if not commands:
        return [f"{deploy} starts no Celery worker (no command running `celery ... worker`){left_out(deploy_file)}"], []
    # Read as the platform and Celery read them, before any worker starts: what these find
    # does not depend on the broker, or on how busy the machine is.
    twice = defined_twice(deploy_file) if deploy == "Procfile" else {}
    if twice:
        return [
            f"expected every process type in {deploy} to be defined once, but "
            + "; ".join(f"'{name}' is defined on lines {' and '.join(str(n) for n, _ in lines)} "
                        f"({', '.join(f'`{c}`' for _, c in lines)})" for name, lines in twice.items())
            + ": honcho refuses such a file (process names must be unique), and a platform keeps one command per "
            "process type, so only one of those workers would run; the test started none of them"], []
    detached = detaches(deploy, commands, own_env)
    if detached:
        return [detached], []
    for command, own in zip(commands, own_env):
        spaced = sorted(q for q in celery_queue_list(shlex.split(command), own) if q != q.strip())
        if spaced:
            return [(
                f"expected the queues of {deploy}'s worker `{shown_with_env(command, own)}` to be queues the app routes to, but Celery "
                f"splits -Q on commas only, so it consumes {' and '.join(repr(q) for q in spaced)}, spaces included, "
                f"where nothing is ever sent (the app sends to {' and '.join(repr(q.strip()) for q in spaced)}): "
                "on Redis such a worker starts and waits in silence, on the broker of files it exits with 'Invalid "
                "exchange name'; the test started no worker")], []
    purge(app)
    with celery_workers.running(commands, pythonpath=importable(kata, tmp_path), env={}, own_env=own_env) as workers, \
            published() as went:
        sent = {name: app.send_task(name, args=args).id for name, args in TASKS.items()}
        said = [w.queues() for w in workers]
        consumed = set().union(*said) if all(q is not None for q in said) else None
        # A task sent to a queue that no worker says it consumes can never run: watched
        # briefly, not for the whole budget. The rest get the whole budget.
        routed = {name: went.get(task_id) for name, task_id in sent.items()}
        certain = {n for n in sent if consumed is not None and routed[n] is not None and routed[n] not in consumed}
        states = wait_for(app, {n: i for n, i in sent.items() if n not in certain}, DONE_WITHIN)
        states |= wait_for(app, {n: i for n, i in sent.items() if n in certain}, STRANDED_AFTER)
    problems = []
    pending = sorted(name for name, state in states.items() if state not in ("SUCCESS", "FAILURE"))
    failed = sorted(name for name, state in states.items() if state == "FAILURE")
    if pending:
        queues = stranded(broker)
        waiting = ", ".join(f"queue '{q}': {n} message{'s' if n > 1 else ''}" for q, n in sorted(queues.items()))
        shown = "; ".join(f"`{shown_with_env(c, own)}`" for c, own in zip(commands, own_env))
        problems.append(
            f"expected every kind of task to complete within {DONE_WITHIN:g} s under {deploy}'s worker(s) ({shown}, "
            "started as real Celery workers, one task of each kind sent to them by name), "
            f"but {' and '.join(pending)} {'is' if len(pending) == 1 else 'are'} still PENDING, with nothing logged"
            + (f"; {'its message sits' if len(pending) == 1 else 'their messages sit'} in the broker ({waiting})"
               if waiting else "")
            + (f", and the workers consume only {', '.join(sorted(consumed))}" if consumed else "")
            + left_out(deploy_file)
        )
    for name in failed:
        problems.append(f"expected {name}, sent by name to {deploy}'s worker(s) started as real Celery workers, "
                        "to succeed, but it failed: "
                        f"{app.AsyncResult(sent[name]).result!r}")
    return problems, pending


def test_every_kind_of_task_completes_under_each_deploy_file(kata, tmp_path, broker):
    """under the Procfile and under docker-compose.yml, every kind of task completes"""
    problems, stuck = [], set()
    for deploy in ("Procfile", "docker-compose.yml"):
        said, pending = run_deploy(kata, tmp_path / deploy.replace(".", "_"), broker, deploy)
        problems += said
        stuck |= set(pending)
    note = own_queue_note(app_of(kata), sorted(stuck)) if stuck else ""  # every task has been sent by now
    assert not problems, "\n".join(problems) + note


QUESTION_SECONDS = 60.0  # a slow question: it outlasts the test, whose workers are killed at its end
SYNC_WITHIN = 10.0  # seconds a schema sync may take while the questions run (it takes about 0.1 s)


def received(workers, task_id: str):
    """The worker whose log says it has received the task, or None."""
    return next((w for w in workers if any(f"[{task_id}] received" in line for line in list(w.lines))), None)


def ran(workers, task_id: str):
    """The worker whose log says it finished the task, or None."""
    return next((w for w in workers if any(f"[{task_id}] succeeded" in line or f"[{task_id}] raised" in line
                                           for line in list(w.lines))), None)


def slow_questions_then_syncs(kata, tmp_path, deploy: str) -> list[str]:
    """Under `deploy`'s workers, two slow questions, then two schema syncs once the questions are taken;
    what went wrong, as sentences."""
    app = app_of(kata)
    deploy_file = Path(kata.__file__).parent / deploy
    commands, own_env = worker_commands(deploy_file)
    if not commands:
        return [f"{deploy} starts no Celery worker{left_out(deploy_file)}"]
    detached = detaches(deploy, commands, own_env)
    if detached:
        return [detached]
    purge(app)
    shown = "; ".join(f"`{shown_with_env(c, own)}`" for c, own in zip(commands, own_env))
    how = (f"{deploy}'s worker(s) ({shown}) started as real Celery workers, one task at a time each; two questions "
           f"that think for {QUESTION_SECONDS:g} s sent first, then two syncs, one by name and one with .delay(), "
           "once the questions were taken")
    with celery_workers.running(commands, pythonpath=importable(kata, tmp_path), env={}, own_env=own_env) as workers, \
            published() as went:
        questions = [app.send_task("insight.answer", args=[f"question {n}"],
                                   kwargs={"think_seconds": QUESTION_SECONDS}).id for n in range(2)]
        # The syncs go out once the questions are taken: by every worker that consumes their queue, or
        # both taken. A worker answering a question runs nothing else until it is done.
        takers = [w for w in workers if "insight" in (w.queues() or {"insight"})]
        if not takers:  # by the workers' banners: the questions can never be taken (another test says why)
            return [f"expected a worker to take the questions, but no worker consumes 'insight' ({how})"]
        deadline = time.monotonic() + DONE_WITHIN
        while time.monotonic() < deadline:
            busy = {received(workers, q) for q in questions} - {None}
            if len(busy) == len(questions) or (busy and all(w in busy for w in takers)):
                break
            time.sleep(0.02)
        else:
            return [f"expected the slow questions to be taken by a worker within {DONE_WITHIN:g} s, but no worker "
                    f"received {'them' if not busy else 'both'} ({how})"]
        syncs = {"sent by name (app.send_task)": app.send_task("schema.sync_source", args=[7]).id}
        task = app.tasks["schema.sync_source"]  # as the API sends it: .delay() on the task itself
        syncs["sent with .delay() (as the API sends it)"] = task.delay(8).id
        def can_never_run(task_id: str) -> bool:
            """Every worker consuming the sync's queue (by its banner) is answering a question that outlasts
            the test, or none consumes it: the sync cannot run before the end, so it is not waited for."""
            consumers = [w for w in workers if w.queues() is None or went.get(task_id) in w.queues()]
            return all(w in busy for w in consumers)

        deadline = time.monotonic() + SYNC_WITHIN
        while time.monotonic() < deadline and not all(ran(workers, t) or can_never_run(t) for t in syncs.values()):
            time.sleep(0.02)
        late = {how_sent: t for how_sent, t in syncs.items() if not ran(workers, t)}
        busy_with = {w.command for w in busy}
    own = getattr(task, "queue", None)
    problems = []
    for how_sent, task_id in late.items():
        queue = went.get(task_id)
        consumers = [w.command for w in workers if queue in (w.queues() or set())]
        held = [c for c in consumers if c in busy_with]
        problems.append(
            f"the one {how_sent} was not run while the questions were being answered: "
            f"it went to queue '{queue}'"
            + (f" (its decorator's queue={own!r}, which .delay() puts before the route)"
               if own and own == queue and "delay" in how_sent else "")
            + (f", whose only worker{'s are' if len(held) > 1 else ' is'} busy answering a question "
               f"({', '.join(f'`{c}`' for c in held)})" if consumers and held == consumers else
               ", which no worker consumes" if not consumers else "")
        )
    if problems:
        return [f"expected every schema sync to run while slow questions were being answered ({how}), but "
                + "; ".join(problems)]
    return []


def test_a_slow_question_does_not_hold_up_a_schema_sync(kata, tmp_path, broker):
    """under each deploy file, schema syncs run while slow questions are being answered"""
    problems = []
    for deploy in ("Procfile", "docker-compose.yml"):
        problems += slow_questions_then_syncs(kata, tmp_path / f"slow_{deploy.replace('.', '_')}", deploy)
    assert not problems, "\n".join(problems)


def test_the_guard_passes_your_own_deploy_files(kata):
    """your fixed deploy files leave no queue without a consumer, by your own guard"""
    import importlib

    app, folder = app_of(kata), Path(kata.__file__).parent
    check = importlib.import_module(f"{kata.__name__}.guard").unconsumed_queues
    for deploy in ("Procfile", "docker-compose.yml"):
        found = set(check(app, folder / deploy))
        assert not found, (
            f"expected your {deploy} to leave no queue without a consumer, but your guard, called directly on it "
            f"(guard.unconsumed_queues(app, path)), names {sorted(found)}"
        )
