"""A facilitator's re-grade runs learners' code that may do more than the kata.

Each test plays a learner whose exported kata file, once imported by the hidden tests,
tries to reach the facilitator: rewrite the checkout's hidden tests, write into their
home, read their environment. The checkout here is a copy of the project in tmp_path
(the real one is never offered to hostile code), and the facilitator's home a folder
beside it.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from loopkata.learner import progress
from loopkata.model import catalogue
from loopkata.room import regrade, sandbox

ROOT = Path(__file__).resolve().parents[1]
KATA_ID = "bound-semaphore"
SECRET = "facilitator-secret-4f1c"



# Runs when the hidden tests import the learner's kata file, before any test.
REACH_OUT = '''
import os as _os, pathlib as _pathlib
_said = []
for _try in (
    lambda: _pathlib.Path({hidden!r}).write_text("def test_anything():\\n    pass\\n"),
    lambda: _pathlib.Path({home!r}, "leak.txt").write_text(_os.environ.get("FACILITATOR_SECRET", "none")),
    lambda: _pathlib.Path({home!r}, "listing.txt").write_text("\\n".join(_os.listdir({home!r}))),
):
    try:
        _try()
        _said.append("reached")
    except OSError as _exc:
        _said.append(type(_exc).__name__)
if "FACILITATOR_SECRET" in _os.environ:
    raise SystemExit("the learner's code saw the facilitator's environment")
'''


@pytest.fixture
def checkout(tmp_path):
    """A copy of what the facilitator's checkout holds for grading, and their home beside it."""
    copy = tmp_path / "checkout"
    for part in ("katas", "solutions", "tests/hidden"):
        shutil.copytree(ROOT / part, copy / part, ignore=shutil.ignore_patterns("__pycache__"))
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.txt").write_text("the facilitator's own file\n")
    return copy, home


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(folder.rglob("*")):
        if f.is_file() and "__pycache__" not in f.parts:
            h.update(str(f.relative_to(folder)).encode() + f.read_bytes())
    return h.hexdigest()


def _record(kata, text: str, status=progress.SOLVED):
    return SimpleNamespace(files={f"katas/{kata.path}": text.encode()}, status=status)


def _hostile(kata, home: Path) -> str:
    hidden = kata.tests_path
    return REACH_OUT.format(hidden=str(hidden), home=str(home)) + kata.solution_path.read_text()


@pytest.mark.usefixtures("need_sandbox")
def test_a_learners_code_cannot_touch_the_checkout_or_the_home_in_a_regrade(checkout, monkeypatch):
    """a re-grade runs the learner's code where it cannot change the checkout, reach the home or read the environment"""
    root, home = checkout
    monkeypatch.setenv("FACILITATOR_SECRET", SECRET)
    monkeypatch.setenv("HOME", str(home))
    kata = catalogue.find(KATA_ID, root)
    before = _digest(root)

    graded = regrade.regrade_one(kata, _record(kata, _hostile(kata, home)), "mallory")

    assert _digest(root) == before, "the re-grade of mallory's file changed the facilitator's checkout"
    assert sorted(p.name for p in home.iterdir()) == ["notes.txt"], (
        f"mallory's code wrote into the facilitator's home: {sorted(p.name for p in home.iterdir())}")
    assert graded.how == regrade.GRADED and graded.passed, (
        "mallory's file is the reference fix with code that reaches out first; in the sandbox its reaching "
        f"fails quietly and the fix should pass, but the re-grade said: {graded.detail}")


@pytest.mark.usefixtures("need_sandbox")
def test_after_a_hostile_regrade_an_honest_starter_still_fails(checkout):
    """one learner's hostile file cannot make the next learner's unchanged starter pass"""
    root, home = checkout
    kata = catalogue.find(KATA_ID, root)
    regrade.regrade_one(kata, _record(kata, _hostile(kata, home)), "mallory")
    honest = regrade.regrade_one(kata, _record(kata, kata.kata_path.read_text() + "\n# my attempt\n"), "ada")
    assert honest.how == regrade.GRADED and not honest.passed, (
        f"ada's starter (with a comment added) should fail its re-grade after mallory's; it said: {honest.detail}")
    assert kata.tests_path.read_text() == (ROOT / "tests" / "hidden" / kata.tests_path.name).read_text(), \
        "the hidden tests in the checkout were rewritten"


def test_without_a_sandbox_the_regrade_still_hides_the_environment_and_says_so(checkout, monkeypatch):
    """with no sandbox the learner's code gets no variable of the facilitator's, and the re-grade says there was none"""
    root, _ = checkout
    monkeypatch.setenv("FACILITATOR_SECRET", SECRET)
    kata = catalogue.find(KATA_ID, root)
    probe = ('import os\nif "FACILITATOR_SECRET" in os.environ or os.getcwd().startswith(%r):\n'
             '    raise SystemExit("saw the facilitator")\n' % str(root)) + kata.solution_path.read_text()
    graded, jail = regrade.grade_in_jail(kata, {f"katas/{kata.path}": probe.encode()}, use_sandbox=False)
    assert not jail.sandboxed and jail.why_not, "a re-grade with the sandbox switched off should say there was none"
    assert not isinstance(graded, str) and graded.passed, (
        f"the learner's code saw the facilitator's environment or working folder: "
        f"{graded if isinstance(graded, str) else graded.problem or [t.message for t in graded.failures]}")


