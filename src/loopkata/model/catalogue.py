"""Reads katas/catalogue.toml: the one description of every kata.

The CLI, the notebook panel, the README table, the meta-test and CI all read
the catalogue through this module, so nothing about a kata is written twice.
"""
from __future__ import annotations

import difflib
import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from . import difference, nesting


class CatalogueError(ValueError):
    """No Loop Katas folder, or a catalogue that cannot be read; str() is one paragraph."""


class UnknownKata(LookupError):
    """A kata name that is not in the catalogue; str() is a paragraph for a learner."""


class UnknownAlternative(LookupError):
    """A decoy or variant name the kata does not have; str() is a paragraph."""


@dataclass(frozen=True)
class Symptom:
    """What the naive code must show: a verdict and, for failures, a message pattern."""

    verdict: str  # "failed", "hang", or "failed or hang" (a bug that shows either way, as the machine's timing has it)
    pattern: str = ""
    explain: str = ""

    def seen_in(self, test: dict) -> bool:
        if test.get("outcome") not in self.verdict.split(" or "):
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
    requires: tuple[str, ...] = ()  # ids of the katas whose ideas this one uses
    # kernel mechanisms the real reproduction needs (services.containers); without one, a fallback runs
    mechanisms: tuple[str, ...] = ()
    minutes: int | None = None  # an estimate of the whole pair: the notebook, then the kata
    memory_mib: int = 2048  # address-space cap of the grading process: a runaway kata is a verdict
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
        """The plausible wrong fixes, each a difference from the reference fix or the starter (a .diff file)."""
        return _entries(self.root / "tests" / "decoys" / self.id)

    @property
    def variants(self) -> list[Path]:
        """The other right fixes, each a difference from the reference fix or the starter (a .diff file)."""
        return _entries(self.root / "tests" / "variants" / self.id)

    def decoy(self, name: str) -> Path:
        """The decoy called `name` (its .diff file); UnknownAlternative if the kata has none of that name."""
        return _named(self, "decoy", self.decoys, name)

    def variant(self, name: str) -> Path:
        """The variant called `name` (its .diff file); UnknownAlternative if the kata has none of that name."""
        return _named(self, "variant", self.variants, name)


