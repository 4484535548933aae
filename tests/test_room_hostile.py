"""A hostile learner's export never sinks the room: each one the room cannot use is one
"skipped" line naming the file and why, and every other export still makes the table and
the figure.

Each test writes its exports into tmp_path and runs `loopkata room` through the CLI, as a
facilitator does, in the project's own checkout (the catalogue is read, nothing is written).
"""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from loopkata.room import exports
from test_room import KATA, KATA_FILE, an_export, png_size, room_env, table_row, write
from test_state import loopkata

FOLDER_KATA, FOLDER_KATA_DIR = "lock-reentry", "katas/05_lock_reentry"


def with_files(data: dict, files: dict, kata_id: str = KATA) -> dict:
    """`data` with the kata `kata_id` carrying exactly `files` (path -> text)."""
    entry = data["katas"].setdefault(kata_id, dict(data["katas"][KATA], number=5, title="a folder kata"))
    entry["files"] = [{"path": p, "text": text} for p, text in files.items()]
    return data


def run_room(tmp_path, *args):
    return loopkata(room_env(), "room", *args, "--figure", "room.png", cwd=tmp_path)


def run_room_within(tmp_path, seconds: float, *args):
    """`loopkata room ARGS`, failed as a test (not left running) when it takes more than `seconds`."""
    try:
        return subprocess.run([sys.executable, "-m", "loopkata", "room", *args, "--figure", "room.png"],
                              capture_output=True, text=True, env=room_env(), cwd=tmp_path, timeout=seconds,
                              check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"expected the room shown within {seconds:g} s, it was still reading after {seconds:g} s")


def assert_room_goes_on(out, tmp_path, skipped: dict[str, str], shown: list[str]):
    """Each file of `skipped` is one stderr line saying it was skipped and why (its value),
    the learners of `shown` still have their row, the figure is saved, and the exit is 1."""
    assert "Traceback" not in out.stderr + out.stdout, f"expected no traceback, got:\n{out.stderr}"
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    for name, why in skipped.items():
        named = [line for line in lines if f"skipped {name}:" in line]
        assert len(named) == 1 and why in named[0], \
            f"expected one line saying {name} was skipped ({why!r}), got:\n{out.stderr}"
    assert len(lines) == len(skipped), f"expected {len(skipped)} lines on stderr, got {len(lines)}:\n{out.stderr}"
    for learner in shown:
        table_row(out.stdout, learner)
    assert re.search(rf"^{len(shown)} learners?:", out.stdout, re.MULTILINE), \
        f"expected a room of {len(shown)} learners, got:\n{out.stdout}"
    width, height = png_size(tmp_path / "room.png")
    assert width >= 600 and height >= 600, f"expected the figure saved, got {width} x {height} pixels"
    assert out.returncode == 1, f"expected exit 1 when an export was skipped, got {out.returncode}"


# --- numbers and text ---------------------------------------------------------------------

def test_a_time_to_solve_of_nan_or_infinity_skips_that_export_only(tmp_path):
    """seconds_to_solve NaN, Infinity, -Infinity or 1e400: each export skipped, the room still shown"""
    write(tmp_path / "alice.json", an_export("alice", "solved", 2, seconds=60))
    hostile = {"nan.json": "NaN", "inf.json": "Infinity", "minus-inf.json": "-Infinity", "huge.json": "1e400"}
    for name, number in hostile.items():
        text = json.dumps(an_export(name[:-5], "solved", 1, seconds=12345)).replace("12345", number)
        write(tmp_path / name, text)
    out = run_room(tmp_path, "alice.json", *hostile)
    assert_room_goes_on(out, tmp_path, {name: "finite" for name in hostile}, ["alice"])
    assert table_row(out.stdout, "median")[1] == "1m00s", \
        f"expected the median of alice's time alone (1m00s), got {table_row(out.stdout, 'median')}"


def test_a_lone_surrogate_in_a_file_or_a_name_skips_that_export_only(tmp_path):
    r"""a \ud800 escape (a lone surrogate) in a file's text or the learner's name: skipped, not a crash"""
    write(tmp_path / "alice.json", an_export("alice", "solved", 2, seconds=60))
    # json.dumps writes the surrogate as the escape \ud800, which is valid JSON and decodes to no valid text
    write(tmp_path / "in-file.json", json.dumps(an_export("mallory", "solved", 1, files={KATA_FILE: "x = '\ud800'"})))
    write(tmp_path / "in-name.json", json.dumps(an_export("trudy\udfff", "solved", 1)))
    out = run_room(tmp_path, "alice.json", "in-file.json", "in-name.json")
    assert_room_goes_on(out, tmp_path, {"in-file.json": "lone surrogate", "in-name.json": "lone surrogate"}, ["alice"])


