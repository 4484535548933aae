"""A decoy or a variant as a difference from its base: a unified diff with a header in words.

A decoy (a plausible wrong fix) or a variant (another right fix) is stored as the lines where it
differs from the kata's reference fix or from its starter, never as a copy of them, so a reader
sees at once what it changes, and a change to the base reaches every decoy by itself. The file,
`tests/decoys/<kata>/<name>.diff` or `tests/variants/<kata>/<name>.diff`:

    Decoy: build a new limiter every time one is asked for.
    base: reference
    wrong_on_python: >=3.12

    Nothing outlives a loop, so nothing can be bound to a dead one, but nothing
    is shared either: every step gets its own semaphore. The limit no longer limits.

    --- a/01_bound_semaphore.py
    +++ b/01_bound_semaphore.py
    @@ -44,7 +44,4 @@ class ConcurrencyLimiter:
    ...

- The first line is the sentence: what it changes, and why that is wrong (or still right).
- `base:` says what the diff applies to: `reference` (solutions/) or `starter` (katas/, as shipped).
- `wrong_on_python:` (decoys only, optional): the Pythons it is wrong on, a version specifier;
  on the others it must pass (tests/test_katas_proven.py).
- Then, after a blank line, any prose that says more; it ends at the first line that starts
  with `--- `, where the diff begins (a unified diff leaves the text before it free).
- The diff names files as `a/PATH` and `b/PATH`, PATH relative to the base: the file's own name
  for a one-file kata, its path inside the folder for a folder kata. `/dev/null` on the `---`
  side adds a file, on the `+++` side removes one. One diff may change several files.

`apply` is strict: a hunk applies only where every line it keeps or removes reads exactly as it
says, at the line it names or, when the base has moved, at the one other place it matches; else
it is refused with one line naming the difference and the hunk. Nothing here runs `patch`.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path

BASES = ("reference", "starter")
FIELDS = ("base", "wrong_on_python")
NO_NEWLINE = "\\ No newline at end of file"
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")


class DifferenceError(ValueError):
    """A difference that cannot be read or does not apply to its base; str() is one line."""


@dataclass(frozen=True)
class Hunk:
    old_start: int
    old_count: int
    new_start: int
    new_count: int
    lines: tuple[str, ...]  # each with its mark (" ", "-", "+") and its line ending, if it has one
    header: str = ""

    @property
    def title(self) -> str:
        old = f"{self.old_start},{self.old_count}" if self.old_count != 1 else str(self.old_start)
        new = f"{self.new_start},{self.new_count}" if self.new_count != 1 else str(self.new_start)
        return f"@@ -{old} +{new} @@"

    @property
    def old(self) -> list[str]:
        return [line[1:] for line in self.lines if line[0] in " -"]

    @property
    def new(self) -> list[str]:
        return [line[1:] for line in self.lines if line[0] in " +"]


@dataclass(frozen=True)
class FileChange:
    old_path: str | None  # None: the file is added
    new_path: str | None  # None: the file is removed
    hunks: tuple[Hunk, ...]

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or ""


@dataclass(frozen=True)
class Difference:
    sentence: str
    base: str
    changes: tuple[FileChange, ...]
    notes: str = ""
    wrong_on_python: str | None = None
    name: str = field(default="the difference", compare=False)  # how errors name it

    @property
    def paths(self) -> list[str]:
        return [c.path for c in self.changes]


def read(path: Path, name: str | None = None) -> Difference:
    """The difference stored in `path`; DifferenceError (one line) if it cannot be read."""
    name = name or str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DifferenceError(f"{name}: could not be read ({exc})") from None
    return parse(text, name)


def parse(text: str, name: str = "the difference") -> Difference:
    """Read a difference's header and its diff; DifferenceError (one line) if either is malformed."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith("--- ")), None)
    if start is None:
        raise DifferenceError(f"{name}: holds no diff (no line starts with '--- ')")
    head = [line.rstrip("\r\n") for line in lines[:start]]
    while head and not head[0].strip():
        head.pop(0)
    if not head or ":" in head[0] and head[0].split(":", 1)[0].strip() in FIELDS:
        raise DifferenceError(f"{name}: its first line should be the sentence saying what it changes and why, "
                              "before the base: line")
    sentence, values, rest = head[0].strip(), {}, head[1:]
    while rest and rest[0].strip():
        key, colon, value = rest[0].partition(":")
        if not colon or key.strip() not in FIELDS:
            raise DifferenceError(f"{name}: header line {rest[0]!r} is not one of the fields "
                                  f"({', '.join(f'{f}: ...' for f in FIELDS)}); prose comes after a blank line")
        values[key.strip()] = value.strip()
        rest.pop(0)
    base = values.get("base")
    if base not in BASES:
        raise DifferenceError(f"{name}: the header says `base: {base}`, expected `base: reference` or `base: starter`"
                              if base else f"{name}: the header has no `base: reference` or `base: starter` line")
    notes = "\n".join(rest).strip()
    return Difference(sentence=sentence, base=base, changes=_changes(lines, start, name), notes=notes,
                      wrong_on_python=values.get("wrong_on_python") or None, name=name)


