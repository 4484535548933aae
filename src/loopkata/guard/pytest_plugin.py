"""`pytest -p loopkata.guard`: the guard in a team's own test suite.

Every finding fails the test it happened in (`mode = "warn"` reports it and
fails nothing); a finding that can be judged only once the test is over (a
loop it left alive, a queue nobody consumed) fails its teardown. Settings come
from `[tool.loopkata.guard]` in pyproject.toml, then from the command line.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from . import child, report
from .config import ConfigError, apply, as_table, from_pyproject
from .core import Guard

KEY = pytest.StashKey[Guard]()


def pytest_addoption(parser):
    group = parser.getgroup("loopkata-guard", "loopkata guard (asyncio bugs caught at run time)")
    group.addoption("--loopkata-guard", dest="loopkata_guard_mode", choices=("fail", "warn"), default=None,
                    help="fail: a finding fails its test (the default); warn: findings are reported only")
    group.addoption("--loopkata-guard-select", default=None, help="codes or names to report, comma-separated")
    group.addoption("--loopkata-guard-ignore", default=None, help="codes or names not to report, comma-separated")
    group.addoption("--loopkata-guard-block-ms", default=None, help="LG04: how long one callback may hold the loop")
    group.addoption("--loopkata-guard-report", default=None, help="write every finding to this JSON file")


def pytest_configure(config):
    try:
        settings = from_pyproject(Path(config.rootpath))
        settings = apply(settings, {
            "mode": config.getoption("loopkata_guard_mode"),
            "select": config.getoption("loopkata_guard_select"),
            "ignore": config.getoption("loopkata_guard_ignore"),
            "block-threshold-ms": config.getoption("loopkata_guard_block_ms"),
            "report": config.getoption("loopkata_guard_report"),
        }, "the command line")
    except ConfigError as exc:
        raise pytest.UsageError(f"loopkata guard: {exc}") from None
    share = Path(tempfile.mkdtemp(prefix="loopkata-guard-"))
    guard = Guard(settings, share)
    guard.install()
    config.stash[KEY] = guard
    config._loopkata_guard_env = {k: os.environ.get(k) for k in (child.ENV, "PYTHONPATH")}
    os.environ.update(child.environment(as_table(settings), share, dict(os.environ)))
    config.addinivalue_line("markers", "loopkata_guard_ignore(*codes): findings of these kinds do not count here")
    config._loopkata_guard_tests = 0


def pytest_unconfigure(config):
    guard = config.stash.get(KEY, None)
    if guard is None:
        return
    guard.uninstall()
    for k, v in config._loopkata_guard_env.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    shutil.rmtree(guard.share, ignore_errors=True)
    if guard.settings.report:
        report.write_json(Path(config.invocation_params.dir, guard.settings.report), guard.collector.everything,
                          guard.settings.source, config._loopkata_guard_tests)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    guard = item.config.stash.get(KEY, None)
    if guard is not None:
        guard.begin(item.nodeid)
        item.config._loopkata_guard_tests += 1
    yield


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_fixture_setup(fixturedef, request):
    """A loop made by a fixture wider than one test belongs to no single test: LG02 does not charge it."""
    guard = request.config.stash.get(KEY, None)
    wide = guard is not None and fixturedef.scope != "function"
    if wide:
        guard.loops.charging = False
    try:
        yield
    finally:
        if wide:
            guard.loops.charging = True


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_teardown(item, nextitem):
    yield
    guard = item.config.stash.get(KEY, None)
    if guard is not None:
        guard.end_of_test(item.nodeid)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    guard = item.config.stash.get(KEY, None)
    if guard is None or call.when == "setup":
        return
    rep = outcome.get_result()
    ignored = {c for m in item.iter_markers("loopkata_guard_ignore") for c in m.args}
    found = [f for f in guard.take() if f.code not in ignored and f.kind.name not in ignored]
    if not found:
        return
    text = "\n\n".join(report.text(f) for f in found)
    if guard.settings.mode == "warn":
        return  # listed at the end of the run, not as pytest warnings: a suite's `filterwarnings = error`
        # would turn each into an exception inside pytest's own reporting
    rep.sections.append(("loopkata guard", text))
    if rep.passed:
        rep.outcome = "failed"
        rep.longrepr = f"loopkata guard found {report.summary(found)}:\n\n{text}"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    guard = config.stash.get(KEY, None)
    if guard is None:
        return
    found = [f for f in guard.collector.everything if not guard.settings.excluded(f.where)]
    if guard.settings.mode == "warn" and found:
        terminalreporter.write_sep("=", "loopkata guard findings (warn mode: no test failed for them)")
        for f in found:
            terminalreporter.write_line(f"{f.test or 'between tests'}")
            terminalreporter.write_line("    " + report.text(f).replace("\n", "\n    "))
    terminalreporter.write_sep("-", f"loopkata guard: {report.summary(found)}")
    for error in guard.collector.errors:
        terminalreporter.write_line(f"loopkata guard: could not describe a finding ({error}); please report it")
    if guard.settings.report:
        terminalreporter.write_line(f"loopkata guard: every finding is in {guard.settings.report}")