def test_json_nested_200000_deep_is_skipped_as_too_deep(tmp_path):
    """an export nesting arrays 200,000 deep: "nested too deep", never a RecursionError"""
    write(tmp_path / "alice.json", an_export("alice", "solved", 2, seconds=60))
    data = json.dumps(an_export("mallory", "solved", 1))
    write(tmp_path / "deep.json", data[:-1] + ', "extra": ' + "[" * 200_000 + "]" * 200_000 + "}")
    write(tmp_path / "deep-string.json", json.dumps(an_export("bob", "attempted", 1, failing=["[" * 200_000])))
    out = run_room(tmp_path, "alice.json", "deep.json", "deep-string.json")
    assert_room_goes_on(out, tmp_path, {"deep.json": "nested too deep"}, ["alice", "bob"])


# --- size, and files that are no export --------------------------------------------------

# The room gives up on a reading this slow: the reader is linear, and these tests take 2 or 3 s.
READ_BOUND = 60


def test_an_unterminated_string_of_escaped_quotes_2_mb_long_is_skipped_in_seconds(tmp_path):
    """2 MB of \\" in a string never closed: skipped at once, as the room reads in time linear in an export's size"""
    write(tmp_path / "alice.json", an_export("alice", "solved", 2, seconds=60))
    write(tmp_path / "quotes.json", '{"format": "loopkata-progress", "learner": "' + '\\"' * 1_000_000)
    out = run_room_within(tmp_path, READ_BOUND, "alice.json", "quotes.json")
    assert_room_goes_on(out, tmp_path, {"quotes.json": "is not valid JSON"}, ["alice"])


def test_an_export_larger_than_the_cap_is_skipped_before_it_is_read(tmp_path):
    """an export of 17 MiB (more than the 16 MiB cap, far above any real one) is skipped and named as too large"""
    write(tmp_path / "alice.json", an_export("alice", "solved", 2, seconds=60))
    with open(tmp_path / "huge.json", "wb") as f:  # sparse: 17 MiB long, next to nothing on the disk
        f.write(json.dumps(an_export("mallory", "solved", 1)).encode())
        f.truncate(exports.MAX_EXPORT_BYTES + 1024 * 1024)
    out = run_room(tmp_path, "alice.json", "huge.json")
    assert_room_goes_on(out, tmp_path, {"huge.json": f"larger than {exports.MAX_EXPORT_BYTES // 2**20} MiB"},
                        ["alice"])


def test_an_export_naming_more_katas_than_the_cap_is_skipped(tmp_path):
    """an export naming 3,000 katas (the cap is 64, four times the collection) is skipped, not drawn column by column"""
    write(tmp_path / "alice.json", an_export("alice", "solved", 2, seconds=60))
    data = an_export("mallory", "attempted", 1)
    for n in range(3000):
        data["katas"][f"made-up-{n}"] = dict(data["katas"][KATA], number=None, title="made up")
    write(tmp_path / "many.json", data)
    out = run_room_within(tmp_path, READ_BOUND, "alice.json", "many.json")
    assert_room_goes_on(out, tmp_path, {"many.json": f"more than {exports.MAX_KATAS}"}, ["alice"])
    assert "made-up-" not in out.stdout, f"expected no column of the skipped export, got:\n{out.stdout}"


def test_a_fifo_or_a_device_named_as_an_export_is_skipped_without_waiting(tmp_path):
    """a FIFO nobody writes to, and /dev/zero, named as exports: each skipped as not a regular file, nothing waits"""
    write(tmp_path / "alice.json", an_export("alice", "solved", 2, seconds=60))
    os.mkfifo(tmp_path / "fifo.json")
    named = ["fifo.json"] + (["/dev/zero"] if os.path.exists("/dev/zero") else [])  # the FIFO first: it blocked
    out = run_room_within(tmp_path, READ_BOUND, "alice.json", *named)
    assert_room_goes_on(out, tmp_path, {os.path.relpath(tmp_path / n, tmp_path): "is not a regular file" for n in named},
                        ["alice"])


