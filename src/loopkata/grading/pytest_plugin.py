"""The grader's pytest plugin: runs inside the check subprocess, never in a kernel.

It adds `--impl PATH`, gives every test a fresh copy of the implementation
(module-level state is the bug, so nothing may leak between tests), and writes
one JSON line per test to the file descriptor $LOOPKATA_RESULTS_FD as soon as
the test ends, so a result survives even if the process is later killed for
hanging. The grader holds that file open itself: the code under test cannot
lose the results by deleting a file.
"""
from __future__ import annotations

import importlib.util
import itertools
import json
import os
import sys
import time
import traceback
from pathlib import Path

import pytest

from .. import services
from ..services.containers import NotHere
from ..model import catalogue
from .bounded import Hang
from .frames import describe_frames
from .stackdump import dump_stacks_later

_counter = itertools.count(1)
_RESULT = pytest.StashKey[dict]()


class ImplLoadError(Exception):
    """The implementation could not be imported; str() is a paragraph for a learner."""


def pytest_addoption(parser):
    parser.addoption("--impl", default=None, help="the implementation to grade: a file or a folder")


def pytest_configure(config):
    impl = config.getoption("--impl")
    if impl:
        os.environ["LOOPKATA_IMPL"] = str(Path(impl).resolve())
    for name in ("LOOPKATA_RESULTS_FD", "LOOPKATA_STACKS_FD"):
        if os.environ.get(name):
            os.set_inheritable(int(os.environ[name]), False)  # not for the learner's subprocesses
    stacks = os.environ.get("LOOPKATA_STACKS_FD")
    deadline = float(os.environ.get("LOOPKATA_DEADLINE", "0") or 0)
    if stacks and deadline > 0:
        # Just before the grader kills us for running out of time, every
        # thread's stack goes to a file the grader reads back.
        dump_stacks_later(max(deadline - time.time() - 0.5, 0.1), int(stacks),
                          moved_by=os.environ.get("LOOPKATA_DEADLINE_FILE", ""))


def _write(record: dict) -> None:
    fd = os.environ.get("LOOPKATA_RESULTS_FD")
    if fd:
        os.write(int(fd), (json.dumps(record) + "\n").encode())


def _title(item) -> str:
    doc = getattr(item.function, "__doc__", None) or ""
    first = doc.strip().splitlines()[0].strip() if doc.strip() else ""
    return first or item.name.removeprefix("test_").replace("_", " ")


def pytest_collection_modifyitems(items):
    for item in items:
        _write({"event": "collected", "name": item.name, "title": _title(item)})


def pytest_runtest_logstart(nodeid, location):
    _write({"event": "begin", "name": nodeid.split("::")[-1]})


def _describe(excinfo) -> dict:
    exc = excinfo.value
    if isinstance(exc, Hang):
        return {"outcome": "hang", "message": str(exc), "stacks": exc.stacks}
    if isinstance(exc, NotHere):  # a mechanism this machine lacks: neither a pass nor a failure
        return {"outcome": "could not run", "message": str(exc)}
    if isinstance(exc, (ImplLoadError, services.ServiceUnavailable)):
        return {"outcome": "error", "message": str(exc)}
    if isinstance(exc, MemoryError):
        cap = int(os.environ.get("LOOPKATA_MEMORY", "0") or 0)
        limit = f"more than {cap / 2**30:g} GiB" if cap else "all the memory it could get"
        message = (f"The code under test used {limit} of memory (the cap for one check) and got MemoryError: "
                   "something grows without bound.")
    elif isinstance(exc, AssertionError):
        message = str(exc) or "an expectation was not met"
    else:
        message = f"{type(exc).__name__}: {exc}"
    frames = [(f.filename, f.lineno, f.name) for f in traceback.extract_tb(exc.__traceback__)]
    if exc.__cause__ is not None:  # a test that re-raises the learner's error "from" it
        frames += [(f.filename, f.lineno, f.name) for f in traceback.extract_tb(exc.__cause__.__traceback__)]
    where = describe_frames(frames, fallback=False)
    return {"outcome": "failed", "message": message, "where": where[-1] if where else ""}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    result = item.stash.setdefault(_RESULT, {"name": item.name, "title": _title(item), "outcome": "passed"})
    if call.excinfo is not None and result["outcome"] == "passed" and report.outcome != "skipped":
        result.update(_describe(call.excinfo))
    elif report.outcome == "skipped" and result["outcome"] == "passed":
        # A skip or an xfail is never a pass: the check passes only if every hidden test ran.
        how = "marked as an expected failure (pytest.xfail)" if hasattr(report, "wasxfail") else "skipped"
        reason = getattr(report, "wasxfail", "") or (report.longrepr[-1] if isinstance(report.longrepr, tuple) else "")
        result.update(outcome="skipped", message=(
            f"This test was {how} before it could run{f' ({reason})' if reason else ''}. "
            "A check passes only when every hidden test runs and passes: remove the skip from the code under test."
        ))
    if call.when == "teardown":
        _write({"event": "result", **result})
        if result["outcome"] in ("failed", "hang") and os.environ.get("LOOPKATA_UNTIL_FAILED"):
            # A proof that a wrong fix fails needs one failure, not every one (runner.check(until_failed=True)).
            _write({"event": "enough", "after": item.name})
            item.session.shouldfail = "a failure was enough"


def load_fresh(path: Path):
    """Import a new, independent copy of the kata at `path` (a .py file or a package folder)."""
    path = Path(path).resolve()
    name = f"kata_under_test_{next(_counter)}"
    if path.is_dir():
        init = path / "__init__.py"
        spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(path)])
    else:
        spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or not path.exists():
        raise ImplLoadError(f"There is no implementation at {path}.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise ImplLoadError(
            f"{exc.filename} has a syntax error on line {exc.lineno}: {exc.msg}. "
            "Python stopped reading the file there, so no test could run."
        ) from None
    except Exception as exc:  # noqa: BLE001 - any import-time failure is the learner's to see
        frames = describe_frames([(f.filename, f.lineno, f.name) for f in traceback.extract_tb(exc.__traceback__)])
        at = f" ({frames[-1]})" if frames else ""
        raise ImplLoadError(
            f"Importing your kata failed with {type(exc).__name__}: {exc}{at}. "
            "The tests need the module to import cleanly before they can run."
        ) from None
    return module


@pytest.fixture
def kata(request):
    """A fresh copy of the implementation under test, unloaded after the test."""
    impl = request.config.getoption("--impl")
    if impl is None:
        k = catalogue.for_tests_file(Path(request.node.fspath))
        impl = k.kata_path if k else None
    if impl is None:
        raise ImplLoadError("No implementation given: pass --impl PATH.")
    module = load_fresh(Path(impl))
    yield module
    for name in [n for n in sys.modules if n == module.__name__ or n.startswith(module.__name__ + ".")]:
        del sys.modules[name]


def pytest_internalerror(excrepr, excinfo):
    _write({"event": "internalerror", "message": f"{excinfo.typename}: {excinfo.value}"})


def pytest_keyboard_interrupt(excinfo):
    _write({"event": "interrupted", "message": f"{excinfo.typename}: {excinfo.value}".rstrip(": ")})


def pytest_sessionfinish(session, exitstatus):
    session.config._loopkata_exit = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    # Every result is on disk by now. A thread of the learner's code stuck on a
    # lock (a to_thread worker, say) would keep the interpreter from exiting
    # until the budget kills it; leave at once instead.
    services.stop_all()  # a server the tests started (os._exit skips atexit)
    if os.environ.get("LOOPKATA_RESULTS_FD"):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(getattr(config, "_loopkata_exit", 0))
