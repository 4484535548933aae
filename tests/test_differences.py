"""Decoys and variants as differences from their base: the file and its strict applier.

A decoy or a variant can be written as a unified diff against the kata's reference fix or its
starter, headed by the sentence that says what it changes (loopkata.model.difference).
"""
import pytest

from loopkata.model import difference
from loopkata.model.difference import DifferenceError

BASE = {"app.py": "".join(f"line {n}\n" for n in range(1, 21)), "Procfile": "web: serve\nworker: work\n"}


def written(base: dict, edited: dict, sentence="Decoy: line 10 says ten, which is wrong.", kind="reference") -> str:
    return difference.render(sentence, kind, difference.unified(base, edited))


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