def test_a_name_too_long_for_a_file_is_skipped_with_one_line(tmp_path):
    """an argument of 5,000 characters (no file system takes such a name) is one line, not a traceback"""
    write(tmp_path / "alice.json", an_export("alice", "solved", 2, seconds=60))
    long_name = "a" * 5000 + ".json"
    out = run_room(tmp_path, "alice.json", long_name)
    assert_room_goes_on(out, tmp_path, {long_name: "too long"}, ["alice"])


# --- paths a re-grade would write ---------------------------------------------------------

def test_regrade_with_a_nul_byte_in_a_path_skips_that_export_at_loading(tmp_path):
    """--regrade: a file path with a NUL byte (or another control character) is refused when the export is read"""
    write(tmp_path / "alice.json", an_export("alice", "attempted", 1))
    nul = {f"{FOLDER_KATA_DIR}/__init__.py": "x = 1", f"{FOLDER_KATA_DIR}/a\x00.py": "y = 2"}
    write(tmp_path / "nul.json", with_files(an_export("mallory", "solved", 1), nul, FOLDER_KATA))
    write(tmp_path / "tab.json", an_export("trudy", "solved", 1, files={"katas/a\tb.py": "x = 1"}))
    out = run_room(tmp_path, "--regrade", "alice.json", "nul.json", "tab.json")
    assert_room_goes_on(out, tmp_path, {"nul.json": "control character", "tab.json": "control character"}, ["alice"])


def test_regrade_with_a_300_character_file_name_skips_that_export_at_loading(tmp_path):
    """--regrade: a 300-character file name (more than a file system's 255 bytes) is refused, so is a 2000-byte path"""
    write(tmp_path / "alice.json", an_export("alice", "attempted", 1))
    long_name = {f"{FOLDER_KATA_DIR}/__init__.py": "x = 1", f"{FOLDER_KATA_DIR}/{'a' * 300}.py": "y = 2"}
    write(tmp_path / "long-name.json", with_files(an_export("mallory", "solved", 1), long_name, FOLDER_KATA))
    deep = "katas/" + "/".join(["d" * 200] * 10) + "/x.py"
    write(tmp_path / "long-path.json", an_export("trudy", "solved", 1, files={deep: "x"}))
    out = run_room(tmp_path, "--regrade", "alice.json", "long-name.json", "long-path.json")
    assert_room_goes_on(out, tmp_path, {"long-name.json": f"longer than {exports.MAX_NAME_BYTES} bytes",
                                        "long-path.json": f"longer than {exports.MAX_PATH_BYTES} bytes"}, ["alice"])


def test_regrade_with_a_path_both_a_file_and_a_folder_skips_that_export_at_loading(tmp_path):
    """--regrade: a folder kata's export naming x.py as a file and x.py/y.py under it is refused"""
    write(tmp_path / "alice.json", an_export("alice", "attempted", 1))
    clash = {f"{FOLDER_KATA_DIR}/__init__.py": "x = 1", f"{FOLDER_KATA_DIR}/__init__.py/y.py": "y = 2"}
    write(tmp_path / "clash.json", with_files(an_export("mallory", "solved", 1), clash, FOLDER_KATA))
    out = run_room(tmp_path, "--regrade", "alice.json", "clash.json")
    assert_room_goes_on(out, tmp_path, {"clash.json": "both as a file and as the folder"}, ["alice"])


def test_regrade_with_a_path_under_a_single_file_kata_skips_that_export_at_loading(tmp_path):
    """--regrade: katas/01_bound_semaphore.py/evil.py (inside a kata that is one file) is refused"""
    write(tmp_path / "alice.json", an_export("alice", "attempted", 1))
    write(tmp_path / "inside.json", an_export("mallory", "solved", 1, files={KATA_FILE + "/evil.py": "x = 1"}))
    out = run_room(tmp_path, "--regrade", "alice.json", "inside.json")
    assert_room_goes_on(out, tmp_path, {"inside.json": "which is a single file"}, ["alice"])


# --- the figure ---------------------------------------------------------------------------

