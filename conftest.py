"""The whole suite (tests and nbval notebooks): its progress kept apart from the learner's,
and its tests laid out for pytest-xdist (`make test` runs them on several workers).

- A notebook's cells share one kernel, in order: each notebook goes to one worker
  whole, and so does the browser stage (one JupyterLab and one Chromium for all of
  it). Every other test is handed out on its own.
- The work is handed out in the order collected here: the longest first (the
  browser stage, the notebooks, a venv built, a hub started), the many short kata
  proofs and engine tests last, so no worker is left with a long one at the end
  while the others wait.
- Notebooks stay true (`--notebook-katas=solved`, the default): nbval runs every
  notebook in a copy of the project whose katas/ hold the reference fixes, as a
  learner's checkout is once every kata is solved, and compares every cell with the
  stored notebook, except the cells that look at the learner's own copy or progress
  (LEARNER_CELLS). A reproduction that read the learner's file instead of
  `pristine_starter(...)` would print something else there. `--notebook-katas=shipped`
  runs them in the checkout itself, with katas/ as shipped (CI does so on 3.12 and 3.13).
"""
import atexit
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from nbval import plugin as nbval_plugin

# Every xdist worker imports this file, so each gets a state folder of its own.
os.environ["LOOPKATA_STATE"] = tempfile.mkdtemp(prefix="loopkata-suite-")
atexit.register(shutil.rmtree, os.environ["LOOPKATA_STATE"], ignore_errors=True)


class NotebookKernel(nbval_plugin.RunningKernel):
    """The kernel nbval starts at a notebook's first cell, with a progress folder of its own.

    - Its own progress: a notebook's stored outputs were made from a learner's first visit
      (its progress table, its panels); the checks another notebook ran on this worker
      before must not show in it.
    - A start that fails is tried twice more. On a busy machine with several workers a
      kernel can die or go unanswered at start-up (a port taken between jupyter_client
      choosing it and the kernel binding it, a slow first reply): that says nothing of the
      notebook, whose cells would all error at set-up."""

    def __init__(self, kernel_name, cwd=None, startup_timeout=60):
        if _NOTEBOOK_KATAS["mode"] == "solved" and cwd is not None:
            # the kernel finds its project from its folder, as a learner's does
            cwd = str(solved_project() / Path(cwd).resolve().relative_to(ROOT))
        for attempt in (1, 2, 3):
            suite_state = os.environ["LOOPKATA_STATE"]
            os.environ["LOOPKATA_STATE"] = tempfile.mkdtemp(dir=suite_state, prefix="notebook-")
            try:
                # the kernel's environment is copied from ours now
                super().__init__(kernel_name, cwd=cwd, startup_timeout=startup_timeout)
                return
            except RuntimeError as exc:
                if hasattr(self, "km"):  # started, then failed to answer: stop it before the next one
                    self.stop()
                if attempt == 3:
                    raise
                print(f"[nbval] the kernel did not start ({exc}); starting another", file=sys.stderr)
            finally:
                os.environ["LOOPKATA_STATE"] = suite_state


nbval_plugin.RunningKernel = NotebookKernel

ROOT = Path(__file__).resolve().parent
_NOTEBOOK_KATAS = {"mode": "solved"}
# Cells that look at the learner's own copy or progress: they are meant to change once it is solved.
LEARNER_CELLS = re.compile(r'\bcheck\("[^"]+"\)\s*$|once_solved\(|progress_table\(', re.M)
_solved: list[Path] = []


def pytest_addoption(parser):
    parser.addoption(
        "--notebook-katas", choices=("solved", "shipped"), default="solved",
        help="run the notebooks under nbval in a copy of the project whose katas/ hold the reference fixes "
             "(solved, the default: proves that they stay true) or in the checkout as shipped")


def pytest_configure(config):
    _NOTEBOOK_KATAS["mode"] = config.getoption("--notebook-katas")


