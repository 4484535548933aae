"""The tools follow the learner: hints in order, reset undone by restore, repeated stacks
shown once, a solved kata pointing at the next, watch moving on.

Every test works on a temporary copy of the project and its own state folder.
"""
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

from loopkata.grading import runner
from loopkata.learner import hints, progress
from loopkata.model import catalogue
from loopkata.grading.report import render_text
from test_state import loopkata, make_project


def test_hints_with_no_failure_recorded_start_with_the_general_one(tmp_path, monkeypatch):
    """with no failure recorded (a new or reset kata), the general hint comes first, not one about a failure not met"""
    monkeypatch.setenv("LOOPKATA_STATE", str(tmp_path / "state"))
    kata = dataclasses.replace(catalogue.find("lock-reentry"), hints=(
        catalogue.Hint(text="one", when="hang"),
        catalogue.Hint(text="two", when="hang"),
        catalogue.Hint(text="three", when="event loop"),
        catalogue.Hint(text="look at the reference"),
        catalogue.Hint(text="four", when="updates were lost"),
    ))
    shown = []
    for _ in range(5):
        _, hint = hints.next_hint(kata)  # nothing checked yet: the general one, then catalogue order
        shown.append(hint.text)
    assert shown == ["look at the reference", "one", "two", "three", "four"], shown
    assert hints.next_hint(kata) is None


def test_hints_matching_the_failure_come_first_then_the_general_then_the_others(tmp_path, monkeypatch):
    """after a failure: the hints about it, then the general one; hints about failures not met come last"""
    monkeypatch.setenv("LOOPKATA_STATE", str(tmp_path / "state"))
    kata = dataclasses.replace(catalogue.find("lock-reentry"), hints=(
        catalogue.Hint(text="about hangs", when="did not finish"),
        catalogue.Hint(text="about the loop", when="event loop thread is blocked"),
        catalogue.Hint(text="look at the reference"),
        catalogue.Hint(text="about lost updates", when="updates were lost"),
    ))
    failed = runner.CheckResult(kata=kata.id, impl="x", verdict=runner.FAILED, tests=[runner.TestResult(
        name="t", title="t", outcome=runner.FAILED, message="2 updates were lost")])
    progress.record_check(kata, failed)
    picks = [hints.next_hint(kata) for _ in range(4)]
    assert [text.text for _, text in picks] == ["about lost updates", "look at the reference", "about hangs",
                                                "about the loop"], picks
    assert [shown for shown, _ in picks] == [1, 2, 3, 4], "hints are numbered in the order the learner sees them"
    assert hints.describe(kata, picks[0]).startswith("Hint 1 of 4 "), hints.describe(kata, picks[0])


def test_restore_brings_back_what_reset_replaced(tmp_path):
    root, env = make_project(tmp_path)
    kata_file = root / "katas" / "01_bound_semaphore.py"
    mine = kata_file.read_text() + "\n# my half-finished fix\n"
    kata_file.write_text(mine)
    reset = loopkata(env, "reset", "bound-semaphore")
    assert reset.returncode == 0 and "loopkata restore bound-semaphore" in reset.stdout, reset.stdout + reset.stderr
    assert kata_file.read_text() != mine
    listed = loopkata(env, "restore", "bound-semaphore", "--list")
    assert listed.returncode == 0 and len(listed.stdout.strip().splitlines()) == 1, listed.stdout
    restored = loopkata(env, "restore", "bound-semaphore")
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert kata_file.read_text() == mine, "expected restore to bring back the version reset replaced"
    assert "backed up in" in restored.stdout, f"expected restore to back up the starter it replaced:\n{restored.stdout}"


def test_restore_with_no_backup_says_so(tmp_path):
    root, env = make_project(tmp_path)
    out = loopkata(env, "restore", "bound-semaphore")
    assert out.returncode == 1 and "no backup" in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_repeated_stacks_are_shown_once():
    kata = catalogue.find("bound-semaphore")
    stuck = "every task is waiting\n    katas/01_bound_semaphore.py:60 in execute_step: async with sem:"
    tests = [runner.TestResult(name=f"t{i}", title=f"test {i}", outcome=runner.HANG, message="it is stuck.",
                               stacks=stuck) for i in range(6)]
    text = render_text(runner.CheckResult(kata=kata.id, impl="x", verdict=runner.HANG, tests=tests), kata)
    assert text.count("async with sem:") == 1, text
    assert "stuck at the same lines in 5 more tests" in text, text


def test_hint_on_a_solved_kata_names_the_next_one(tmp_path):
    root, env = make_project(tmp_path)
    out = loopkata(env, "check", "bound-semaphore", "--impl", str(root / "solutions" / "01_bound_semaphore.py"))
    (root / "katas" / "01_bound_semaphore.py").write_bytes((root / "solutions" / "01_bound_semaphore.py").read_bytes())
    out = loopkata(env, "check", "bound-semaphore")
    assert out.returncode == 0, out.stdout
    hint = loopkata(env, "hint", "bound-semaphore")
    assert "is solved" in hint.stdout and "02 loop-id-reuse" in hint.stdout, hint.stdout


