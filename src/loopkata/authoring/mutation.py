"""Which files of a kata's reference fix its mutation run mutates (benchmarks/mutation_score.py),
and their digests, which tests/test_mutation_record.py compares with the last run's.

The score measures how much of the *fix* the hidden tests pin down. A file of the reference that
is byte for byte the shipped starter's (an app the kata gives, a feed client the learner is told
to leave as it is, an `__init__.py` that only documents) is given code, not the fix: its mutants
would measure the scaffolding. Every other .py file of the reference is mutated, whole.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from ..model import starters


def _given(kata) -> set[str]:
    """sha256 of each shipped starter file of `kata`, by its path under the kata."""
    prefix = Path(kata.path)
    found = {}
    for path, entry in starters.expected(kata).items():
        name = path.name if path == prefix else str(path.relative_to(prefix)) if path.is_relative_to(prefix) else None
        if name is not None:
            found[name] = entry.get("sha256")
    return found


def mutated_files(kata) -> dict[str, Path]:
    """The .py files of the reference fix that its mutation run mutates, by their name under the fix:
    every one that differs from the shipped starter's file of the same name."""
    path = kata.solution_path
    if path.is_file():
        return {path.name: path}
    given = _given(kata)
    files = {str(p.relative_to(path)): p for p in sorted(path.rglob("*.py")) if "__pycache__" not in p.parts}
    return {name: p for name, p in files.items() if given.get(name) != hashlib.sha256(p.read_bytes()).hexdigest()}


def digests(kata) -> dict[str, str]:
    """sha256 of every file mutated_files() names."""
    return {name: hashlib.sha256(p.read_bytes()).hexdigest() for name, p in mutated_files(kata).items()}


def shown_score(score: float, survived: int) -> str:
    """A score as the tables print it: 100% only when no mutant survived, else rounded down to a tenth of a
    percent (one survivor in 400 reads 99.7%, not 100%)."""
    if not survived:
        return f"{score:.0%}"
    tenths = int(score * 1000) / 10
    return f"{tenths:.1f}%" if tenths % 1 else f"{tenths:.0f}%"
