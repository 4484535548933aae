"""The grader itself: verdicts, paragraphs instead of tracebacks, progress, reset, hints, panel.

Synthetic katas live in a temporary project so these tests never touch the
real katas/ or the learner's progress.
"""
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from loopkata import services
from loopkata.grading import runner
from loopkata.learner import hints, progress
from loopkata.model import catalogue
from loopkata.grading.report import render_text

ROOT = Path(__file__).resolve().parents[1]

HIDDEN = '''
from loopkata.testing import run_bounded

def test_scenario(kata):
    """the scenario finishes"""
    assert run_bounded(kata.scenario, what="the scenario") == "done", "expected the scenario to return 'done'"
'''


def synthetic_kata(tmp_path, source, budget=5.0, hang_after=0.5):
    """A one-test kata in a temporary folder; returns (kata, path to the implementation)."""
    (tmp_path / "tests" / "hidden").mkdir(parents=True)
    (tmp_path / "tests" / "hidden" / "test_synthetic.py").write_text(HIDDEN)
    impl = tmp_path / "impl.py"
    impl.write_text(textwrap.dedent(source))
    base = catalogue.find("bound-semaphore")
    kata = dataclasses.replace(
        base, root=tmp_path, tests="hidden/test_synthetic.py", budget_seconds=budget, hang_after=hang_after
    )
    return kata, impl


def test_asyncio_deadlock_is_a_hang_with_the_stuck_line(tmp_path):
    kata, impl = synthetic_kata(tmp_path, '''
        import asyncio

        async def main():
            never = asyncio.Event()
            await never.wait()  # nobody sets it

        def scenario():
            return asyncio.run(main())
    ''')
    started = time.monotonic()
    result = runner.check(kata, impl)
    took = time.monotonic() - started
    assert result.verdict == runner.HANG, render_text(result, kata)
    [test] = result.tests
    assert "await never.wait()" in test.stacks, f"expected the stuck line in the stacks, got:\n{test.stacks}"
    assert took < kata.budget_seconds, f"a hang inside the loop is caught by the guard, not the budget ({took:.1f} s)"


SELF_DEADLOCK = '''
        import threading
        lock = threading.Lock()

        def scenario():
            with lock:
                with lock:  # not reentrant
                    return "done"
    '''  # a thread that waits for a lock it holds


def test_thread_deadlock_is_a_hang_with_the_stuck_line(tmp_path):
    kata, impl = synthetic_kata(tmp_path, SELF_DEADLOCK)
    result = runner.check(kata, impl)
    assert result.verdict == runner.HANG, render_text(result, kata)
    assert "with lock:  # not reentrant" in result.tests[0].stacks, result.tests[0].stacks


def test_a_process_stuck_past_its_budget_is_killed_and_called_a_hang(tmp_path):
    kata, impl = synthetic_kata(tmp_path, '''
        import time
        while True:  # stuck at import: no guard can catch this, the budget must
            time.sleep(0.05)
    ''', budget=2.0)
    started = time.monotonic()
    result = runner.check(kata, impl)
    took = time.monotonic() - started
    assert result.verdict == runner.HANG, render_text(result, kata)
    budget = kata.budget_seconds + result.waited_for_cpu  # moved back by what a busy machine kept it waiting
    assert took < budget + 1.5, f"expected the kill soon after the {budget:g} s budget, took {took:.1f} s"
    assert "budget" in result.tests[0].message
    assert "time.sleep(0.05)" in result.tests[0].stacks, result.tests[0].stacks


def test_a_crash_is_reported_not_raised(tmp_path):
    kata, impl = synthetic_kata(tmp_path, '''
        import os

        def scenario():
            os.abort()
    ''')
    result = runner.check(kata, impl)
    assert result.verdict == runner.ERROR, render_text(result, kata)
    assert "crashed (signal 6, SIGABRT) while running 'the scenario finishes'" in render_text(result, kata)


def test_a_syntax_error_is_one_paragraph(tmp_path):
    kata, impl = synthetic_kata(tmp_path, '''
        def scenario(:
            return "done"
    ''')
    result = runner.check(kata, impl)
    text = render_text(result, kata)
    assert result.verdict == runner.ERROR
    assert "syntax error on line 2" in text and "Traceback" not in text, text


