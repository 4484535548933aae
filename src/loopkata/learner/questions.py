"""Reads notebooks/questions.toml: every prediction question, its answer and why.

A notebook cell calls `ask("02-which-loop")`, so the answer is never in the
source of the cell the learner runs. A test checks every id a notebook asks
for is here, and every question here is asked by its notebook.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..model.catalogue import project_root

FILE = Path("notebooks") / "questions.toml"


class UnknownQuestion(LookupError):
    """str() is one paragraph."""


@dataclass(frozen=True)
class Question:
    id: str
    notebook: str
    prompt: str
    options: tuple[str, ...]
    answer: str
    why: str


def load(root: Path | None = None) -> dict[str, Question]:
    path = (root or project_root()) / FILE
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    found = {}
    for entry in data.get("question", []):
        q = Question(**{**entry, "options": tuple(entry["options"])})
        if q.answer not in q.options:
            raise ValueError(f"{FILE}: question {q.id!r}: its answer is not one of its options")
        found[q.id] = q
    return found


def find(qid: str, root: Path | None = None) -> Question:
    questions = load(root)
    if qid not in questions:
        raise UnknownQuestion(
            f"There is no question '{qid}' in {FILE}. The questions are: {', '.join(sorted(questions))}."
        )
    return questions[qid]