def files_of(path: Path) -> list[Path]:
    """The files of a kata, a fix, a decoy or a variant: the file itself, or every file in the
    folder (code, and the deploy files a kata may ship), never caches."""
    if not path.is_dir():
        return [path]
    return sorted(f for f in path.rglob("*") if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc")


def _named(kata: Kata, kind: str, paths: list[Path], name: str) -> Path:
    known = {p.stem: p for p in paths}
    wanted = name.removesuffix(".diff")
    if wanted in known:
        return known[wanted]
    close = difflib.get_close_matches(wanted, known, n=1)
    maybe = f" Did you mean '{close[0]}'?" if close else ""
    raise UnknownAlternative(f"{kata.id} has no {kind} called '{name}'.{maybe} Its {kind}s are: "
                             f"{', '.join(known) or 'none'} (`loopkata {kind} list {kata.id}`).")


def _entries(folder: Path) -> list[Path]:
    """Each .diff file is one alternative implementation (loopkata.model.difference describes it)."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.diff") if p.is_file() and not p.name.startswith(("_", ".")))


CATALOGUE = Path("katas") / "catalogue.toml"


def project_root() -> Path:
    """The Loop Katas folder: $LOOPKATA_ROOT if set, else the one around the current directory.

    Never the folder the package happens to be installed from: grading and
    recording progress against another checkout would be silent and wrong.
    """
    env = os.environ.get("LOOPKATA_ROOT")
    if env:
        root = Path(env)
        if not (root / CATALOGUE).is_file():
            what = "has no katas/catalogue.toml" if root.is_dir() else "does not exist"
            raise CatalogueError(
                f"LOOPKATA_ROOT is set to {root}, but that folder {what}, so it is not a Loop Katas "
                "folder. Point LOOPKATA_ROOT at the folder you cloned Loop Katas into, or unset it "
                "and run loopkata from inside that folder."
            )
        return root
    cwd = Path.cwd().resolve()
    for folder in (cwd, *cwd.parents):
        if (folder / CATALOGUE).is_file():
            return folder
    raise CatalogueError(
        f"{cwd} is not inside a Loop Katas folder: neither it nor any folder above it holds "
        "katas/catalogue.toml. Run loopkata from inside the folder you cloned Loop Katas into, "
        "or set LOOPKATA_ROOT to that folder."
    )


def describe_root(root: Path) -> str:
    """Which checkout is in use and why, so a learner never grades another copy unawares."""
    why = ", chosen by LOOPKATA_ROOT" if os.environ.get("LOOPKATA_ROOT") else ""
    return f"Loop Katas at {Path(root).resolve()} ({CATALOGUE.as_posix()}{why})"


def load(root: Path | None = None) -> tuple[Kata, ...]:
    """Every kata, sorted by number; CatalogueError (one paragraph) if the file is unusable."""
    root = Path(root) if root else project_root()
    path = root / CATALOGUE
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogueError(f"Could not read the catalogue {path}: {exc}.") from None
    return _parse(root, path, text)


# Keyed by the text too, so an edited catalogue is never served from the cache.
@lru_cache(maxsize=8)
def _parse(root: Path, path: Path, text: str) -> tuple[Kata, ...]:
    if nesting.toml_too_deep(text, nesting.TOML_DEPTH):  # tomllib recurses once per level
        raise CatalogueError(f"{path} is nested too deep to be read: it has arrays or inline tables more than "
                             f"{nesting.TOML_DEPTH} levels deep, and a catalogue needs 2.{_STAKES}")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:  # its message ends with "(at line L, column C)"
        raise CatalogueError(f"{path} is not valid TOML: {exc}.{_STAKES}") from None
    entries = _fields(data, _TOP, path, "its top level")["kata"]
    katas, seen = [], {}
    for n, entry in enumerate(entries, 1):
        where = f"the [[kata]] table number {n}"
        if _is_text(entry.get("id")):
            where = f"kata '{entry['id']}' ({where})"
        fields = _fields(entry, _KATA, path, where)
        fields["symptoms"] = tuple(
            Symptom(**_fields(t, _SYMPTOM, path, f"{where}, its [[kata.symptom]] number {i}"))
            for i, t in enumerate(fields.pop("symptom", []), 1)
        )
        fields["hints"] = tuple(
            Hint(**_fields(t, _HINT, path, f"{where}, its [[kata.hint]] number {i}"))
            for i, t in enumerate(fields.pop("hint", []), 1)
        )
        fields["services"] = tuple(fields.get("services", ()))
        fields["requires"] = tuple(fields.get("requires", ()))
        fields["mechanisms"] = tuple(fields.get("mechanisms", ()))
        # `loopkata check ID` and `check 3` look katas up by these.
        for key in ("id", "number"):
            if (key, fields[key]) in seen:
                raise _problem(path, where, key, "unique", f"the [[kata]] table number "
                               f"{seen[key, fields[key]]} already has {key} = {_shown(fields[key])}")
            seen[key, fields[key]] = n
        katas.append(Kata(root=root, **fields))
    numbers = {k.id: k.number for k in katas}
    for n, k in enumerate(katas, 1):
        for needed in k.requires:  # only an earlier kata: the order a learner follows stays the order of numbers
            if numbers.get(needed, k.number) >= k.number:
                found = "no kata has that id" if needed not in numbers else f"'{needed}' does not come before it"
                raise _problem(path, f"kata '{k.id}' (the [[kata]] table number {n})", "requires",
                               "a list of ids of earlier katas", f"it names '{needed}', and {found}")
    return tuple(sorted(katas, key=lambda k: k.number))


_STAKES = " Every kata is read from this file, so nothing can run until it is fixed."


def _problem(path: Path, where: str, key: str, expected: str, found: str) -> CatalogueError:
    return CatalogueError(f"{path} has a problem in {where}: `{key}` should be {expected}, but {found}.{_STAKES}")


def _shown(value) -> str:
    """A value as TOML writes it, with its TOML type: `"15" (a string)`."""
    kinds = {bool: "a boolean", str: "a string", int: "an integer", float: "a float", list: "an array", dict: "a table"}
    if isinstance(value, bool):
        text = "true" if value else "false"
    else:
        text = f'"{value}"' if isinstance(value, str) else repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"{text} ({kinds.get(type(value), type(value).__name__)})"


# The kernel mechanisms a kata may need (loopkata.services.containers says what each is).
MECHANISM_NAMES = ("pid-namespace", "cpu-limit", "memory-limit")
_MECHANISMS = MECHANISM_NAMES


def _is_text(v) -> bool:
    return isinstance(v, str) and v.strip() != ""


def _is_seconds(low: float, high: float, low_included: bool = True):
    """A check of a finite number of seconds from `low` (or above it) to `high`: a budget of inf
    would be no deadline at all, and the re-grade's backstop is derived from it."""
    def check(v) -> bool:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            return False
        return (low <= v if low_included else low < v) and v <= high
    return check


def _is_regex(v) -> bool | str:
    """True, or why the pattern does not compile (it would otherwise fail every later check)."""
    if not isinstance(v, str):
        return False
    try:
        re.compile(v)
    except re.error as exc:
        return f"{_shown(v)} does not compile: {exc}"
    return True


def _is_tables(v) -> bool:
    return isinstance(v, list) and all(isinstance(t, dict) for t in v)


# field: (check, what it should be, required). A check returns True, False, or why not.
_TOP = {"kata": (lambda v: _is_tables(v) and bool(v), "at least one [[kata]] table", True)}
_KATA = {
    "id": (_is_text, "a non-empty string", True),
    "number": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer", True),
    **{k: (_is_text, "a non-empty string", True) for k in ("title", "summary", "path", "notebook", "tests")},
    # The longest budget is 90 s (kata 13); 600 s bounds what one check can hold a room for.
    "budget_seconds": (_is_seconds(1, 600), "a positive number of seconds from 1 to 600, like 15", True),
    "hang_after": (_is_seconds(0, 600, low_included=False), "a positive number of seconds up to 600, like 0.5",
                   True),
    "memory_mib": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 256,
                   "a whole number of MiB, at least 256", False),
    "services": (lambda v: isinstance(v, list) and all(isinstance(s, str) for s in v), "an array of strings", False),
    "requires": (lambda v: isinstance(v, list) and all(_is_text(s) for s in v), "an array of kata ids", False),
    "mechanisms": (lambda v: isinstance(v, list) and all(s in _MECHANISMS for s in v),
                   f"an array of kernel mechanisms ({', '.join(_MECHANISMS)})", False),
    "minutes": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0,
                "a whole number of minutes, like 25", False),
    "symptom": (_is_tables, "[[kata.symptom]] tables", False),
    "hint": (_is_tables, "[[kata.hint]] tables", False),
}
_SYMPTOM = {
    "verdict": (lambda v: v in ("failed", "hang", "failed or hang"), '"failed", "hang" or "failed or hang"', True),
    "pattern": (_is_regex, "a regular expression", False),
    "explain": (lambda v: isinstance(v, str), "a string", False),
}
_HINT = {
    "text": (_is_text, "a non-empty string", True),
    "when": (_is_regex, "a regular expression", False),
}


