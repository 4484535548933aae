"""A workshop room with no network: `make wheelhouse` on a machine that has one, then the
set-up installs from the wheelhouse without asking any index."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# How make and pip build a venv from a wheelhouse is the same on every Python: CI runs this on 3.11 only.
pytestmark = pytest.mark.python_independent


def test_the_set_up_installs_from_a_wheelhouse_with_no_index(tmp_path):
    """after `make wheelhouse`, `make` builds a working venv from it with pip's network off"""
    wheelhouse, venv = tmp_path / "wheelhouse", tmp_path / "venv"
    fetch = subprocess.run(["make", "-s", "wheelhouse", f"PY={sys.executable}", f"WHEELHOUSE={wheelhouse}"],
                           cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert fetch.returncode == 0, f"make wheelhouse failed:\n{fetch.stdout}\n{fetch.stderr}"
    assert len(list(wheelhouse.glob("*.whl"))) > 50, "expected the wheelhouse to hold every pinned wheel"
    # pip's network off: any index it asked would be a closed port on 127.0.0.1
    offline = {**os.environ, "PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_EXTRA_INDEX_URL": "",
               "PIP_FIND_LINKS": "", "PIP_RETRIES": "0", "PIP_TIMEOUT": "2"}
    build = subprocess.run(["make", f"{venv}/.installed", f"PY={sys.executable}", f"VENV={venv}",
                            f"WHEELHOUSE={wheelhouse}"], cwd=ROOT, env=offline, capture_output=True, text=True,
                           timeout=900)
    assert build.returncode == 0, f"the offline install failed:\n{build.stdout[-3000:]}\n{build.stderr[-3000:]}"
    assert f"installing from {wheelhouse}/" in build.stdout, build.stdout
    listed = subprocess.run([str(venv / "bin" / "loopkata"), "list"], cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    assert listed.returncode == 0 and "bound-semaphore" in listed.stdout, listed.stdout + listed.stderr
