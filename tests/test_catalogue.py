"""Finding the Loop Katas folder, and a broken catalogue explained in one paragraph.

Each test works on its own temporary folder holding a copy (often edited) of
katas/catalogue.toml, so the real catalogue is never touched.
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from loopkata.model import catalogue

ROOT = Path(__file__).resolve().parents[1]
CATALOGUE = (ROOT / "katas" / "catalogue.toml").read_text(encoding="utf-8")


def project(folder: Path, text: str = CATALOGUE) -> Path:
    """A folder that looks like a Loop Katas checkout: katas/catalogue.toml holding `text`."""
    (folder / "katas").mkdir(parents=True, exist_ok=True)
    (folder / "katas" / "catalogue.toml").write_text(text, encoding="utf-8")
    return folder


def edited(old: str, new: str) -> str:
    """The real catalogue with the first `old` replaced by `new`."""
    assert old in CATALOGUE, f"expected katas/catalogue.toml to contain {old!r} (the test edits it)"
    return CATALOGUE.replace(old, new, 1)


def loopkata(*args, cwd: Path, root: Path | None):
    """The CLI as a learner runs it; LOOPKATA_ROOT set to `root`, or removed when None."""
    env = {k: v for k, v in os.environ.items() if k != "LOOPKATA_ROOT"}
    if root is not None:
        env["LOOPKATA_ROOT"] = str(root)
    return subprocess.run([sys.executable, "-m", "loopkata", *args], check=False, capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=60)


def assert_one_paragraph(text: str, *expected: str) -> None:
    text = text.strip()
    assert text, "expected a paragraph explaining the problem, got nothing"
    assert "Traceback" not in text and "\n" not in text, f"expected one paragraph, got:\n{text}"
    for part in expected:
        assert part in text, f"expected the paragraph to mention {part!r}, got:\n{text}"


def load_problem(root: Path) -> str:
    """The paragraph catalogue.load(root) raises for a broken catalogue."""
    with pytest.raises(catalogue.CatalogueError) as info:
        catalogue.load(root)
    return str(info.value)


# --- which folder is graded -------------------------------------------------

def test_loopkata_root_pointing_at_an_empty_folder_is_one_paragraph(tmp_path):
    """LOOPKATA_ROOT naming a folder with no catalogue stops with exit 2, not another checkout"""
    empty = tmp_path / "empty"
    empty.mkdir()
    out = loopkata("list", cwd=ROOT, root=empty)
    assert out.returncode == 2, f"expected exit 2, got {out.returncode}; stdout:\n{out.stdout}"
    assert out.stdout == "", f"expected nothing listed from another checkout, got:\n{out.stdout}"
    assert_one_paragraph(out.stderr, f"LOOPKATA_ROOT is set to {empty}", "katas/catalogue.toml")


def test_outside_any_checkout_without_loopkata_root_is_one_paragraph(tmp_path):
    """run outside the folder with no LOOPKATA_ROOT: one paragraph, not the installed package's checkout"""
    assert not any((p / "katas" / "catalogue.toml").is_file() for p in (tmp_path, *tmp_path.parents)), \
        f"this test needs a temporary folder outside any Loop Katas checkout, but {tmp_path} is inside one"
    out = loopkata("check", "1", cwd=tmp_path, root=None)
    assert out.returncode == 2, f"expected exit 2, got {out.returncode}; stdout:\n{out.stdout}"
    assert_one_paragraph(out.stderr, str(tmp_path.resolve()), "inside", "LOOPKATA_ROOT")


def test_list_names_the_folder_chosen_by_loopkata_root(tmp_path):
    """`loopkata list` starts by naming the folder in use; LOOPKATA_ROOT wins over the current directory"""
    root = project(tmp_path / "copy")
    out = loopkata("list", cwd=ROOT, root=root)
    assert out.returncode == 0, out.stderr
    first = out.stdout.splitlines()[0]
    expected = f"Loop Katas at {root.resolve()} (katas/catalogue.toml, chosen by LOOPKATA_ROOT)"
    assert first == expected, f"expected the first line {expected!r}, got {first!r}"
    out = loopkata("list", "--json", cwd=ROOT, root=root)
    rows = json.loads(out.stdout)
    assert [r["id"] for r in rows] == [k.id for k in catalogue.load(ROOT)], "expected every kata, in order"
    assert {r["root"] for r in rows} == {str(root.resolve())}, f"expected every row's root to be {root}, got {rows}"


def test_list_from_a_subfolder_names_the_checkout_around_it(tmp_path):
    """without LOOPKATA_ROOT, the checkout is the nearest folder above the current one (notebooks run in notebooks/)"""
    root = project(tmp_path / "copy")
    (root / "notebooks").mkdir()
    out = loopkata("list", cwd=root / "notebooks", root=None)
    assert out.returncode == 0, out.stderr
    first = out.stdout.splitlines()[0]
    expected = f"Loop Katas at {root.resolve()} (katas/catalogue.toml)"
    assert first == expected, f"expected the first line {expected!r}, got {first!r}"