def test_failing_test_titles_with_dollar_signs_are_drawn_as_plain_text(tmp_path):
    """a failing test titled with $...$ (mathtext, even broken TeX) is drawn as it is, and the figure is saved"""
    titles = [r"costs $5 and $\frac{1}{$", "$x^$ and $$", r"$\undefinedcommand$"]
    write(tmp_path / "bob.json", an_export("bob", "attempted", 2, failing=titles))
    out = run_room(tmp_path, "bob.json")
    assert out.returncode == 0 and "Traceback" not in out.stderr, \
        f"expected exit 0 and no traceback, got {out.returncode}:\n{out.stderr}"
    for title in titles:
        assert f"01 {KATA}: 1 learner: {title}" in out.stdout, f"expected {title!r} among where the room is stuck"
    width, height = png_size(tmp_path / "room.png")
    assert width >= 600 and height >= 600, f"expected the figure saved, got {width} x {height} pixels"


def test_a_figure_path_matplotlib_cannot_write_is_one_line_before_any_work(tmp_path):
    """--figure x.json: one line naming the extension, exit 2, before the exports are read or re-graded"""
    write(tmp_path / "alice.json", an_export("alice", "solved", 2, seconds=60))
    out = loopkata(room_env(), "room", "--regrade", "alice.json", "--figure", "x.json", cwd=tmp_path)
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.returncode == 2, f"expected exit 2 (the tool cannot do what was asked), got {out.returncode}"
    assert len(lines) == 1 and ".json" in lines[0] and ".png" in lines[0] and "Traceback" not in out.stderr, \
        f"expected one line naming .json and a format that works (.png), got:\n{out.stderr}"
    assert not out.stdout.strip(), f"expected no work done (no re-grade, no table), got:\n{out.stdout}"
    assert not (tmp_path / "x.json").exists(), "expected no file written at x.json"


# --- what reaches the terminal --------------------------------------------------------------

def test_escape_sequences_from_exports_are_shown_not_obeyed(tmp_path):
    """learner names, test titles, kata ids and export file names print with their escapes made visible"""
    clear = "\x1b[2J\x1b[H"
    data = an_export(f"{clear}mal\rlory", "attempted", 1, failing=["\x1b]0;pwned\x07a title\u202e"])
    data["katas"][f"odd{clear}"] = dict(data["katas"][KATA])
    write(tmp_path / "mallory.json", data)
    write(tmp_path / "exports" / f"{clear}bad.json", "[1]")
    out = run_room(tmp_path, "mallory.json", "exports")
    for where, text in (("stdout", out.stdout), ("stderr", out.stderr)):
        for raw in ("\x1b", "\r", "\x07", "\u202e"):
            assert raw not in text, f"expected no raw {raw!r} on {where}, got:\n{text!r}"
    assert table_row(out.stdout, r"\x1b[2J\x1b[Hmal\rlory")[1] == "✗ 1", \
        f"expected mallory's row under the name with its escapes visible, got:\n{out.stdout}"
    assert r"\x1b]0;pwned\x07a title\u202e" in out.stdout, f"expected the title's escapes visible:\n{out.stdout}"
    assert r"odd\x1b[2J\x1b[H" in out.stdout, f"expected the kata id's escapes visible:\n{out.stdout}"
    assert r"\x1b[2J\x1b[Hbad.json" in out.stderr, f"expected the file name's escapes visible:\n{out.stderr}"
    assert out.returncode == 1, f"expected exit 1 (an export skipped), got {out.returncode}"


# --- the same export twice ----------------------------------------------------------------

def test_the_same_export_named_twice_or_copied_counts_once(tmp_path):
    """one file named twice (also through its folder), and a byte-identical copy: one row, and a line for each"""
    write(tmp_path / "exports" / "alice.json", an_export("alice", "solved", 2, seconds=60))
    write(tmp_path / "bob.json", an_export("bob", "attempted", 1))
    shutil.copyfile(tmp_path / "exports" / "alice.json", tmp_path / "alice-copy.json")
    out = run_room(tmp_path, "exports", "exports/alice.json", str(tmp_path / "exports" / "alice.json"),
                   "alice-copy.json", "bob.json")
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 3 and all("counted once" in line for line in lines), \
        f"expected three lines saying a duplicate was counted once, got:\n{out.stderr}"
    assert "alice-copy.json" in lines[-1] and "byte for byte" in lines[-1], \
        f"expected the copy named as the same export byte for byte, got {lines[-1]!r}"
    assert table_row(out.stdout, "alice")[:2] == ["alice", "✓ 2"] and table_row(out.stdout, "solved")[1] == "1/2", \
        f"expected alice once in a room of 2 (1/2 solved), got:\n{out.stdout}"
    assert out.returncode == 1, f"expected exit 1 (exports skipped), got {out.returncode}"