@pytest.mark.usefixtures("need_sandbox")
def test_the_sandbox_has_only_loopback_and_no_secret_of_etc():
    """code in the sandbox sees no /etc/shadow, no checkout, no network interface but loopback, and writes only its own in-memory home"""
    import tempfile

    readme = ROOT / "README.md"  # the checkout: only its venv may be visible
    code = (
        "import os, socket\n"
        f"seen = [p for p in ('/etc/shadow', '/etc/ssh', {str(readme)!r}) if os.path.exists(p)]\n"
        "seen += [name for _, name in socket.if_nameindex() if name != 'lo']\n"
        "try:\n    open('/grading/mine', 'w'); seen.append('lent folder writable')\nexcept OSError:\n    pass\n"
        "open(os.path.join(os.environ['HOME'], 'ok'), 'w').write('ok')\n"
        "seen += [] if open(os.path.join(os.environ['HOME'], 'ok')).read() == 'ok' else ['home not writable']\n"
        "print(seen)\n"
    )
    with tempfile.TemporaryDirectory() as tmp:
        jail = sandbox.jail(Path(tmp) / "lent", Path(tmp) / "private")
        ran = jail.run([sys.executable, "-c", code], {}, timeout=60, outputs=Path(tmp) / "out")
        assert ran.status == 0, ran.stderr.decode(errors="replace")[-1500:]
        assert ran.stdout.decode().strip() == "[]", f"the sandbox let the code see or do: {ran.stdout.decode().strip()}"
        # the home is in memory, gone with the sandbox: nothing of it is left on this machine's disk
        assert list((Path(tmp) / "private").iterdir()) == [], "the sandbox's home left files on the disk"


@pytest.mark.usefixtures("need_sandbox")
def test_room_regrade_of_a_hostile_export_leaves_the_checkout_as_it_was(checkout, tmp_path):
    """`loopkata room --regrade` of a hostile export: the checkout's hidden tests are unchanged and the next starter still fails"""
    root, home = checkout
    kata = catalogue.find(KATA_ID, root)
    hostile = _hostile(kata, home)
    starter = kata.kata_path.read_text()
    exports = tmp_path / "exports"
    exports.mkdir()
    for name, text in (("mallory", hostile), ("ada", starter + "\n# my attempt\n")):
        (exports / f"{name}.json").write_text(json.dumps({
            "format": "loopkata-progress", "version": 1, "learner": name, "exported_at": "2026-12-01T09:00:00+00:00",
            "katas": {KATA_ID: {"number": 1, "title": kata.title, "status": "solved", "checks": 1,
                                "seconds_to_solve": 60, "hints_seen": [], "solution_seen": False,
                                "last_verdict": "passed", "failing": [],
                                "files": [{"path": f"katas/{kata.path}", "text": text}]}},
        }))
    before = _digest(root)
    env = {**os.environ, "LOOPKATA_ROOT": str(root), "HOME": str(home), "FACILITATOR_SECRET": SECRET,
           "LOOPKATA_STATE": str(tmp_path / "state")}
    done = subprocess.run([sys.executable, "-m", "loopkata", "room", "--regrade", "mallory.json", "ada.json",
                           "--figure", str(tmp_path / "room.png")], cwd=exports, env=env,
                          capture_output=True, text=True, timeout=600)
    said = done.stdout + done.stderr
    assert "in a sandbox (bubblewrap)" in said, f"expected the re-grade to say it ran in a sandbox:\n{said}"
    assert _digest(root) == before, f"the re-grade changed the facilitator's checkout:\n{said}"
    # (the facilitator's own matplotlib may keep a cache there; the learner's code writes these two)
    assert not (home / "leak.txt").exists() and not (home / "listing.txt").exists(), \
        "a learner's code wrote into the facilitator's home"
    assert re.search(r"ada, 01 bound-semaphore: claimed solved, re-grade fails \d+ of \d+", said), (
        f"expected ada's unchanged starter to fail its re-grade after mallory's, got:\n{said}")


DEEP_FOLDER = '''
import os as _os
_here = _os.getcwd()
_os.chdir(_os.environ["HOME"])
if not _os.path.isdir("d"):  # each test imports the file anew: make it once
    for _ in range(1500):  # deeper than Python's recursion allows a plain rmtree to go
        _os.mkdir("d")
        _os.chdir("d")
    _os.chdir(_here)
'''