def _strip_prefix(path: str, prefix: str) -> str | None:
    path = path.split("\t")[0].strip()
    if path == "/dev/null":
        return None
    return path.removeprefix(prefix)


def _changes(lines: list[str], i: int, name: str) -> tuple[FileChange, ...]:
    changes = []
    while i < len(lines):
        line = lines[i].rstrip("\r\n")
        if not line.strip():
            i += 1
            continue
        if not line.startswith("--- ") or i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
            raise DifferenceError(f"{name}: line {i + 1} ({line!r}) should start a file's diff with '--- a/PATH' "
                                  "and '+++ b/PATH'")
        old, new = _strip_prefix(line[4:], "a/"), _strip_prefix(lines[i + 1].rstrip("\r\n")[4:], "b/")
        if old is None and new is None:
            raise DifferenceError(f"{name}: line {i + 1}: both sides of a file's diff are /dev/null")
        i += 2
        hunks = []
        while i < len(lines) and lines[i].startswith("@@"):
            hunk, i = _hunk(lines, i, name, new or old)
            hunks.append(hunk)
        if not hunks and old and new:  # an empty file added or removed has none
            raise DifferenceError(f"{name}: the diff of {new or old} has no hunk (no '@@ -l,n +l,n @@' line)")
        changes.append(FileChange(old, new, tuple(hunks)))
    return tuple(changes)


def _hunk(lines: list[str], i: int, name: str, path: str) -> tuple[Hunk, int]:
    m = _HUNK.match(lines[i].rstrip("\r\n"))
    if not m:
        raise DifferenceError(f"{name}: line {i + 1} ({lines[i].rstrip()!r}) is not a hunk header '@@ -l,n +l,n @@'")
    old_start, new_start = int(m[1]), int(m[3])
    old_count = 1 if m[2] is None else int(m[2])
    new_count = 1 if m[4] is None else int(m[4])
    title, i = lines[i].rstrip("\r\n"), i + 1
    body, old_seen, new_seen = [], 0, 0
    while old_seen < old_count or new_seen < new_count:
        if i >= len(lines):
            raise DifferenceError(f"{name}: hunk {title} of {path} ends early: it promises {old_count} old and "
                                  f"{new_count} new lines, the file ends after {old_seen} and {new_seen}")
        line = lines[i]
        mark = line[0] if line.strip("\r\n") else " "  # an editor may strip the space of an empty context line
        if mark not in " -+":
            raise DifferenceError(f"{name}: line {i + 1} ({line.rstrip()!r}) in hunk {title} of {path} starts with "
                                  f"neither ' ', '-' nor '+'")
        body.append(line if line.strip("\r\n") else " " + line)
        old_seen += mark in " -"
        new_seen += mark in " +"
        i += 1
        if i < len(lines) and lines[i].rstrip("\r\n") == NO_NEWLINE:
            body[-1] = body[-1].rstrip("\n")
            i += 1
    if old_seen != old_count or new_seen != new_count:
        raise DifferenceError(f"{name}: hunk {title} of {path} promises {old_count} old and {new_count} new lines, "
                              f"it holds {old_seen} and {new_seen}")
    return Hunk(old_start, old_count, new_start, new_count, tuple(body), m[5].strip()), i


def apply(difference: Difference, base: dict[str, str], what: str = "its base") -> dict[str, str]:
    """The files of `base` (relative path -> text) with `difference` applied.

    Strict: DifferenceError (one line naming the difference, the file and the hunk) when a file
    it changes is missing, one it adds exists, or a hunk's lines are not in the file as it says.
    """
    files = dict(base)
    for change in difference.changes:
        where = f"{difference.name}: {change.path}"
        if change.old_path is None:
            if change.new_path in files:
                raise DifferenceError(f"{where}: the diff adds this file, but {what} already has it")
            old = []
        else:
            if change.old_path not in files:
                raise DifferenceError(f"{where}: {what} has no file {change.old_path} (it has "
                                      f"{', '.join(sorted(files)) or 'none'})")
            old = files.pop(change.old_path).splitlines(keepends=True)
        new = _patched(old, change, where, what)
        if change.new_path is not None:
            files[change.new_path] = "".join(new)
        elif new:
            raise DifferenceError(f"{where}: the diff removes this file but leaves {len(new)} of its lines")
    return files


