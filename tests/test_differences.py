"""Decoys and variants as differences from their base: the file, the strict applier, the grader and the authoring tool.

Every decoy and variant is a unified diff against the kata's reference fix or its starter, headed by
the sentence that says what it changes (loopkata.model.difference). When a reference fix or a
starter changes, `test_every_decoy_and_variant_of_a_kata_still_applies_to_its_base` names each one
that no longer applies: those are the ones to look at again.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from loopkata.grading import runner
from loopkata.model import alternatives, catalogue, difference, starters
from loopkata.model.difference import DifferenceError
from loopkata.model.starters import StarterUnavailable

ROOT = Path(__file__).resolve().parents[1]
KATAS = catalogue.load(ROOT)

BASE = {"app.py": "".join(f"line {n}\n" for n in range(1, 21)), "Procfile": "web: serve\nworker: work\n"}


def written(base: dict, edited: dict, sentence="Decoy: line 10 says ten, which is wrong.", kind="reference") -> str:
    return difference.render(sentence, kind, difference.unified(base, edited))


@pytest.mark.parametrize("kata", KATAS, ids=[k.id for k in KATAS])
def test_every_decoy_and_variant_of_a_kata_still_applies_to_its_base(kata):
    """every decoy and variant of the kata still applies to its base (a changed reference fix or starter names the ones to look at again)"""
    problems = alternatives.problems(kata)
    assert not problems, (
        f"expected every decoy and variant of {kata.id} to apply to its base; {len(problems)} no longer do(es), "
        "look at each again (loopkata decoy build, carry the change over, loopkata decoy new --replace):\n"
        + "\n".join(problems))


def test_the_decoy_and_variant_folders_hold_only_differences():
    """tests/decoys and tests/variants hold only NAME.diff files, each in the folder of a kata of the catalogue"""
    ids = {k.id for k in KATAS}
    strays = []
    for kind in ("decoys", "variants"):
        for path in sorted((ROOT / "tests" / kind).rglob("*")):
            rel = path.relative_to(ROOT / "tests" / kind)
            if path.is_dir() and len(rel.parts) == 1 and rel.parts[0] in ids:
                continue
            if path.is_file() and path.suffix == ".diff" and len(rel.parts) == 2 and rel.parts[0] in ids:
                continue
            strays.append(f"tests/{kind}/{rel.as_posix()}")
    assert not strays, (
        "expected only differences (tests/decoys/<kata>/NAME.diff) in tests/decoys and tests/variants, found "
        f"{', '.join(strays)}: the grader lists only .diff files, so these would never be proven. Turn a whole-file "
        "copy into a difference with `loopkata decoy new KATA NAME --from PATH --base reference --why \"Decoy: ...\"` "
        "(or `variant new`), then remove the copy.")


def test_a_difference_gives_back_the_edited_copy_it_was_written_from():
    """a difference applied to its base gives back the edited copy: files changed, added, and ending without a newline"""
    edited = {"app.py": BASE["app.py"].replace("line 10\n", "ten\n").replace("line 20\n", "last"),
              "Procfile": "web: serve\n", "new.sh": "#!/bin/sh\nexec python app.py\n"}
    diff = difference.parse(written(BASE, edited), "decoy t/x")
    assert difference.apply(diff, BASE) == edited, "expected the base with the difference applied to be the edited copy"
    assert diff.sentence == "Decoy: line 10 says ten, which is wrong." and diff.base == "reference", (
        f"expected the header's sentence and base back, got {diff.sentence!r} and {diff.base!r}")


def test_a_hunk_whose_context_does_not_match_is_refused_in_one_line_naming_the_decoy_and_the_hunk():
    """a hunk whose lines are not in the base as it says is refused, in one line naming the decoy, the file and the hunk"""
    diff = difference.parse(written(BASE, {**BASE, "app.py": BASE["app.py"].replace("line 10\n", "ten\n")}), "decoy k/x")
    changed = {**BASE, "app.py": BASE["app.py"].replace("line 9\n", "line nine\n")}
    with pytest.raises(DifferenceError) as refused:
        difference.apply(diff, changed, "the reference fix (solutions/k)")
    said = str(refused.value)
    assert "\n" not in said and said.startswith("decoy k/x: app.py: hunk 1 (@@ -7,7 +7,7 @@)"), (
        f"expected one line naming the decoy, the file and the hunk, got {said!r}")
    assert "line 9 reads 'line nine', the diff expects 'line 9'" in said, f"expected the line that differs, got {said!r}"


def test_a_hunk_applies_where_the_base_moved_it_but_not_where_it_matches_twice():
    """a hunk still applies when lines were added above it, and is refused when its lines match in two places"""
    diff = difference.parse(written(BASE, {**BASE, "app.py": BASE["app.py"].replace("line 10\n", "ten\n")}), "decoy k/x")
    moved = {**BASE, "app.py": "header\nheader 2\n" + BASE["app.py"]}
    assert difference.apply(diff, moved)["app.py"] == moved["app.py"].replace("line 10\n", "ten\n"), (
        "expected the hunk to apply two lines further down, where its lines now are")
    twice = {**BASE, "app.py": "".join(f"line {n}\n" for n in range(7, 14)) + "gap\n" + BASE["app.py"]}
    with pytest.raises(DifferenceError, match="hunk 1"):
        difference.apply(diff, twice)


@pytest.mark.parametrize("text, said", [
    ("base: reference\n\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", "first line should be the sentence"),
    ("Decoy: b, not a.\n\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", "no `base: reference` or `base: starter` line"),
    ("Decoy: b, not a.\nbase: upstream\n\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", "`base: upstream`"),
    ("Decoy: b, not a.\nbase: reference\nfuzz: 3\n\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", "'fuzz: 3' is not one of"),
    ("Decoy: b, not a.\nbase: reference\n\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n+b\n", "promises 2 old and 2 new"),
    ("Decoy: b, not a.\nbase: reference\n\nno diff at all\n", "holds no diff"),
], ids=["no sentence", "no base", "unknown base", "unknown field", "short hunk", "no diff"])
def test_a_malformed_difference_is_refused_in_one_line_saying_what_is_wrong(text, said):
    """a difference with no sentence, no base, an unknown field or a hunk shorter than it says is refused in one line"""
    with pytest.raises(DifferenceError) as refused:
        difference.parse(text, "decoy k/x")
    assert said in str(refused.value) and "\n" not in str(refused.value), (
        f"expected one line saying {said!r}, got {str(refused.value)!r}")


def test_a_decoy_that_does_not_apply_is_not_graded_and_the_check_names_the_decoy_and_the_hunk(tmp_path):
    """a check of a decoy whose diff no longer applies says so in one line, and grades nothing"""
    kata = catalogue.find("bound-semaphore", ROOT)
    broken = tmp_path / "rebuild_on_loop_id.diff"
    text = kata.decoy("rebuild_on_loop_id").read_text(encoding="utf-8")
    broken.write_text(text.replace("\n import logging\n", "\n import logging_renamed\n", 1), encoding="utf-8")
    result = runner.check(kata, broken)
    assert result.verdict == runner.ERROR and not result.tests, f"expected nothing graded, got {result.verdict}"
    assert "01_bound_semaphore.py: hunk 1 (@@ -11,7 +11,6 @@) does not match the reference fix" in result.problem, (
        f"expected the problem to name the file and the hunk, got {result.problem!r}")


def test_a_decoy_is_built_once_per_check_and_its_changed_files_are_named_as_the_decoys(monkeypatch):
    """a check builds the decoy from its base once, and names the file the diff changes <decoy NAME>/FILE"""
    kata = catalogue.find("bound-semaphore", ROOT)
    built = []
    apply = difference.apply
    monkeypatch.setattr(difference, "apply", lambda *args: built.append(args) or apply(*args))
    result = runner.check(kata, kata.decoy("rebuild_on_loop_id"), until_failed=True)
    assert len(built) == 1, f"expected the decoy to be built once for the check, it was built {len(built)} times"
    assert result.verdict == runner.FAILED, f"expected the decoy to fail, got {result.verdict}: {result.problem}"
    shown = "\n".join(f"{t.message}\n{t.where}\n{t.stacks}" for t in result.failures)
    assert "<decoy rebuild_on_loop_id>/01_bound_semaphore.py:" in shown and "loopkata-" not in shown, (
        f"expected the failure to name the changed file <decoy rebuild_on_loop_id>/01_bound_semaphore.py, "
        f"never a temporary path, got:\n{shown}")


def _project(tmp_path: Path) -> Path:
    """A copy of the project's katas, references and hidden tests, where the tool may write decoys."""
    root = tmp_path / "project"
    for part in ("katas", "solutions", "tests/hidden"):
        shutil.copytree(ROOT / part, root / part, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _loopkata(root: Path, *args) -> subprocess.CompletedProcess:
    env = {**os.environ, "LOOPKATA_ROOT": str(root), "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, "-m", "loopkata", *args], cwd=root, env=env, capture_output=True,
                          text=True, timeout=120)


def test_a_decoy_from_the_starter_is_built_from_the_starter_as_shipped_never_from_the_learners_edits(tmp_path):
    """a decoy whose base is the starter is built from the starter as shipped, even once the learner has edited katas/"""
    root = _project(tmp_path)
    shutil.copytree(ROOT / "tests" / "decoys" / "loop-id-reuse", root / "tests" / "decoys" / "loop-id-reuse")
    kata = catalogue.find("loop-id-reuse", root)
    decoy = kata.decoy("weakref_identity_no_close")
    assert alternatives.read(kata, decoy).base == "starter", "expected a decoy whose base is the starter"
    as_shipped = alternatives.files(kata, decoy)
    snapshots = tmp_path / "snapshots"  # what the learner's state folder keeps of the starter (this copy has no git)
    starters.remember(starters.shipped(kata), snapshots)
    kata.kata_path.write_text("# the learner's fix, half written\n", encoding="utf-8")
    assert alternatives.files(kata, decoy, snapshots) == as_shipped, (
        "expected the decoy built from the starter as shipped, not from the learner's edited katas/ file")
    with pytest.raises(StarterUnavailable):  # no git, no snapshot: refused rather than built from the learner's file
        alternatives.files(kata, decoy)


def test_decoy_new_writes_a_difference_that_builds_back_into_the_edited_copy(tmp_path):
    """`loopkata decoy new` writes the difference of an edited copy of a folder kata, and `decoy build` gives the copy back"""
    root = _project(tmp_path)
    edited = tmp_path / "edited"
    shutil.copytree(root / "solutions" / "14_pid1_sigterm", edited)
    script = (edited / "entrypoint.sh").read_text()
    (edited / "entrypoint.sh").write_text(script.replace("exec python service.py", "python service.py"))
    made = _loopkata(root, "decoy", "new", "pid1-sigterm", "no_exec", "--from", str(edited), "--base", "reference",
                     "--why", "Decoy: the script starts Python without exec, so the shell stays PID 1.")
    assert made.returncode == 0, f"expected the decoy to be written, got exit {made.returncode}:\n{made.stderr}"
    text = (root / "tests" / "decoys" / "pid1-sigterm" / "no_exec.diff").read_text()
    assert text.startswith("Decoy: the script starts Python without exec, so the shell stays PID 1.\nbase: reference\n")
    assert "-exec python service.py\n+python service.py\n" in text, f"expected the diff of entrypoint.sh, got:\n{text}"
    built = _loopkata(root, "decoy", "build", "pid1-sigterm", "no_exec", "--into", str(tmp_path / "built"))
    assert built.returncode == 0, built.stderr
    for f in catalogue.files_of(edited):
        assert (tmp_path / "built" / "no_exec" / f.relative_to(edited)).read_text() == f.read_text(), (
            f"expected the built decoy's {f.name} to be the edited copy's")
    again = _loopkata(root, "decoy", "new", "pid1-sigterm", "no_exec", "--from", str(edited), "--base", "reference",
                      "--why", "Decoy: again.")
    assert again.returncode == 1 and "exists already" in again.stderr, (
        f"expected an existing decoy to be kept without --replace, got exit {again.returncode}: {again.stderr}")
    bare = _loopkata(root, "variant", "new", "pid1-sigterm", "bare", "--from", str(edited), "--base", "reference",
                     "--why", "the sentence as an author types it, without its label.")
    assert bare.returncode == 0, bare.stderr
    head = (root / "tests" / "variants" / "pid1-sigterm" / "bare.diff").read_text().splitlines()[0]
    assert head == "Variant: the sentence as an author types it, without its label.", (
        f"expected the sentence to begin with its label, got {head!r}")


def test_check_names_a_decoy_by_its_name_and_says_which_names_there_are(tmp_path):
    """`loopkata check KATA --decoy NAME` grades that decoy; an unknown name gets the list of the kata's decoys"""
    graded = _loopkata(ROOT, "check", "bound-semaphore", "--decoy", "rebuild_on_loop_id", "--json")
    assert graded.returncode == 1 and '"verdict": "failed"' in graded.stdout, (
        f"expected the decoy graded and failed, got exit {graded.returncode}:\n{graded.stdout[-800:]}{graded.stderr}")
    unknown = _loopkata(ROOT, "check", "bound-semaphore", "--decoy", "rebuild_on_loop")
    assert unknown.returncode == 2 and "Did you mean 'rebuild_on_loop_id'?" in unknown.stderr, (
        f"expected exit 2 and the closest name, got exit {unknown.returncode}: {unknown.stderr}")


def test_the_check_panel_of_a_decoy_opens_on_its_sentence_with_its_diff_folded_under_it():
    """a notebook's check panel of a decoy starts with the decoy's sentence, and folds its diff under it"""
    from loopkata.panel import CheckPanel

    kata = catalogue.find("bound-semaphore", ROOT)
    decoy = kata.decoy("rebuild_on_loop_id")
    result = runner.CheckResult(kata=kata.id, impl=str(decoy), verdict=runner.FAILED)
    panel = CheckPanel(kata, result, decoy)
    bundle = panel._repr_mimebundle_()
    first = bundle["text/plain"].splitlines()[0]
    assert first == ("Decoy: rebuild the limiter whenever id(loop) changes. (decoy rebuild_on_loop_id, a difference "
                     "from the reference fix (solutions/01_bound_semaphore.py))"), f"expected the sentence first, got {first!r}"
    shown = bundle["text/html"]
    assert "<details class='loopkata-difference'" in shown and "-import weakref</span>" in shown, (
        "expected the decoy's diff, its removed lines marked, folded in the panel's html")
