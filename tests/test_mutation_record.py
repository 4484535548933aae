"""The mutation record (benchmarks/mutation_score.json) and the recorded equivalent mutants
(tests/hidden/mutation/<kata-id>.toml) stay in step with the reference fixes they were made from.

`make mutation` is an authoring step, not part of the suite; this test only reads what it recorded.
"""
from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from loopkata.authoring.mutation import digests, mutated_files
from loopkata.model import catalogue

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "benchmarks" / "mutation_score.json"
EQUIVALENTS = ROOT / "tests" / "hidden" / "mutation"
KATAS = catalogue.load()


def recorded() -> dict:
    try:
        return json.loads(RECORD.read_text(encoding="utf-8")).get("katas", {})
    except (OSError, ValueError):
        return {}


def test_every_mutation_run_was_of_the_reference_as_it_is_now():
    """a kata whose reference fix changed since its last mutation run is named, so its score and equivalents are redone"""
    katas = {k.id: k for k in KATAS}
    stale = []
    for kata_id, figures in recorded().items():
        assert kata_id in katas, f"{RECORD.name} has figures for {kata_id}, which the catalogue does not list"
        now = digests(katas[kata_id])
        if figures.get("reference_sha256") != now:
            changed = sorted(set(now) ^ set(figures.get("reference_sha256", {}))
                             | {f for f in now if figures.get("reference_sha256", {}).get(f) not in (None, now[f])})
            stale.append(f"{kata_id} ({', '.join(changed) or 'its files'})")
    assert not stale, ("the reference fix of " + "; ".join(stale) + " changed since its mutation run: run "
                       "`make mutation KATA=<id>` and review its survivors and tests/hidden/mutation/<id>.toml")


def _equivalent_files():
    return sorted(EQUIVALENTS.glob("*.toml")) if EQUIVALENTS.exists() else []


@pytest.mark.parametrize("path", _equivalent_files(), ids=lambda p: p.stem)
def test_recorded_equivalents_name_lines_of_the_reference_as_it_is_now(path):
    """every recorded equivalent mutant names a line of the current reference, the mutation and why no behaviour differs"""
    katas = {k.id: k for k in KATAS}
    assert path.stem in katas, f"{path.name} is named after no kata in the catalogue"
    kata = katas[path.stem]
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    assert data.get("reference_sha256") == digests(kata), (
        f"the reference fix of {kata.id} changed since {path.name} was written: run `make mutation KATA={kata.id}` "
        "and check every equivalent it records against the new code")
    files = mutated_files(kata)
    for e in data.get("equivalent", []):
        where = f"{path.name}: {e.get('file')}:{e.get('line')} {e.get('operator')}"
        assert {"file", "line", "operator", "original", "mutated", "why"} <= set(e), f"{where} lacks a field"
        assert e["file"] in files, f"{where}: the reference has no such file"
        lines = files[e["file"]].read_text(encoding="utf-8").splitlines()
        assert 1 <= e["line"] <= len(lines) and lines[e["line"] - 1].strip() == e["original"], (
            f"{where}: the line no longer reads {e['original']!r}")
        assert e["why"].strip().endswith("."), f"{where}: say in one sentence why no behaviour differs"
