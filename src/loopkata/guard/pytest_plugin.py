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
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from . import child, report
from .config import ConfigError, Settings, apply, as_table, from_pyproject
from .core import Guard
from .findings import Finding

KEY = pytest.StashKey[Guard]()
RUN = pytest.StashKey["Run"]()


@dataclass
class Run:
    """What the whole session found: this process's guard's findings, and in pytest-xdist's controller,
    which runs no test itself, what each worker sent when it finished."""
    settings: Settings
    role: str  # see _role
    report: Path | None
    guard: Guard | None = None
    tests: int = 0
    received: list[Finding] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)  # xdist workers that died before sending their findings
    report_error: str = ""  # why the report could not be written, said in the summary
    reported: int = -1  # how many findings the report on disk holds

    def everything(self) -> list[Finding]:
        return (self.guard.collector.everything if self.guard else []) + self.received

    def all_errors(self) -> list[str]:
        return (self.guard.collector.errors if self.guard else []) + self.errors

    def save(self, complete: bool) -> None:
        """Write the report if it is wanted and something changed; a failure is kept for the summary."""
        found = self.everything()
        if self.report is None or (not complete and len(found) == self.reported):
            return
        try:
            report.write_json(self.report, found, self.settings.source, self.tests, complete)
            self.reported = len(found)
        except report.ReportError as exc:
            self.report_error = str(exc)


def _role(config) -> str:
    """"worker" in a pytest-xdist worker, "controller" in the process that hands tests to workers, else "alone"."""
    if hasattr(config, "workerinput"):
        return "worker"
    if config.getoption("dist", "no") != "no" and config.getoption("tx", None):
        return "controller"
    return "alone"


def pytest_addoption(parser):
    group = parser.getgroup("loopkata-guard", "loopkata guard (asyncio bugs caught at run time)")
    group.addoption("--loopkata-guard", dest="loopkata_guard_mode", choices=("fail", "warn"), default=None,
                    help="fail: a finding fails its test (the default); warn: findings are reported only")
    group.addoption("--loopkata-guard-select", default=None, help="codes or names to report, comma-separated")
    group.addoption("--loopkata-guard-ignore", default=None, help="codes or names not to report, comma-separated")
    group.addoption("--loopkata-guard-block-ms", default=None, help="LG04: how long one callback may hold the loop")
    group.addoption("--loopkata-guard-report", default=None, help="write every finding to this JSON file")


def pytest_configure(config):
    role = _role(config)
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
    path = Path(config.invocation_params.dir, settings.report) if settings.report and role != "worker" else None
    run = Run(settings, role, path)
    run.save(complete=False)  # a path that cannot be written is said now, not after the suite
    if run.report_error:
        raise pytest.UsageError(f"loopkata guard: {run.report_error}")
    config.addinivalue_line("markers", "loopkata_guard_ignore(*codes): findings of these kinds do not count here")
    config.stash[RUN] = run
    if role == "controller":
        return  # the workers load this plugin and guard the tests; they send their findings here
    share = Path(tempfile.mkdtemp(prefix="loopkata-guard-"))
    run.guard = Guard(settings, share)
    run.guard.install()
    config.stash[KEY] = run.guard
    config._loopkata_guard_env = {k: os.environ.get(k) for k in (child.ENV, "PYTHONPATH")}
    os.environ.update(child.environment(as_table(settings), share, dict(os.environ)))


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


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """pytest-xdist's controller: a worker finished (or died) and sent what its guard found."""
    run = node.config.stash.get(RUN, None)
    if run is None:
        return
    sent = getattr(node, "workeroutput", {}).get("loopkata_guard")
    if sent is None:
        name = getattr(getattr(node, "gateway", None), "id", "?")
        run.lost.append(f"pytest-xdist worker {name} ended without sending what it found ({error or 'no reason given'})")
        return
    run.tests += sent["tests"]
    run.received += [Finding.from_dict(d) for d in sent["findings"]]
    run.errors += sent["errors"]
    run.save(complete=False)


def pytest_sessionfinish(session, exitstatus):
    run = session.config.stash.get(RUN, None)
    if run is None:
        return
    if run.role == "worker":
        session.config.workeroutput["loopkata_guard"] = {
            "tests": run.tests, "findings": [f.as_dict() for f in run.everything()], "errors": run.all_errors()}
        return
    run.save(complete=True)
    if run.report_error and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.USAGE_ERROR


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    guard = item.config.stash.get(KEY, None)
    if guard is not None:
        guard.begin(item.nodeid)
        item.config.stash[RUN].tests += 1
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
        item.config.stash[RUN].save(complete=False)  # findings so far survive a suite that crashes later


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
    run = config.stash.get(RUN, None)
    if run is None or run.role == "worker":
        return
    found = [f for f in run.everything() if not run.settings.excluded(f.where)]
    if run.settings.mode == "warn" and found:
        terminalreporter.write_sep("=", "loopkata guard findings (warn mode: no test failed for them)")
        for f in found:
            terminalreporter.write_line(f"{f.test or 'between tests'}")
            terminalreporter.write_line("    " + report.text(f).replace("\n", "\n    "))
    terminalreporter.write_sep("-", f"loopkata guard: {report.summary(found)}")
    for error in run.all_errors():
        terminalreporter.write_line(f"loopkata guard: could not describe a finding ({error}); please report it")
    for line in run.lost:
        terminalreporter.write_line(f"loopkata guard: {line}")
    if run.report_error:
        terminalreporter.write_line(f"loopkata guard: {run.report_error}")
    elif run.report:
        terminalreporter.write_line(f"loopkata guard: every finding is in {run.settings.report}")
