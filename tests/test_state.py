"""The learner's state: progress survives concurrent commands, corrupt files and
read-only folders, and `reset` always restores the starter as shipped.

Every test works on a temporary state folder (and, when it touches katas, on a
temporary copy of the project), so the learner's own files are never touched.
"""
import json
import os
import shutil
import subprocess
import sys
import threading
import tomllib
from pathlib import Path

import pytest

from loopkata.learner import progress
from loopkata.authoring import starter_manifest
from loopkata.model import catalogue, starters

ROOT = Path(__file__).resolve().parents[1]
KATA_1 = Path("katas/01_bound_semaphore.py")
KATA_5 = Path("katas/05_lock_reentry")


def make_project(tmp_path, git=True):
    """A copy of the project's katas, solutions and hidden tests; with git, committed as shipped."""
    root = tmp_path / "project"
    for part in ("katas", "solutions", "tests/hidden"):
        shutil.copytree(ROOT / part, root / part, ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "LOOPKATA_ROOT": str(root), "LOOPKATA_STATE": str(root / ".loopkata"),
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    if git:
        subprocess.run(["git", "init", "-q"], cwd=root, check=True, timeout=30)
        subprocess.run(["git", "add", "-A"], cwd=root, check=True, timeout=30)
        subprocess.run(["git", "commit", "-qm", "starters"], cwd=root, check=True, env=env, timeout=30)
    else:
        env["GIT_DIR"] = str(tmp_path / "no-git-here")  # any git found on PATH sees no repository
    return root, env


def loopkata(env, *args, cwd=None):
    return subprocess.run([sys.executable, "-m", "loopkata", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=60)


def unwritable_state(tmp_path) -> Path:
    """A state folder that cannot be created: its parent is a regular file (chmod does not stop root)."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the state folder's parent should be\n")
    return blocker / "state"


def stderr_lines(out) -> list[str]:
    return [line for line in out.stderr.splitlines() if line.strip()]


class Passed:
    """Just enough of a CheckResult for progress.record_check."""
    passed, verdict = True, "passed"

    def failure_text(self):
        return ""


# --- 1. concurrent commands ------------------------------------------------------

def test_thirty_hint_commands_at_once_record_every_hint_and_show_none_twice(tmp_path, monkeypatch):
    """thirty `loopkata hint` at once: each hint is shown once and all of them are recorded"""
    env = {**os.environ, "LOOPKATA_STATE": str(tmp_path)}
    kata = catalogue.find("bound-semaphore")
    children = [subprocess.Popen([sys.executable, "-m", "loopkata", "hint", kata.id], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(30)]
    try:
        outputs = [child.communicate(timeout=60) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    errors = [err for _, err in outputs if err.strip()]
    assert not errors, f"expected no errors, got {len(errors)}, the first:\n{errors[0]}"
    shown = sorted(out.split(":")[0] for out, _ in outputs if out.startswith("Hint "))
    expected = sorted(f"Hint {i} of {len(kata.hints)} for {kata.id}" for i in range(1, len(kata.hints) + 1))
    assert shown == expected, f"expected each of the {len(kata.hints)} hints shown exactly once, got {shown}"
    monkeypatch.setenv("LOOPKATA_STATE", str(tmp_path))
    seen = progress.entry(kata).get("hints_seen")
    assert seen == list(range(len(kata.hints))), f"expected every hint recorded as seen, got {seen}"
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert not leftovers, f"expected no temporary files left behind, got {leftovers}"


def test_updates_from_many_threads_are_all_kept(tmp_path, monkeypatch):
    """progress updates from thirty threads at once: none is lost"""
    monkeypatch.setenv("LOOPKATA_STATE", str(tmp_path))
    kata = catalogue.find("bound-semaphore")
    threads = [threading.Thread(target=progress.update, args=(kata,), kwargs={f"field_{i}": i}) for i in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads), "expected every update to finish within 30 s"
    missing = [i for i in range(30) if progress.entry(kata).get(f"field_{i}") != i]
    assert not missing, f"expected all 30 updates kept, lost {len(missing)}: {missing}"


# --- 2. corrupt progress files ------------------------------------------------------

NESTED_100000_DEEP = b"[" * 100_000 + b"]" * 100_000  # far deeper than the interpreter's stack
CORRUPT = {
    "truncated JSON": b'{"bound-semaphore": {"status": "solved", "last_ver',
    "an entry that is not an object": b'{"bound-semaphore": "solved"}',
    "a list instead of an object": b"[1, 2]",
    "JSON nested 100,000 deep": NESTED_100000_DEEP,
    # JSON can read it, but nothing about progress is 500 deep (and writing it back would recurse)
    "a field nested 500 deep": b'{"bound-semaphore": {"notes": ' + b"[" * 500 + b"]" * 500 + b"}}",
}


def check_kept_aside(state: Path, original: bytes, err_lines: list[str]) -> None:
    kept = sorted(state.glob("progress.json.corrupt-*"))
    assert len(kept) == 1, f"expected the corrupt file kept once as progress.json.corrupt-<time>, found {kept}"
    assert kept[0].read_bytes() == original, "expected the corrupt file kept byte for byte"
    assert len(err_lines) == 1, f"expected one line on stderr, got {err_lines}"
    assert kept[0].name in err_lines[0] and "afresh" in err_lines[0], \
        f"expected the line to say where the file went and that progress starts afresh, got {err_lines[0]!r}"


@pytest.mark.parametrize("content", CORRUPT.values(), ids=CORRUPT.keys())
def test_loopkata_progress_keeps_a_corrupt_progress_file_and_carries_on(tmp_path, content):
    """`loopkata progress` on a corrupt progress file: the file is kept aside, one line says so"""
    (tmp_path / "progress.json").write_bytes(content)
    out = loopkata({**os.environ, "LOOPKATA_STATE": str(tmp_path)}, "progress")
    assert out.returncode == 0 and "Traceback" not in out.stderr, f"expected exit 0, got {out.returncode}:\n{out.stderr}"
    assert "solved" in out.stdout, f"expected the progress table, got:\n{out.stdout}"
    check_kept_aside(tmp_path, content, stderr_lines(out))


@pytest.mark.parametrize("content", CORRUPT.values(), ids=CORRUPT.keys())
def test_recording_a_check_keeps_a_corrupt_progress_file_and_records_the_check(tmp_path, monkeypatch, capsys, content):
    """a check recorded over a corrupt progress file: the file is kept aside, the check is recorded"""
    monkeypatch.setenv("LOOPKATA_STATE", str(tmp_path))
    (tmp_path / "progress.json").write_bytes(content)
    kata = catalogue.find("bound-semaphore")
    progress.record_check(kata, Passed())
    assert progress.entry(kata).get("status") == "solved", f"expected 'solved' recorded, got {progress.entry(kata)}"
    check_kept_aside(tmp_path, content, [l for l in capsys.readouterr().err.splitlines() if l.strip()])


def test_two_corrupt_files_in_the_same_second_are_both_kept(tmp_path, monkeypatch, capsys):
    """two corrupt progress files moved aside in quick succession get names of their own"""
    monkeypatch.setenv("LOOPKATA_STATE", str(tmp_path))
    kata = catalogue.find("bound-semaphore")
    for content in (b"[1]", b"[2]"):
        (tmp_path / "progress.json").write_bytes(content)
        progress.record_check(kata, Passed())
    kept = {p.read_bytes() for p in tmp_path.glob("progress.json.corrupt-*")}
    assert kept == {b"[1]", b"[2]"}, f"expected both corrupt files kept, got {kept}"


def test_progress_hint_and_check_carry_on_over_a_progress_file_nested_100000_deep(tmp_path):
    """`progress`, `hint` and `check` over a progress.json nested 100,000 deep: each works, and keeps the file aside"""
    root, env = make_project(tmp_path, git=False)
    shutil.copy(root / "solutions" / "01_bound_semaphore.py", root / KATA_1)
    commands = {"progress": (["progress"], "solved"), "hint": (["hint", "bound-semaphore"], "Hint 1 of"),
                "check": (["check", "bound-semaphore"], "Solved.")}
    for name, (args, shown) in commands.items():
        state = tmp_path / f"state-{name}"
        state.mkdir()
        (state / "progress.json").write_bytes(NESTED_100000_DEEP)
        out = loopkata({**env, "LOOPKATA_STATE": str(state)}, *args, cwd=root)
        assert out.returncode == 0 and "Traceback" not in out.stderr, \
            f"expected `loopkata {name}` to exit 0, got {out.returncode}:\n{out.stdout}\n{out.stderr}"
        assert shown in out.stdout, f"expected `loopkata {name}` to show {shown!r}, got:\n{out.stdout}"
        check_kept_aside(state, NESTED_100000_DEEP, stderr_lines(out))


def test_a_fifo_in_place_of_progress_json_is_kept_aside_without_waiting_for_a_writer(tmp_path):
    """a FIFO named progress.json: `loopkata progress` does not wait on it; it is kept aside with one line"""
    os.mkfifo(tmp_path / "progress.json")
    out = loopkata({**os.environ, "LOOPKATA_STATE": str(tmp_path)}, "progress")  # the timeout only catches a hang
    assert out.returncode == 0 and "solved" in out.stdout, f"expected the progress table, got:\n{out.stdout}\n{out.stderr}"
    kept = list(tmp_path.glob("progress.json.corrupt-*"))
    lines = stderr_lines(out)
    assert len(kept) == 1 and kept[0].is_fifo(), f"expected the FIFO kept aside, found {kept}"
    assert len(lines) == 1 and "not a regular file" in lines[0], f"expected one line saying why, got {lines}"


# --- 3. a state folder that cannot be written -----------------------------------------

def test_check_prints_the_verdict_when_progress_cannot_be_saved(tmp_path):
    """a solved kata with an unwritable state folder: the verdict, then one line, exit 0"""
    root, env = make_project(tmp_path, git=False)
    shutil.copy(root / "solutions" / "01_bound_semaphore.py", root / KATA_1)
    env["LOOPKATA_STATE"] = str(unwritable_state(tmp_path))
    out = loopkata(env, "check", "bound-semaphore", cwd=root)
    assert out.returncode == 0, f"expected exit 0 for a passing check, got {out.returncode}:\n{out.stdout}\n{out.stderr}"
    assert "Solved." in out.stdout, f"expected the verdict, got:\n{out.stdout}"
    lines = stderr_lines(out)
    assert len(lines) == 1 and "could not be saved" in lines[0] and "Not a directory" in lines[0], \
        f"expected one line saying progress could not be saved and why, got {lines}"


def test_hint_is_shown_when_progress_cannot_be_saved(tmp_path):
    """`loopkata hint` with an unwritable state folder: the hint, then one line, exit 0"""
    env = {**os.environ, "LOOPKATA_STATE": str(unwritable_state(tmp_path))}
    out = loopkata(env, "hint", "bound-semaphore")
    assert out.returncode == 0 and out.stdout.startswith("Hint "), f"expected a hint, got {out.returncode}:\n{out.stdout}\n{out.stderr}"
    lines = stderr_lines(out)
    assert len(lines) == 1 and "could not be saved" in lines[0], f"expected one line saying so, got {lines}"


def test_reset_refuses_when_the_backup_cannot_be_written(tmp_path):
    """`loopkata reset` that cannot back up: one paragraph, the learner's file untouched"""
    root, env = make_project(tmp_path)
    mine = (root / KATA_1).read_text() + "\n# my work in progress\n"
    (root / KATA_1).write_text(mine)
    env["LOOPKATA_STATE"] = str(unwritable_state(tmp_path))
    out = loopkata(env, "reset", "1", cwd=root)
    assert out.returncode == 1, f"expected exit 1, got {out.returncode}:\n{out.stdout}\n{out.stderr}"
    assert (root / KATA_1).read_text() == mine, "expected the learner's version left as it was"
    lines = stderr_lines(out)
    assert len(lines) == 1 and "nothing was reset" in lines[0] and "Traceback" not in out.stderr, \
        f"expected one paragraph saying nothing was reset, got {lines}"
    assert "Restored" not in out.stdout, f"expected no claim of a restore, got:\n{out.stdout}"


def test_reset_restores_when_only_progress_cannot_be_saved(tmp_path):
    """`loopkata reset` with a backup folder but no progress file: restored, backed up, one line"""
    root, env = make_project(tmp_path)
    starter = (root / KATA_1).read_bytes()
    (root / KATA_1).write_bytes(starter + b"\n# my work in progress\n")
    (root / ".loopkata" / "progress.json.lock").mkdir(parents=True)  # the lock file cannot be opened
    out = loopkata(env, "reset", "1", cwd=root)
    assert out.returncode == 0, f"expected exit 0, got {out.returncode}:\n{out.stdout}\n{out.stderr}"
    assert (root / KATA_1).read_bytes() == starter, "expected the starter restored"
    assert "backed up in" in out.stdout, f"expected the backup folder named, got:\n{out.stdout}"
    lines = stderr_lines(out)
    assert len(lines) == 1 and "could not be saved" in lines[0], f"expected one line saying so, got {lines}"


# --- 4. the starter is the shipped starter ------------------------------------------------

def test_the_starter_manifest_matches_the_starters_in_katas():
    """katas/starters.toml records the starters now in katas/"""
    def entries(text):
        return {(s["kata"], s["path"]): (s["sha256"], s["blob"]) for s in tomllib.loads(text)["starter"]}

    recorded = entries((ROOT / starters.MANIFEST).read_text(encoding="utf-8"))
    actual = entries(starter_manifest.manifest_text(ROOT))
    differ = sorted(k for k in recorded.keys() | actual.keys() if recorded.get(k) != actual.get(k))
    assert not differ, (f"expected the manifest to match katas/, these differ: {differ}. "
                        "If a starter changed on purpose, run: python -m loopkata.authoring.starter_manifest --write")


def test_a_committed_edit_is_not_untouched_and_reset_restores_the_shipped_starter(tmp_path):
    """a learner who commits their edits: still 'attempted', and reset brings back the shipped bytes"""
    root, env = make_project(tmp_path)
    shipped = {p: p.read_bytes() for p in [root / KATA_1, *sorted((root / KATA_5).rglob("*.py"))]}
    (root / KATA_1).write_text("# rewritten by the learner\n")
    (root / KATA_5 / "store.py").write_text("# rewritten by the learner\n")
    (root / KATA_5 / "notes.py").write_text("# a file the learner added\n")
    subprocess.run(["git", "add", "-A"], cwd=root, check=True, timeout=30)
    subprocess.run(["git", "commit", "-qm", "my attempt"], cwd=root, check=True, env=env, timeout=30)

    listed = loopkata(env, "list", "--json", cwd=root)
    statuses = {row["id"]: row["status"] for row in json.loads(listed.stdout)}
    for kata_id in ("bound-semaphore", "lock-reentry"):
        assert statuses[kata_id] == "attempted", f"expected {kata_id} 'attempted' after a commit, got {statuses[kata_id]!r}"

    for kata in ("1", "5"):
        out = loopkata(env, "reset", kata, cwd=root)
        assert out.returncode == 0, f"expected reset {kata} to succeed, got {out.returncode}:\n{out.stdout}\n{out.stderr}"
    changed = [str(p.relative_to(root)) for p, data in shipped.items() if p.read_bytes() != data]
    assert not changed, f"expected the shipped starter back, these differ: {changed}"
    assert not (root / KATA_5 / "notes.py").exists(), "expected the added file removed (it is in the backup)"
    assert list((root / ".loopkata" / "backups" / "lock-reentry").rglob("notes.py")), "expected the added file backed up"


def test_without_git_the_first_look_keeps_the_starter_for_a_later_reset(tmp_path):
    """no git: `list` keeps a copy of an untouched starter, and reset restores it after an edit"""
    root, env = make_project(tmp_path, git=False)
    starter = (root / KATA_1).read_bytes()
    assert '"untouched"' in loopkata(env, "list", "--json", cwd=root).stdout
    (root / KATA_1).write_text("# rewritten by the learner\n")
    out = loopkata(env, "reset", "1", cwd=root)
    assert out.returncode == 0, f"expected the reset to succeed, got {out.returncode}:\n{out.stdout}\n{out.stderr}"
    assert (root / KATA_1).read_bytes() == starter, "expected the starter restored from the snapshot"


def test_without_git_or_a_copy_reset_says_so_and_changes_nothing(tmp_path):
    """no git and no copy of the starter: one paragraph, nothing restored, nothing backed up"""
    root, env = make_project(tmp_path, git=False)
    (root / KATA_1).write_text("# rewritten by the learner\n")
    out = loopkata(env, "reset", "1", cwd=root)
    assert out.returncode == 1, f"expected exit 1, got {out.returncode}:\n{out.stdout}\n{out.stderr}"
    assert (root / KATA_1).read_text() == "# rewritten by the learner\n", "expected the learner's version untouched"
    lines = stderr_lines(out)
    assert len(lines) == 1 and "cannot find the shipped starter" in lines[0], f"expected one paragraph, got {lines}"
    assert not (root / ".loopkata" / "backups").exists(), "expected no backup for a reset that did nothing"


# --- 5. reset of a deleted kata ----------------------------------------------------------

def test_reset_of_a_deleted_kata_restores_it_without_a_backup(tmp_path):
    """reset after the kata file was deleted: the starter is back, and no backup is claimed"""
    root, env = make_project(tmp_path)
    starter = (root / KATA_1).read_bytes()
    (root / KATA_1).unlink()
    out = loopkata(env, "reset", "1", cwd=root)
    assert out.returncode == 0, f"expected exit 0, got {out.returncode}:\n{out.stdout}\n{out.stderr}"
    assert (root / KATA_1).read_bytes() == starter, "expected the starter restored"
    assert "nothing to back up" in out.stdout and "backed up in" not in out.stdout, \
        f"expected 'nothing to back up' and no backup folder, got:\n{out.stdout}"
    assert not (root / ".loopkata" / "backups").exists(), "expected no backup folder created"