@pytest.fixture
def need_sandbox():
    """Skips where this machine has no re-grade sandbox, unless LOOPKATA_REQUIRE_SANDBOX is set (CI): then fails."""
    from loopkata.room import sandbox

    why = sandbox.why_no_sandbox()
    if why and os.environ.get("LOOPKATA_REQUIRE_SANDBOX", "") not in ("", "0"):
        pytest.fail(f"LOOPKATA_REQUIRE_SANDBOX is set, but {why}", pytrace=False)
    if why:
        pytest.skip(f"no sandbox on this machine: {why}")


def solved_project() -> Path:
    """This process's copy of the project with every kata solved (solutions/ copied over katas/).

    Not under pytest's own temporary folder: any pytest process that starts (a check's grading
    run, say) takes group and other access off /tmp/pytest-of-<user>, and the PostgreSQL a
    notebook starts in the copy runs as another user when we are root: it would lose its own
    data folder in the middle of a query (PANIC, "Permission denied")."""
    if not _solved:
        from loopkata.model import catalogue  # after pytest has put src/ in reach, as every test does

        copy = Path(tempfile.mkdtemp(prefix="loopkata-solved-")) / "project"
        atexit.register(shutil.rmtree, copy.parent, ignore_errors=True)
        skip = shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints", ".loopkata")
        for part in ("katas", "solutions", "tests", "notebooks"):
            if (ROOT / part).is_dir():
                shutil.copytree(ROOT / part, copy / part, ignore=skip, symlinks=True)
        if (ROOT / ".git").exists():
            shutil.copytree(ROOT / ".git", copy / ".git")  # the shipped starters are found by their git blob ids
        for kata in catalogue.load(ROOT):
            target = copy / "katas" / kata.path
            if target.is_dir():
                shutil.rmtree(target)
                shutil.copytree(copy / "solutions" / kata.path, target)
            else:
                shutil.copy2(copy / "solutions" / kata.path, target)
        _solved.append(copy)
    return _solved[0]

# Longest first, as benchmarks/suite_cost.py measures them: the browser stage (about 200 s on
# one worker), each notebook under nbval (10-50 s), the offline
# install (30 s), the hub (13 s), then the kata proofs (1-4 s each) and everything else.
LONGEST_FIRST = (
    "tests/browser/",
    "notebooks/",
    "tests/test_offline_install.py::",
    "tests/test_workshop_hub.py::",
    "tests/test_katas_proven.py::",
)
# Besides each notebook: groups whose tests share one session (a lab of their own each, the first
# one is taken first).
ONE_WORKER = ("tests/browser/test_learner_path.py", "tests/browser/")


def _long_first(item) -> int:
    for rank, prefix in enumerate(LONGEST_FIRST):
        if item.nodeid.startswith(prefix):
            return rank
    return len(LONGEST_FIRST)


def pytest_collection_modifyitems(config, items):
    items[:] = sorted(items, key=_long_first)  # stable: a notebook's cells keep their order
    if _NOTEBOOK_KATAS["mode"] == "solved":
        for item in items:  # nbval's cells: a learner's check, fix or progress is meant to differ once solved
            cell = getattr(item, "cell", None)
            if cell is not None and hasattr(item, "options") and LEARNER_CELLS.search(cell.source):
                item.options["check"] = False


def work_unit(nodeid: str) -> str:
    """What must run on one worker, in order: a notebook's cells, the browser stage; else the test alone."""
    path = nodeid.split("::", 1)[0]
    if path.endswith(".ipynb"):
        return path
    return next((group for group in ONE_WORKER if nodeid.startswith(group)), nodeid)


def pytest_xdist_make_scheduler(config, log):
    # Imported here: a serial run (`pytest` without -n, WORKERS=0) never loads xdist's scheduler.
    # (xdist's own --dist loadgroup cannot be used: with pytest 9 its group marks are lost.)
    from xdist.scheduler import LoadScopeScheduling

    class ByWorkUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    config.option.loadscopereorder = False  # keep the order above, not "largest group first"
    return ByWorkUnit(config, log)
