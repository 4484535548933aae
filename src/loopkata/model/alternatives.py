"""A kata's decoys (plausible wrong fixes) and variants (other right fixes): found by name, built, written.

Each is a difference from the kata's reference fix or its starter (`loopkata.model.difference`
describes the file), in `tests/decoys/<kata>/<name>.diff` or `tests/variants/<kata>/<name>.diff`.
Everything that runs one (the grader, the scan's tests, the notebooks) builds it from its base
here, into a folder of its own, and names it by kata and name, never by a path into tests/.
"""
from __future__ import annotations

from pathlib import Path

from . import catalogue, difference, starters
from .catalogue import Kata, UnknownAlternative  # noqa: F401  (raised by find, for the callers to catch)
from .difference import Difference, DifferenceError
from .starters import StarterUnavailable

KINDS = {"decoy": "decoys", "variant": "variants"}
SUFFIX = ".diff"
SCREEN = 60  # lines: a difference longer than this no longer reads in one screen


def folder(kata: Kata, kind: str) -> Path:
    return kata.root / "tests" / KINDS[kind] / kata.id


def find(kata: Kata, kind: str, name: str) -> Path:
    """The file of `kata`'s decoy or variant called `name` (with or without .diff); UnknownAlternative if none."""
    return kata.decoy(name) if kind == "decoy" else kata.variant(name)


def kind_of(kata: Kata, path: Path) -> str | None:
    """'decoy' or 'variant' for a file of the kata's tests/decoys or tests/variants folder, else None."""
    path = Path(path).resolve()
    return next((kind for kind in KINDS if path.parent == folder(kata, kind).resolve()), None)


def is_difference(path) -> bool:
    return Path(path).suffix == SUFFIX


def label(kata: Kata, path: Path) -> str:
    """How a difference is named in words: 'decoy rebuild_on_loop_id', or its file's name."""
    kind = kind_of(kata, path)
    return f"{kind} {Path(path).stem}" if kind else Path(path).name


def read(kata: Kata, path: Path) -> Difference:
    """The difference in `path`; DifferenceError (one line naming it) if it cannot be read."""
    kind = kind_of(kata, path)
    name = f"{kind} {kata.id}/{Path(path).stem}" if kind else str(path)
    return difference.read(path, name)


def base_path(kata: Kata, diff: Difference) -> Path:
    """Where the base is shipped: solutions/ for the reference fix, katas/ for the starter (which a learner
    edits: the starter a difference applies to is always the one shipped, `base_files`)."""
    return kata.solution_path if diff.base == "reference" else kata.kata_path


def base_label(kata: Kata, diff: Difference) -> str:
    shown = base_path(kata, diff).relative_to(kata.root).as_posix()
    return f"the {'reference fix' if diff.base == 'reference' else 'starter as shipped'} ({shown})"


def base_files(kata: Kata, base: str, snapshots: Path | None = None) -> dict[str, str]:
    """The files of the reference fix, or of the starter as shipped (never the learner's edits: from katas/ while
    untouched, else from git or the `snapshots` folder; StarterUnavailable if there is no true copy)."""
    if base == "reference":
        return files_in(kata.solution_path)
    shipped = starters.shipped(kata, snapshots)
    inside = Path(kata.path)
    return {(rel.relative_to(inside).as_posix() if kata.kata_path.is_dir() else rel.name): data.decode("utf-8")
            for rel, data in shipped.items()}


def files_in(path: Path) -> dict[str, str]:
    """A kata's, a fix's or a copy's files as text, by their path inside it (a one-file kata: its name)."""
    path = Path(path)
    if path.is_dir():
        return {f.relative_to(path).as_posix(): f.read_text(encoding="utf-8") for f in catalogue.files_of(path)}
    return {path.name: path.read_text(encoding="utf-8")}


def files(kata: Kata, path: Path, snapshots: Path | None = None) -> dict[str, str]:
    """The files of the implementation the difference in `path` makes from its base."""
    return built_from_base(kata, path, snapshots)[0]