def test_an_import_error_is_one_paragraph(tmp_path):
    kata, impl = synthetic_kata(tmp_path, '''
        import asyncioo

        def scenario():
            return "done"
    ''')
    result = runner.check(kata, impl)
    text = render_text(result, kata)
    assert result.verdict == runner.ERROR
    assert "No module named 'asyncioo'" in text and "Traceback" not in text, text


def test_a_passing_scenario_passes(tmp_path):
    kata, impl = synthetic_kata(tmp_path, '''
        def scenario():
            return "done"
    ''')
    result = runner.check(kata, impl)
    assert result.passed, render_text(result, kata)
    assert result.tests[0].title == "the scenario finishes"


def test_a_failed_expectation_says_expected_and_got(tmp_path):
    kata, impl = synthetic_kata(tmp_path, '''
        def scenario():
            return "half done"
    ''')
    result = runner.check(kata, impl)
    assert result.verdict == runner.FAILED
    assert result.tests[0].message == "expected the scenario to return 'done'"


THREE_TESTS = '''
def test_first(kata):
    """the first test passes"""

def test_second(kata):
    """the second test fails"""
    assert kata.answer() == 42, f"expected 42, got {kata.answer()}"

def test_third(kata):
    """the third test would fail too"""
    assert kata.answer() == 42
'''


def test_a_proof_that_a_fix_is_wrong_stops_at_its_first_failure(tmp_path):
    kata, impl = synthetic_kata(tmp_path, """
        def answer():
            return 41
    """)
    (tmp_path / "tests" / "hidden" / "test_synthetic.py").write_text(THREE_TESTS)
    whole = runner.check(kata, impl)
    assert [t.outcome for t in whole.tests] == [runner.PASSED, runner.FAILED, runner.FAILED], render_text(whole, kata)
    enough = runner.check(kata, impl, until_failed=True)
    assert enough.verdict == runner.FAILED, render_text(enough, kata)
    assert [t.outcome for t in enough.tests] == [runner.PASSED, runner.FAILED, runner.NOT_RUN], render_text(enough, kata)
    assert "stopped at its first failure ('the second test fails' failed)" in enough.tests[2].message, enough.tests[2].message
    assert not enough.problem, enough.problem


def test_a_message_names_the_projects_own_files_from_the_project(tmp_path):
    """a message quoting a file of the project (a hidden test's scenario) names it from the project, not this machine"""
    kata, impl = synthetic_kata(tmp_path, '''
        def scenario():
            return "done"
    ''')
    (tmp_path / "tests" / "hidden" / "test_synthetic.py").write_text(
        'def test_scenario(kata):\n    """names its own file"""\n    assert False, f"stuck at {__file__}:3"\n')
    [test] = runner.check(kata, impl).tests
    assert "stuck at tests/hidden/test_synthetic.py:3" in test.message and str(tmp_path) not in test.message, (
        f"expected the file named from the project, got: {test.message}")


def test_missing_services_are_one_paragraph():
    assert services.problem([]) == ""
    assert "does not know" in services.problem(["no-such-service"])
    services.SERVICES["needs-missing-module"] = (("no_such_module_xyz",), "It needs that module.")
    try:
        text = services.problem(["needs-missing-module"])
    finally:
        del services.SERVICES["needs-missing-module"]
    assert "no_such_module_xyz, which is not installed" in text and "make lab" in text


# --- the CLI, on a temporary copy of the project -------------------------------