def test_watch_moves_on_to_the_next_unsolved_kata(tmp_path):
    root, env = make_project(tmp_path)
    (root / "katas" / "01_bound_semaphore.py").write_bytes((root / "solutions" / "01_bound_semaphore.py").read_bytes())
    out = loopkata(env, "watch", "--once", "--interval", "0")
    assert "bound-semaphore is solved. Next: 02 loop-id-reuse" in out.stdout, out.stdout


def test_watch_of_one_kata_names_the_next_once_it_passes(tmp_path):
    """`watch bound-semaphore` names the next kata to take once bound-semaphore passes"""
    root, env = make_project(tmp_path)
    (root / "katas" / "01_bound_semaphore.py").write_bytes((root / "solutions" / "01_bound_semaphore.py").read_bytes())
    out = loopkata(env, "watch", "bound-semaphore", "--once", "--interval", "0")
    assert "Next: 02 loop-id-reuse" in out.stdout, f"expected watch to name the next kata; it said:\n{out.stdout}"


def test_watch_with_no_kata_checks_the_kata_last_edited(tmp_path):
    """`watch` with no kata checks the kata in hand (the one last edited), not kata 01"""
    root, env = make_project(tmp_path)
    kata_file = root / "katas" / "03_leaked_loops.py"
    kata_file.write_text(kata_file.read_text() + "\n# my first try\n")
    out = loopkata(env, "watch", "--once", "--interval", "0")
    assert "leaked-loops" in out.stdout and "bound-semaphore" not in out.stdout, (
        f"expected watch to check 03 leaked-loops, the kata just edited; it said:\n{out.stdout}")
    listed = loopkata(env, "progress", "--json")
    statuses = json.loads(listed.stdout)["katas"]
    assert (statuses["bound-semaphore"], statuses["leaked-loops"]) == ("untouched", "attempted"), (
        f"expected watch to record a check of 03 only, the progress says {statuses}")


def test_hint_reset_and_solution_with_no_kata_take_the_kata_in_hand(tmp_path):
    """`hint`, `reset` and `solution` with no kata name the kata in hand, as `check` and `watch` do"""
    root, env = make_project(tmp_path)
    loopkata(env, "check", "leaked-loops")
    for args in (["hint"], ["solution"], ["reset"]):
        out = loopkata(env, *args)
        assert "usage:" not in out.stderr and "leaked-loops" in out.stdout, (
            f"expected `loopkata {' '.join(args)}` to take leaked-loops, the kata last checked; got "
            f"exit {out.returncode}:\n{out.stdout}{out.stderr}")


def test_reset_of_an_untouched_kata_says_it_is_already_the_starter(tmp_path):
    """`reset` of a kata still as shipped restores nothing and backs up nothing, and says so"""
    root, env = make_project(tmp_path)
    out = loopkata(env, "reset", "bound-semaphore")
    assert out.returncode == 0 and "already the starter" in out.stdout and "backed up in" not in out.stdout, (
        out.stdout + out.stderr)


def test_reset_names_the_backup_from_the_project_folder(tmp_path):
    """`reset` prints where the backup is as a path from the project folder, wherever it is run from"""
    root, env = make_project(tmp_path)
    kata_file = root / "katas" / "01_bound_semaphore.py"
    kata_file.write_text(kata_file.read_text() + "\n# mine\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = loopkata(env, "reset", "bound-semaphore", cwd=elsewhere)
    said = [line for line in out.stdout.splitlines() if "backed up in" in line]
    assert said and ".." not in said[0], f"expected a backup path with no '..' in it, got:\n{out.stdout}"
    shown = said[0].split("backed up in", 1)[1].strip()
    assert (root / shown).exists() or Path(shown).is_absolute() and Path(shown).exists(), (
        f"the backup path {shown!r} names nothing from the project folder {root}")


def test_loopkata_with_no_command_greets_and_lists_the_katas(tmp_path):
    """`loopkata` alone greets and shows the katas, like rustlings, instead of a usage error"""
    root, env = make_project(tmp_path)
    out = loopkata(env)
    assert out.returncode == 0 and "Loop Katas" in out.stdout and "bound-semaphore" in out.stdout, (
        f"exit {out.returncode}:\n{out.stdout}{out.stderr}")


def test_output_piped_to_a_reader_that_stops_ends_quietly(tmp_path):
    """`loopkata list | head -1`: once the reader has gone, loopkata stops without a traceback"""
    root, env = make_project(tmp_path)
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line is written: every write fails with EPIPE
    try:
        out = subprocess.run([sys.executable, "-m", "loopkata", "list"], stdout=write, stderr=subprocess.PIPE,
                             text=True, env=env, timeout=60)
    finally:
        os.close(write)
    assert "Traceback" not in out.stderr and out.stderr.strip() == "", (
        f"expected nothing on stderr once the pipe's reader had gone, got (exit {out.returncode}):\n{out.stderr}")
    assert out.returncode == 141, f"expected exit status 141 (128 + SIGPIPE), as a shell reports it, got {out.returncode}"