def built_from_base(kata: Kata, path: Path, snapshots: Path | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """(the files the difference in `path` makes, the files of its base): DifferenceError if it does not apply."""
    diff = read(kata, path)
    base = base_files(kata, diff.base, snapshots)
    return difference.apply(diff, base, base_label(kata, diff)), base


def own_files(kata: Kata, path: Path, snapshots: Path | None = None) -> dict[str, str]:
    """The files where the implementation the difference makes differs from the reference fix: what it
    changes when laid over another copy of a folder kata (a notebook lays a decoy over the starter)."""
    reference = files_in(kata.solution_path)
    return {rel: text for rel, text in files(kata, path, snapshots).items() if reference.get(rel) != text}


def target_in(kata: Kata, path: Path, parent: Path) -> Path:
    """Where `build` puts the implementation in `parent`: a file or a folder named after the difference."""
    suffix = "" if kata.solution_path.is_dir() else kata.solution_path.suffix
    return Path(parent) / (Path(path).stem + suffix)


def build(kata: Kata, path: Path, parent: Path, snapshots: Path | None = None) -> Path:
    """Write the implementation the difference in `path` makes into `parent`; its file or folder.

    DifferenceError (one line naming the difference and the hunk) if it does not apply."""
    built = files(kata, path, snapshots)
    target = target_in(kata, path, parent)
    if kata.solution_path.is_dir():
        for rel, text in built.items():
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            (target / rel).write_text(text, encoding="utf-8")
    else:
        (text,) = built.values()
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return target


def make(kata: Kata, kind: str, name: str, edited: Path, base: str, sentence: str, notes: str = "",
         wrong_on_python: str | None = None, replace: bool = False) -> Path:
    """Write `kata`'s decoy or variant `name`, the difference between its base and the edited copy.

    `edited` is a file (a one-file kata) or a folder; a file the folder lacks is the base's, so a
    copy may hold only the files it changes. The written difference is read back and applied to
    its base before this returns; DifferenceError or FileExistsError (one line) otherwise.
    """
    if not name or Path(name).name != name or name.startswith(("_", ".")):
        raise DifferenceError(f"'{name}' cannot name a {kind}: use a file name such as one_loop_per_thread")
    target = folder(kata, kind) / (name.removesuffix(SUFFIX) + SUFFIX)
    if target.exists() and not replace:
        raise FileExistsError(f"{target.relative_to(kata.root)} exists already; give --replace to write it again")
    folder_kata = kata.solution_path.is_dir()
    original = base_files(kata, base)
    edited = Path(edited)
    if edited.is_dir() != folder_kata:
        raise DifferenceError(f"{kata.id} is a {'folder' if folder_kata else 'one-file'} kata: give "
                              f"{'a folder' if folder_kata else 'one file'} as the edited copy, not {edited}")
    copy = files_in(edited)
    changed = {**original, **copy} if folder_kata else {kata.solution_path.name: next(iter(copy.values()))}
    label = f"{kind.capitalize()}: "  # how every sentence begins, and what the workshop's table leaves off
    sentence = sentence if sentence.strip().startswith(label) else label + sentence.strip()
    text = difference.render(sentence, base, difference.unified(original, changed), notes, wrong_on_python)
    diff = difference.parse(text, f"{kind} {kata.id}/{target.stem}")
    if difference.apply(diff, original) != changed:  # a guard on this module's own diff
        raise DifferenceError(f"{kind} {kata.id}/{target.stem}: the diff written does not give the edited copy back")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return target


def problems(kata: Kata) -> list[str]:
    """One line for each of the kata's decoys and variants that cannot be read or no longer applies."""
    found = []
    for path in [*kata.decoys, *kata.variants]:
        try:
            files(kata, path)
        except (DifferenceError, StarterUnavailable) as exc:
            found.append(f"{label(kata, path)}: {exc}" if isinstance(exc, StarterUnavailable) else str(exc))
    return found

