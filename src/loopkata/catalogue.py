"""Reads katas/catalogue.toml: the one description of every kata.

The CLI, the notebook panel, the README table, the meta-test and CI all read
the catalogue through this module, so nothing about a kata is written twice.
"""
from __future__ import annotations

import difflib
import os
import re
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path


class UnknownKata(LookupError):
    """A kata name that is not in the catalogue; str() is a paragraph for a learner."""


@dataclass(frozen=True)
class Symptom:
    """What the naive code must show: a verdict and, for failures, a message pattern."""

    verdict: str  # "failed" or "hang"
    pattern: str = ""
    explain: str = ""

    def seen_in(self, test: dict) -> bool:
        if test.get("outcome") != self.verdict:
            return False
        return not self.pattern or re.search(self.pattern, test.get("message", "")) is not None


@dataclass(frozen=True)
class Hint:
    text: str
    when: str = ""  # regex over the failure text; empty means "any failure"

    def matches(self, failure_text: str) -> bool:
        return not self.when or re.search(self.when, failure_text or "") is not None


@dataclass(frozen=True)
class Kata:
    id: str
    number: int
    title: str
    summary: str
    path: str  # relative to katas/ and, mirrored, to solutions/
    notebook: str  # relative to notebooks/
    tests: str  # relative to tests/
    budget_seconds: float
    hang_after: float
    symptoms: tuple[Symptom, ...]
    hints: tuple[Hint, ...]
    services: tuple[str, ...] = ()
    root: Path = field(default=Path("."), compare=False, repr=False)

    @property
    def label(self) -> str:
        return f"{self.number:02d} {self.id}"

    @property
    def kata_path(self) -> Path:
        return self.root / "katas" / self.path

    @property
    def solution_path(self) -> Path:
        return self.root / "solutions" / self.path

    @property
    def notebook_path(self) -> Path:
        return self.root / "notebooks" / self.notebook

    @property
    def tests_path(self) -> Path:
        return self.root / "tests" / self.tests

    @property
    def decoys(self) -> list[Path]:
        return _entries(self.root / "tests" / "decoys" / self.id)

    @property
    def variants(self) -> list[Path]:
        return _entries(self.root / "tests" / "variants" / self.id)


def _entries(folder: Path) -> list[Path]:
    """Each .py file or sub-folder is one alternative implementation."""
    if not folder.is_dir():
        return []
    return sorted(
        p for p in folder.iterdir()
        if (p.suffix == ".py" or p.is_dir()) and not p.name.startswith(("_", "."))
    )


def project_root() -> Path:
    """The folder holding katas/catalogue.toml: $LOOPKATA_ROOT, else near this package, else above cwd."""
    env = os.environ.get("LOOPKATA_ROOT")
    candidates = [Path(env)] if env else []
    candidates.append(Path(__file__).resolve().parents[2])
    cwd = Path.cwd().resolve()
    candidates += [cwd, *cwd.parents]
    for c in candidates:
        if (c / "katas" / "catalogue.toml").is_file():
            return c
    raise FileNotFoundError(
        "Could not find katas/catalogue.toml. Run loopkata from inside the Loop Katas "
        "folder, or set LOOPKATA_ROOT to it."
    )


@lru_cache(maxsize=None)
def load(root: Path | None = None) -> tuple[Kata, ...]:
    root = Path(root) if root else project_root()
    data = tomllib.loads((root / "katas" / "catalogue.toml").read_text(encoding="utf-8"))
    katas = []
    for entry in data["kata"]:
        entry = dict(entry)
        entry["symptoms"] = tuple(Symptom(**s) for s in entry.pop("symptom", []))
        entry["hints"] = tuple(Hint(**h) for h in entry.pop("hint", []))
        entry["services"] = tuple(entry.get("services", ()))
        katas.append(Kata(root=root, **entry))
    return tuple(sorted(katas, key=lambda k: k.number))


def find(name: str, root: Path | None = None) -> Kata:
    """Look a kata up by id ("bound-semaphore"), number ("1", "01") or label."""
    katas = load(root)
    wanted = name.strip().lower().replace("_", "-")
    for k in katas:
        if wanted in (k.id, str(k.number), f"{k.number:02d}", f"{k.number:02d}-{k.id}"):
            return k
    close = difflib.get_close_matches(wanted, [k.id for k in katas], n=1)
    maybe = f" Did you mean '{close[0]}'?" if close else ""
    raise UnknownKata(
        f"There is no kata called '{name}'.{maybe} The katas are: "
        + ", ".join(k.id for k in katas)
        + ". `loopkata list` shows them with their status."
    )


def for_tests_file(path: Path) -> Kata | None:
    """The kata whose hidden tests live in `path` (used by the pytest plugin)."""
    path = Path(path).resolve()
    for k in load():
        if k.tests_path.resolve() == path:
            return k
    return None


def markdown_table(katas=None) -> str:
    """The README's kata table, made from the catalogue (a test keeps the README in step)."""
    katas = load() if katas is None else katas
    rows = ["| # | Kata | Notebook | What goes wrong |", "| --- | --- | --- | --- |"]
    for k in katas:
        rows.append(
            f"| {k.number:02d} | `{k.id}` | [{k.title}](notebooks/{k.notebook}) | {k.summary} |"
        )
    return "\n".join(rows)