@pytest.fixture
def project(tmp_path):
    """A copy of the project's katas and tests in a git repository of its own."""
    for part in ("katas", "solutions", "tests/hidden"):
        shutil.copytree(ROOT / part, tmp_path / part)
    env = {**os.environ, "LOOPKATA_ROOT": str(tmp_path), "LOOPKATA_STATE": str(tmp_path / ".loopkata"),
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run(["git", "commit", "-qm", "starters"], cwd=tmp_path, check=True, env=env)
    return tmp_path, env


def loopkata(env, *args, cwd=None):
    return subprocess.run([sys.executable, "-m", "loopkata", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=60)


def test_cli_unknown_kata_is_one_sentence(project):
    root, env = project
    out = loopkata(env, "check", "bound-semaphor")
    assert out.returncode == 2
    assert "Did you mean 'bound-semaphore'?" in out.stderr and "Traceback" not in out.stderr + out.stdout


def test_cli_reset_backs_up_then_restores(project):
    root, env = project
    kata_file = root / "katas" / "01_bound_semaphore.py"
    starter = kata_file.read_text()
    kata_file.write_text(starter + "\n# my work in progress\n")
    out = loopkata(env, "reset", "01", cwd=root)
    assert out.returncode == 0, out.stderr
    assert kata_file.read_text() == starter, "expected the starter back"
    backup_line = [l for l in out.stdout.splitlines() if "backed up in" in l]
    assert backup_line, out.stdout
    backup = root / backup_line[0].split("backed up in ")[1].strip()
    assert (backup / "01_bound_semaphore.py").read_text().endswith("# my work in progress\n")


def test_cli_status_hint_and_solution_follow_the_learner(project):
    root, env = project
    assert "untouched" in loopkata(env, "list").stdout
    out = loopkata(env, "check", "bound-semaphore", "--json")
    assert out.returncode == 1
    assert json.loads(out.stdout)["verdict"] == "hang"
    # The first hint offered matches the failure the learner saw.
    hint = loopkata(env, "hint", "bound-semaphore").stdout
    kata = catalogue.find("bound-semaphore")
    first_keyed = next(i for i, h in enumerate(kata.hints) if h.when == "bound to a different event loop")
    assert hint.startswith("Hint 1 of") and kata.hints[first_keyed].text in hint, hint
    assert loopkata(env, "solution", "1").returncode == 1, "the reference fix stays hidden until solved"
    shutil.copy(root / "solutions" / "01_bound_semaphore.py", root / "katas" / "01_bound_semaphore.py")
    assert loopkata(env, "check", "1").returncode == 0
    assert "1 solved" in loopkata(env, "progress").stdout
    assert "weakref.ref(loop)" in loopkata(env, "solution", "1").stdout


def test_cli_watch_rechecks_on_save(project):
    root, env = project
    kata_file = root / "katas" / "01_bound_semaphore.py"
    child = subprocess.Popen([sys.executable, "-m", "loopkata", "watch", "1", "--once", "--interval", "0.2"],
                             stdout=subprocess.PIPE, text=True, env=env, cwd=root)
    assert "Watching" in child.stdout.readline()
    shutil.copy(root / "solutions" / "01_bound_semaphore.py", kata_file)
    out, _ = child.communicate(timeout=60)
    assert "changed" in out and "solved, all" in out, out


def test_hints_prefer_those_keyed_to_the_failure(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOPKATA_STATE", str(tmp_path))
    kata = catalogue.find("bound-semaphore")
    progress.update(kata, hints_seen=[], last_failure=(
        "hang: invocation 1 did not finish: it is stuck.\n"
        "every task is waiting, and none can wake another: a deadlock between tasks"))
    shown, hint = hints.next_hint(kata)
    assert "deadlock between tasks" in hint.when, f"expected the hint keyed to a deadlock first, got {hint.text!r}"
    given = [hint]
    while (choice := hints.next_hint(kata)) is not None:
        shown, hint = choice
        given.append(hint)
    assert len(given) == len(set(map(id, given))) == len(kata.hints) == shown, "every hint is offered once, then none"


def test_panel_text_is_the_report_and_is_not_cut():
    pytest.importorskip("ipywidgets")
    from loopkata.panel import CheckPanel

    kata = catalogue.find("bound-semaphore")
    tests = [runner.TestResult(name="t1", title="a long title " * 12, outcome="failed",
                               message="RuntimeError: something", where="katas/x.py:1 in f: pass")]
    result = runner.CheckResult(kata=kata.id, impl="katas/x.py", verdict="failed", tests=tests)
    panel = CheckPanel(kata, result)
    bundle = panel._repr_mimebundle_()
    assert bundle["text/plain"] == render_text(result, kata, stacks=False)
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_question_button_shows_its_whole_label():
    """"Check my answer" is not cut to the widget's default width"""
    pytest.importorskip("ipywidgets")
    import ipywidgets as widgets

    from loopkata.learner import questions
    from loopkata.panel import Question

    question = Question(next(iter(questions.load().values())))
    buttons = [w for w in question.children if isinstance(w, widgets.Button)]
    assert [b.description for b in buttons] == ["Check my answer"]
    assert buttons[0].layout.width in ("auto", "max-content"), buttons[0].layout.width


def _failing_panel():
    from loopkata.panel import CheckPanel

    kata = catalogue.find("bound-semaphore")
    tests = [runner.TestResult(name="t1", title="a title", outcome="failed",
                               message="aiohttp.client_exceptions.ServerDisconnectedError: Server disconnected",
                               where="katas/x.py:1 in f: pass")]
    return CheckPanel(kata, runner.CheckResult(kata=kata.id, impl="katas/x.py", verdict="failed", tests=tests))


def test_panel_says_hint_once(tmp_path, monkeypatch):
    """the hint reads "Hint 1 of N for <kata>: ...", not "Hint: Hint 1 of N ..." """
    pytest.importorskip("ipywidgets")
    monkeypatch.setenv("LOOPKATA_STATE", str(tmp_path))
    panel = _failing_panel()
    panel._show_hint()
    shown = html_text(panel.hint_area.value)
    assert shown.startswith("Hint 1 of ") and shown.count("Hint") == 1, shown


def html_text(fragment: str) -> str:
    """The text of an HTML fragment, tags dropped and entities read."""
    import html
    import re

    return html.unescape(re.sub(r"<[^>]+>", "", fragment)).strip()


def test_panel_details_wrap_between_words():
    """a detail line wraps between words (JupyterLab's <pre> breaks anywhere: "ServerDis" / "connectedError")"""
    pytest.importorskip("ipywidgets")
    import re

    page = _failing_panel()._repr_mimebundle_()["text/html"]
    styles = re.findall(r"<pre style='([^']*)'", page)
    assert styles, page
    for style in styles:
        assert "word-break:normal" in style and "overflow-wrap:anywhere" in style, style


def test_progress_table_links_open_the_notebook_in_jupyterlab(tmp_path, monkeypatch):
    """the start page's links look like links, and a click opens the notebook in JupyterLab (its command
    linker) instead of reloading the page; the static rendering keeps the plain href"""
    pytest.importorskip("ipywidgets")
    import html.parser

    from loopkata.panel import progress_table

    class Links(html.parser.HTMLParser):
        def __init__(self, text):
            super().__init__()
            self.found = []
            self.feed(text)

        def handle_starttag(self, tag, attrs):
            if tag == "a":
                self.found.append(dict(attrs))

    monkeypatch.setenv("LOOPKATA_STATE", str(tmp_path))
    katas = catalogue.load()
    project = katas[0].root.resolve()
    # The lab that started this "kernel" serves the folder above the project, as a hub serves the home folder.
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    (tmp_path / "runtime").mkdir()
    (tmp_path / "runtime" / f"jpserver-{os.getppid()}.json").write_text(json.dumps({"root_dir": str(project.parent)}))
    box = progress_table()
    live = Links(box.children[0].value).found
    static = Links(box._repr_mimebundle_()["text/html"]).found
    assert [a["href"] for a in live] == [a["href"] for a in static] == [k.notebook for k in katas]
    for a, kata in zip(live, katas):
        assert a.get("data-commandlinker-command") == "docmanager:open", a
        assert json.loads(a["data-commandlinker-args"]) == {"path": f"{project.name}/notebooks/{kata.notebook}"}, (
            f"expected the path from the lab's root, {project.parent}, got {a}")
    # Where no lab started the kernel (nbval, a console), the links keep their href only.
    (tmp_path / "runtime" / f"jpserver-{os.getppid()}.json").unlink()
    assert not any("data-commandlinker-command" in a for a in Links(progress_table().children[0].value).found)
    for a in live + static:
        assert "color:var(--jp-content-link-color" in a.get("style", "").replace(" ", ""), a
    assert not any("data-commandlinker-command" in a for a in static)