# --- a broken catalogue ------------------------------------------------------

def test_a_toml_syntax_error_names_its_line_and_column(tmp_path):
    """a TOML syntax error is one paragraph with the line and column, from load and from the CLI"""
    broken = edited('title = "The semaphore bound to a dead loop"', 'title = "The semaphore bound to a dead loop')
    line = broken[:broken.index('title = "The semaphore')].count("\n") + 1
    root = project(tmp_path, broken)
    path = str(root / "katas" / "catalogue.toml")
    assert_one_paragraph(load_problem(root), path, "is not valid TOML", f"at line {line}, column")
    out = loopkata("list", cwd=tmp_path, root=root)
    assert out.returncode == 2, f"expected exit 2, got {out.returncode}; stdout:\n{out.stdout}"
    assert_one_paragraph(out.stderr, path, f"at line {line}, column")


def test_a_missing_field_names_the_kata_and_the_field(tmp_path):
    """a kata without hang_after: the paragraph names the kata and says the field is missing"""
    root = project(tmp_path, edited("hang_after = 3.0\n", ""))
    assert_one_paragraph(
        load_problem(root), str(root / "katas" / "catalogue.toml"),
        "kata 'loop-id-reuse' (the [[kata]] table number 2)", "`hang_after` should be", "it is missing",
    )


def test_an_unknown_field_is_named_with_the_likely_one(tmp_path):
    """a misspelt field is not ignored: the paragraph names it and suggests the field meant"""
    root = project(tmp_path, edited("hang_after = 0.5", "hang_aftr = 0.5"))
    assert_one_paragraph(
        load_problem(root), "kata 'bound-semaphore' (the [[kata]] table number 1)",
        "`hang_aftr` should be one of the known fields", "perhaps you meant `hang_after`.",
    )


def test_a_wrong_type_says_what_was_expected_and_found(tmp_path):
    """budget_seconds = "15" (a string): expected a number of seconds, found a string, from load and the CLI"""
    root = project(tmp_path, edited("budget_seconds = 15", 'budget_seconds = "15"'))
    expected = ("kata 'bound-semaphore'", "`budget_seconds` should be a positive number of seconds",
                'it is "15" (a string)')
    assert_one_paragraph(load_problem(root), *expected)
    out = loopkata("check", "1", cwd=tmp_path, root=root)
    assert out.returncode == 2, f"expected exit 2, got {out.returncode}; stdout:\n{out.stdout}"
    assert_one_paragraph(out.stderr, *expected)


def test_a_regex_that_does_not_compile_is_named(tmp_path):
    """symptom patterns and hint conditions must compile, or every later check would fail on them"""
    root = project(tmp_path / "pattern", edited('pattern = "RuntimeError: Event loop is closed"',
                                                'pattern = "RuntimeError: Event loop (is closed"'))
    assert_one_paragraph(
        load_problem(root), "kata 'loop-id-reuse'", "[[kata.symptom]] number 1",
        "`pattern` should be a regular expression", "does not compile: missing ), unterminated subpattern",
    )
    first_when = re.search(r'^when = ".*"$', CATALOGUE, re.MULTILINE).group(0)  # any hint's condition will do
    root = project(tmp_path / "when", edited(first_when, 'when = "hang["'))
    assert_one_paragraph(
        load_problem(root), "its [[kata.hint]] number",
        "`when` should be a regular expression", "does not compile: unterminated character set",
    )


@pytest.mark.parametrize("nested", ["[" * 2000 + "]" * 2000, "{a = " * 2000 + "1" + "}" * 2000],
                         ids=["arrays", "inline-tables"])
def test_a_catalogue_nested_2000_deep_is_one_paragraph(tmp_path, nested):
    """a value nesting arrays or inline tables 2,000 deep: one paragraph saying so, never a RecursionError"""
    root = project(tmp_path, CATALOGUE + f"\ndeep = {nested}\n")
    assert_one_paragraph(load_problem(root), str(root / "katas" / "catalogue.toml"), "nested too deep")
    out = loopkata("list", cwd=tmp_path, root=root)
    assert out.returncode == 2, f"expected exit 2, got {out.returncode}; stderr:\n{out.stderr[-2000:]}"
    assert_one_paragraph(out.stderr, "nested too deep")


@pytest.mark.parametrize("value", ["inf", "nan", "-15", "0", "0.5", "601", "1e9"])
def test_budget_seconds_is_a_finite_number_from_1_to_600(tmp_path, value):
    """budget_seconds = inf (no deadline at all), nan, negative, 0, or more than 600: refused in one paragraph"""
    root = project(tmp_path, edited("budget_seconds = 15", f"budget_seconds = {value}"))
    assert_one_paragraph(load_problem(root), "kata 'bound-semaphore'",
                         "`budget_seconds` should be a positive number of seconds from 1 to 600")


