"""The whole suite (tests and nbval notebooks): its progress kept apart from the learner's,
and its tests laid out for pytest-xdist (`make test` runs them on several workers).

- A notebook's cells share one kernel, in order: each notebook is one xdist group,
  and so is the browser stage (one JupyterLab and one Chromium for all of it).
- xdist hands out the work in the order collected here (`--no-loadscope-reorder`):
  the longest first (the browser stage, the notebooks run again, the notebooks,
  a venv built, a hub started), the many short kata proofs and engine tests last,
  so no worker is left with a long one at the end while the others wait.
"""
import atexit
import os
import shutil
import tempfile

import pytest

# Every xdist worker imports this file, so each gets a state folder of its own.
os.environ["LOOPKATA_STATE"] = tempfile.mkdtemp(prefix="loopkata-suite-")
atexit.register(shutil.rmtree, os.environ["LOOPKATA_STATE"], ignore_errors=True)

# Longest first, as benchmarks/suite_cost.py measures them: the browser stage (about 200 s on
# one worker), each stay-true run (about 30 s), each notebook under nbval (10-50 s), the offline
# install (30 s), the hub (13 s), then the kata proofs (1-4 s each) and everything else.
LONGEST_FIRST = (
    "tests/browser/",
    "tests/test_notebooks_stay_true.py::",
    "notebooks/",
    "tests/test_offline_install.py::",
    "tests/test_workshop_hub.py::",
    "tests/test_katas_proven.py::",
)


def _long_first(item) -> int:
    for rank, prefix in enumerate(LONGEST_FIRST):
        if item.nodeid.startswith(prefix):
            return rank
    return len(LONGEST_FIRST)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.xdist_group(item.path.name))
        elif "browser" in item.path.parent.parts[-1:]:
            item.add_marker(pytest.mark.xdist_group("browser"))
    items[:] = sorted(items, key=_long_first)  # stable: a notebook's cells keep their order