def _patched(old: list[str], change: FileChange, where: str, what: str) -> list[str]:
    out, done = [], 0  # done: how many of `old`'s lines are copied or consumed
    for n, hunk in enumerate(change.hunks, 1):
        wanted = hunk.old
        at = _place(old, wanted, hunk, done)
        if at is None:
            raise DifferenceError(f"{where}: hunk {n} ({hunk.title}) does not match {what}: "
                                  f"{_mismatch(old, wanted, hunk)}")
        out += old[done:at] + hunk.new
        done = at + len(wanted)
    return out + old[done:]


def _place(old: list[str], wanted: list[str], hunk: Hunk, after: int) -> int | None:
    """Where the hunk's kept and removed lines stand in `old` (at or after `after`): at the line the
    hunk names, else at the one other place they match; None if nowhere or in several places."""
    stated = hunk.old_start - 1 if hunk.old_count else hunk.old_start
    if stated >= after and old[stated:stated + len(wanted)] == wanted:
        return stated
    if not wanted:
        return None
    found = [i for i in range(after, len(old) - len(wanted) + 1) if old[i:i + len(wanted)] == wanted]
    return found[0] if len(found) == 1 else None


def _mismatch(old: list[str], wanted: list[str], hunk: Hunk) -> str:
    """One clause: the first line at the hunk's stated place that differs from what it expects."""
    stated = hunk.old_start - 1 if hunk.old_count else hunk.old_start
    for k, expected in enumerate(wanted):
        actual = old[stated + k] if stated + k < len(old) else None
        if actual != expected:
            if actual is None:
                return f"line {stated + k + 1} should read {_shown(expected)}, but the file ends at line {len(old)}"
            return f"line {stated + k + 1} reads {_shown(actual)}, the diff expects {_shown(expected)}"
    return "its lines match in more than one other place, so where it belongs is not clear"


def _shown(line: str) -> str:
    text = line.rstrip("\r\n")
    text = text if len(text) <= 70 else text[:67] + "..."
    return repr(text) + ("" if line.endswith("\n") else " (with no newline)")


def unified(base: dict[str, str], edited: dict[str, str], context: int = 3) -> str:
    """The unified diff that turns `base` into `edited` (relative path -> text), files in path order."""
    out = []
    for path in sorted(set(base) | set(edited)):
        a, b = base.get(path), edited.get(path)
        if a == b:
            continue
        old, new = (a or "").splitlines(keepends=True), (b or "").splitlines(keepends=True)
        out.append(f"--- {'/dev/null' if a is None else 'a/' + path}\n")
        out.append(f"+++ {'/dev/null' if b is None else 'b/' + path}\n")
        matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
        for group in matcher.get_grouped_opcodes(context):
            i1, j1, i2, j2 = group[0][1], group[0][3], group[-1][2], group[-1][4]
            out.append(f"@@ -{_range(i1, i2)} +{_range(j1, j2)} @@\n")
            for tag, a1, a2, b1, b2 in group:
                if tag == "equal":
                    out += [_mark(" ", line) for line in old[a1:a2]]
                    continue
                out += [_mark("-", line) for line in old[a1:a2]]
                out += [_mark("+", line) for line in new[b1:b2]]
    return "".join(out)


def _range(start: int, stop: int) -> str:
    """A hunk's range as unified diffs write it (difflib's rule: an empty range names the line before)."""
    length = stop - start
    first = start + 1 if length else start
    return str(first) if length == 1 else f"{first},{length}"


def _mark(mark: str, line: str) -> str:
    return mark + line if line.endswith("\n") else f"{mark}{line}\n{NO_NEWLINE}\n"


def render(sentence: str, base: str, diff: str, notes: str = "", wrong_on_python: str | None = None) -> str:
    """A difference file's text: the sentence, the fields, the prose, then the diff."""
    sentence = " ".join(sentence.split())
    if not sentence:
        raise DifferenceError("a difference needs its sentence: what it changes, and why that is wrong or still right")
    if base not in BASES:
        raise DifferenceError(f"base should be 'reference' or 'starter', not {base!r}")
    if not diff.strip():
        raise DifferenceError("the edited copy is the same as its base: there is no difference to write")
    head = [sentence, f"base: {base}"] + ([f"wrong_on_python: {wrong_on_python}"] if wrong_on_python else [])
    prose = notes.strip("\n")
    if any(line.startswith("--- ") for line in prose.splitlines()):
        raise DifferenceError("a line of the prose starts with '--- ', which would start the diff: reword it")
    return "\n".join(head) + "\n\n" + (prose + "\n\n" if prose else "") + diff