@pytest.mark.parametrize("value", ["inf", "nan", "0", "601"])
def test_hang_after_is_a_finite_number_up_to_600(tmp_path, value):
    """hang_after = inf would never call a scenario hung: refused like a budget out of range"""
    root = project(tmp_path, edited("hang_after = 0.5", f"hang_after = {value}"))
    assert_one_paragraph(load_problem(root), "kata 'bound-semaphore'",
                         "`hang_after` should be a positive number of seconds up to 600")


def test_the_real_catalogues_times_are_in_range():
    """every kata of katas/catalogue.toml loads: its budgets (15 to 90 s) and hang limits are in the ranges"""
    katas = catalogue.load(ROOT)
    assert all(1 <= k.budget_seconds <= 600 and 0 < k.hang_after <= 600 for k in katas), \
        f"expected every budget from 1 to 600 s, got {sorted((k.budget_seconds, k.hang_after) for k in katas)}"


def test_a_duplicate_id_names_both_tables(tmp_path):
    """two katas with one id: `loopkata check ID` could not tell them apart"""
    root = project(tmp_path, edited('id = "loop-id-reuse"', 'id = "bound-semaphore"'))
    assert_one_paragraph(
        load_problem(root), "the [[kata]] table number 2", "`id` should be unique",
        'the [[kata]] table number 1 already has id = "bound-semaphore"',
    )


def test_requires_names_only_earlier_katas(tmp_path):
    """a prerequisite must be a kata that comes before: an unknown id or a later kata is one paragraph"""
    root = project(tmp_path / "unknown", edited('requires = ["bound-semaphore"]', 'requires = ["bound-semafore"]'))
    assert_one_paragraph(load_problem(root), "kata 'loop-id-reuse'", "`requires` should be a list of ids of earlier katas",
                         "it names 'bound-semafore', and no kata has that id")
    root = project(tmp_path / "later", edited('requires = ["bound-semaphore"]', 'requires = ["leaked-loops"]'))
    assert_one_paragraph(load_problem(root), "kata 'loop-id-reuse'", "'leaked-loops' does not come before it")


def test_every_kata_says_what_to_do_first_and_how_long_it_takes():
    """each kata has a time estimate, and its prerequisites are shown by number and id"""
    from loopkata.room import effort

    katas = catalogue.load(ROOT)
    missing = [k.id for k in katas if not k.minutes]
    assert not missing, f"expected every kata to have `minutes` (an estimate) in the catalogue; missing: {missing}"
    k = catalogue.find("loop-id-reuse", ROOT)
    assert effort.needs_label(k, katas) == "01 bound-semaphore", effort.needs_label(k, katas)
    assert effort.time_label(k, []) == f"about {k.minutes} min (estimate)", effort.time_label(k, [])


def test_an_edited_catalogue_is_read_again(tmp_path):
    """load() never serves a stale catalogue: breaking, then fixing, the same file is seen each time"""
    root = project(tmp_path)
    assert len(catalogue.load(root)) == len(catalogue.load(ROOT)), "expected the copy to load like the original"
    project(tmp_path, edited("number = 2", "number = 1"))
    assert_one_paragraph(load_problem(root), "`number` should be unique")
    project(tmp_path)
    assert [k.id for k in catalogue.load(root)] == [k.id for k in catalogue.load(ROOT)], \
        "expected the fixed catalogue to load again"


def test_the_notebook_panel_shows_the_paragraph(tmp_path, monkeypatch):
    """in a notebook, check() and progress_table() show the paragraph instead of raising"""
    pytest.importorskip("ipywidgets")
    from loopkata import panel

    root = project(tmp_path, edited("hang_after = 0.5", 'hang_after = "soon"'))
    monkeypatch.setenv("LOOPKATA_ROOT", str(root))
    for shown in (panel.check("bound-semaphore"), panel.progress_table()):
        assert isinstance(shown, panel.Notice), f"expected a Notice, got {type(shown).__name__}"
        assert_one_paragraph(repr(shown), "`hang_after` should be", 'it is "soon" (a string)')


def test_a_testers_record_adds_the_measured_time_to_solve():
    """where learners' check records exist, the time shown adds their median time from first check to solved"""
    from loopkata.learner import progress
    from loopkata.room import effort, exports

    def record(seconds):
        rec = exports.KataRecord(status=progress.SOLVED, checks=4, seconds_to_solve=seconds, hints_seen=[1],
                                 failing=[], files={})
        return exports.Record(source=Path("t.json"), learner="t", exported_at="", katas={"loop-id-reuse": rec})

    k = catalogue.find("loop-id-reuse", ROOT)
    label = effort.time_label(k, [record(300.0), record(900.0)])
    assert label == f"about {k.minutes} min (estimate); solved in 10 min from the first check (2 learners)", label
    table = effort.guide_table(catalogue.load(ROOT), testers=[record(300.0)], rooms=[])
    assert "| 02 `loop-id-reuse` | 01 bound-semaphore | 25 min | 1: 4 checks, 1 hints, 5 min | none yet |" in table, table
