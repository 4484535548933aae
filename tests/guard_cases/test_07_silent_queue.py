"""The reports service (kata 07), tested as its team would: the Procfile's workers, and jobs sent through the API.

Each `celery ... worker` line of the Procfile is started as the platform starts
it (a shell runs the line), with options that make a worker quick to start and
stop added at the end, against a broker that is a folder of files (set up as
loopkata's own tests set it up). The package is importable as `reports`, the
name the deploy files use.
"""
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from conftest import load, submodule
from loopkata.services import celery_workers

# The bug is in the deploy files: their worker consumes the default queue only, while the app routes
# schema.* and insight.* to queues of their own. No finding can name a line of a Procfile: the guard sees
# the tasks sent and the workers that run, so the finding names the API's line that sends to the queue
# nobody consumes.
BUG = [("web.py", "sync"), ("web.py", "ask")]

QUICK = "--pool=solo --without-gossip --without-mingle --without-heartbeat"


@pytest.fixture(scope="module")
def kata(impl, tmp_path_factory):
    """The service, imported once the broker's folder is set (celery_app reads it at import)."""
    folder = tmp_path_factory.mktemp("broker")
    os.environ.update(celery_workers.broker_env(folder))
    return load(impl)


@pytest.fixture
def procfile_workers(kata, impl, tmp_path):
    """Every worker the Procfile starts, each ready; killed with its process group after the test."""
    (tmp_path / "reports").symlink_to(impl)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])),
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
    workers = []
    try:
        for line in (impl / "Procfile").read_text().splitlines():
            name, _, command = line.partition(":")
            if re.search(r"\bcelery\b.*\bworker\b", command):
                workers.append(start(f"{command.strip()} {QUICK} --hostname={name.strip()}@%h", env, tmp_path))
        yield workers
    finally:
        for process, _ in workers:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def start(command, env, cwd):
    process = subprocess.Popen(["sh", "-c", command], env=env, cwd=cwd, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    lines = []
    threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True).start()
    deadline = time.monotonic() + 20
    while not any(line.rstrip().endswith(" ready.") for line in lines):
        assert process.poll() is None and time.monotonic() < deadline, f"`{command}` did not start:\n{''.join(lines)}"
        time.sleep(0.05)
    return process, lines


def test_jobs_sent_through_the_api_are_done(kata, procfile_workers):
    """A schema sync and a question, through the API, with the Procfile's workers running: both jobs finish."""
    client = TestClient(submodule(kata, "web").app)
    jobs = [client.post("/sources/7/sync").json()["job"], client.post("/questions", params={"question": "growth?"}).json()["job"]]
    deadline = time.monotonic() + 3
    while (states := [client.get(f"/jobs/{job}").json()["state"] for job in jobs]) != ["SUCCESS"] * 2:
        assert time.monotonic() < deadline, f"jobs still {states} after 3 s"
        time.sleep(0.05)