def _fields(table: dict, schema: dict, path: Path, where: str) -> dict:
    """A copy of `table`, once every field is known, present when required, and of its type."""
    for key in table:
        if key not in schema:
            close = difflib.get_close_matches(key, schema, n=1)
            maybe = f"; perhaps you meant `{close[0]}`" if close else ""
            raise _problem(path, where, key, f"one of the known fields ({', '.join(schema)})", f"it is not{maybe}")
    for key, (check, expected, required) in schema.items():
        if key not in table:
            if required:
                raise _problem(path, where, key, expected, "it is missing")
            continue
        ok = check(table[key])
        if ok is not True:
            raise _problem(path, where, key, expected, ok or f"it is {_shown(table[key])}")
    return dict(table)


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


def wrong_fixes_table(katas=None) -> str:
    """The facilitator guide's table of wrong first fixes, from each decoy's own sentence
    (the first line of its difference; a test keeps docs/workshop.md in step)."""
    katas = load() if katas is None else katas
    rows = ["| kata | a wrong first fix people write | the decoy |", "| --- | --- | --- |"]
    for k in katas:
        for decoy in k.decoys:
            said = difference.read(decoy).sentence.removeprefix("Decoy:").strip()
            rows.append(f"| {k.number:02d} `{k.id}` | {said} | `tests/decoys/{k.id}/{decoy.name}` |")
    return "\n".join(rows)