@pytest.mark.parametrize("use_sandbox", [True, False], ids=["sandbox", "no-sandbox"])
def test_a_folder_1500_levels_deep_in_the_home_neither_sinks_the_regrade_nor_stays(checkout, monkeypatch, tmp_path,
                                                                                   use_sandbox, request):
    """a learner's code that leaves a very deep folder gets its verdict, and the re-grade's throw-away folder is removed"""
    if use_sandbox:
        request.getfixturevalue("need_sandbox")
    root, _ = checkout
    kata = catalogue.find(KATA_ID, root)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(scratch))
    graded = regrade.regrade_one(kata, _record(kata, DEEP_FOLDER + kata.solution_path.read_text()), "mallory",
                                 use_sandbox=use_sandbox)
    assert graded.how == regrade.GRADED and graded.passed, f"expected the fix to pass; the re-grade said: {graded.detail}"
    assert list(scratch.iterdir()) == [], f"the re-grade left {[p.name for p in scratch.iterdir()]} behind"


@pytest.mark.usefixtures("need_sandbox")
def test_one_learner_whose_check_never_ends_holds_the_room_only_for_their_own_time(checkout, monkeypatch):
    """a learner's code that stops its grader's deadline spends that learner's time, and the next learner is graded as usual"""
    root, _ = checkout
    monkeypatch.setenv("LOOPKATA_ROOT", str(root))
    kata = catalogue.find(KATA_ID, root)
    # The supervisor that keeps the check's deadline is stopped; the code itself goes on, so not
    # every process is stopped and only the learner's own time can end it.
    stall = ('import os as _os, signal as _signal, time as _time\n'
             '_os.kill(_os.getppid(), _signal.SIGSTOP)\n'
             'while True:\n    _time.sleep(0.1)\n')
    monkeypatch.setattr(regrade, "learner_seconds", lambda katas: 8)
    records = [SimpleNamespace(source=Path(f"{name}.json"), learner=name,
                               katas={KATA_ID: _record(kata, text)})
               for name, text in (("mallory", stall), ("ada", kata.solution_path.read_text()))]
    monkeypatch.setattr(regrade, "names", lambda recs: [r.learner for r in recs])
    started = time.monotonic()
    results, _ = regrade.regrade_room(records, [kata], announce=lambda line: None)
    took = time.monotonic() - started
    mallory, ada = results
    assert "did not end within the 8 s" in mallory.detail, f"expected mallory's check to end at her 8 s; {mallory.detail}"
    assert ada.how == regrade.GRADED and ada.passed, f"expected ada's fix to pass after mallory's; {ada.detail}"
    assert took < 60, f"the room took {took:.0f} s for one stalled learner allowed 8 s and one honest one"


def test_a_regrade_that_breaks_on_one_learners_files_keeps_every_other_result(checkout, monkeypatch):
    """whatever goes wrong in one learner's re-grade is one line for that learner; the next learner is graded"""
    root, _ = checkout
    kata = catalogue.find(KATA_ID, root)
    real = regrade.regrade_one

    def breaks_for_mallory(kata, rec, learner="", *args, **kwargs):
        if learner == "mallory":
            raise OSError(36, "File name too long")
        return real(kata, rec, learner, *args, use_sandbox=False, **kwargs)

    monkeypatch.setattr(regrade, "regrade_one", breaks_for_mallory)
    monkeypatch.setattr(regrade, "names", lambda recs: [r.learner for r in recs])
    records = [SimpleNamespace(source=Path(f"{name}.json"), learner=name, katas={KATA_ID: _record(kata, text)})
               for name, text in (("mallory", "x = 1\n"), ("ada", kata.solution_path.read_text()))]
    mallory, ada = regrade.regrade_room(records, [kata], announce=lambda line: None)[0]
    assert mallory.how == regrade.NO_VERDICT and "File name too long" in mallory.detail, mallory.detail
    assert ada.how == regrade.GRADED and ada.passed, f"expected ada's fix to pass after mallory's; {ada.detail}"


@pytest.mark.usefixtures("need_sandbox")
def test_a_regrade_of_kata_14_in_the_sandbox_says_the_sandbox_allows_no_pid_namespace(checkout):
    """in the sandbox no namespace can be made, so kata 14's PID 1 test cannot run: the re-grade says why, truthfully"""
    root, _ = checkout
    kata = catalogue.find("pid1-sigterm", root)
    files = {f"katas/{kata.path}/{f.relative_to(kata.solution_path).as_posix()}": f.read_bytes()
             for f in kata.solution_path.rglob("*") if f.is_file() and "__pycache__" not in f.parts}
    graded = regrade.regrade_one(kata, SimpleNamespace(files=files, status=progress.SOLVED), "ada")
    assert graded.how == regrade.UNAVAILABLE and "re-grade's sandbox" in graded.detail, (
        f"expected the reference of kata 14 to be 'not possible' in the sandbox, because of the sandbox; "
        f"the re-grade said: {graded.how}: {graded.detail}")
