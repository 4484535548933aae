"""The whole suite (tests and nbval notebooks): its progress kept apart from the learner's,
and its tests laid out for pytest-xdist (`make test` runs them on several workers).

- A notebook's cells share one kernel, in order: each notebook goes to one worker
  whole, and so does the browser stage (one JupyterLab and one Chromium for all of
  it). Every other test is handed out on its own.
- The work is handed out in the order collected here: the longest first (the
  browser stage, the notebooks run again, the notebooks, a venv built, a hub
  started), the many short kata proofs and engine tests last, so no worker is left
  with a long one at the end while the others wait.
"""
import atexit
import os
import shutil
import sys
import tempfile

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

    def __init__(self, *args, **kwargs):
        for attempt in (1, 2, 3):
            suite_state = os.environ["LOOPKATA_STATE"]
            os.environ["LOOPKATA_STATE"] = tempfile.mkdtemp(dir=suite_state, prefix="notebook-")
            try:
                super().__init__(*args, **kwargs)  # the kernel's environment is copied from ours now
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

# Longest first, as benchmarks/suite_cost.py measures them: the browser stage (about 200 s on
# one worker), each stay-true run (about 20 s), each notebook under nbval (10-50 s), the offline
# install (30 s), the hub (13 s), then the kata proofs (1-4 s each) and everything else.
LONGEST_FIRST = (
    "tests/browser/",
    "tests/test_notebooks_stay_true.py::",
    "notebooks/",
    "tests/test_offline_install.py::",
    "tests/test_workshop_hub.py::",
    "tests/test_katas_proven.py::",
)
ONE_WORKER = ("tests/browser/",)  # besides each notebook: groups whose tests share one session


def _long_first(item) -> int:
    for rank, prefix in enumerate(LONGEST_FIRST):
        if item.nodeid.startswith(prefix):
            return rank
    return len(LONGEST_FIRST)


def pytest_collection_modifyitems(config, items):
    items[:] = sorted(items, key=_long_first)  # stable: a notebook's cells keep their order


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
