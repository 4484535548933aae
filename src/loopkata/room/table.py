"""The room as a table: one row per learner, one column per kata, and where the room is stuck."""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from ..learner import progress
from ..model import catalogue
from .exports import KataRecord, Record, visible
from .standing import CONTRADICTED, NOT_VERIFIED, Standing

MARK = {progress.SOLVED: "✓", progress.ATTEMPTED: "✗", progress.UNTOUCHED: "·", progress.MISSING: "?"}
# After a re-grade, beside the claim's mark: what the re-grade made of it
FOUND = {CONTRADICTED: "!", NOT_VERIFIED: "~"}


@dataclass(frozen=True)
class Column:
    id: str
    number: int | None
    title: str

    @property
    def label(self) -> str:
        return f"{self.number:02d}" if self.number is not None else self.id


def columns(records: list[Record]) -> list[Column]:
    """The katas the exports name: in this catalogue's order when there is one here, then any others by id."""
    named = {kata_id: rec for r in records for kata_id, rec in r.katas.items()}
    try:
        known = [Column(k.id, k.number, k.title) for k in catalogue.load() if k.id in named]
    except catalogue.CatalogueError:  # a room can be read outside a checkout; re-grading cannot
        known = []
    taken = {c.number for c in known}  # a number this catalogue gives another kata is shown as the id instead
    others = [Column(kata_id, None if named[kata_id].number in taken else named[kata_id].number, named[kata_id].title)
              for kata_id in set(named) - {c.id for c in known}]
    return known + sorted(others, key=lambda c: (c.number is None, c.number or 0, c.id))


def names(records: list[Record]) -> list[str]:
    """Each record's learner, with its file's name when two exports name the same learner."""
    count = {}
    for r in records:
        count[r.learner] = count.get(r.learner, 0) + 1
    return [r.learner if count[r.learner] == 1 else f"{r.learner} ({visible(r.source.name)})" for r in records]


def cell(rec: KataRecord | None) -> str:
    """"✓ 3": the status's mark and how many checks ran ("?": not known); a bare "·" for a kata never checked."""
    if rec is None:
        return "-"
    if rec.checks == 0:
        return MARK[rec.status]
    return f"{MARK[rec.status]} {'?' if rec.checks is None else rec.checks}"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def solved_in_time(records: list[Record], kata_id: str, standing: Standing | None = None) -> list[KataRecord]:
    """The records of `kata_id` that solved it (as `standing` counts, by default as claimed) and know how long
    that took."""
    solved = (standing or Standing(records)).solved(kata_id)
    return [rec for rec in solved if rec.seconds_to_solve is not None]


def median_seconds(records: list[Record], kata_id: str, standing: Standing | None = None) -> float | None:
    times = [rec.seconds_to_solve for rec in solved_in_time(records, kata_id, standing)]
    return statistics.median(times) if times else None


def stuck(records: list[Record], kata_id: str) -> list[tuple[str, int]]:
    """The hidden tests failing at the last check of learners who have not solved the kata, most learners first."""
    count: dict[str, int] = {}
    for r in records:
        rec = r.katas.get(kata_id)
        if rec is None or rec.status == progress.SOLVED:
            continue
        for title in {t["title"] for t in rec.failing}:
            count[title] = count.get(title, 0) + 1
    return sorted(count.items(), key=lambda kv: (-kv[1], kv[0]))


SHOWN = 3  # tests per kata: where the room is stuck is read at a glance, not studied


@dataclass(frozen=True)
class Stuck:
    """One kata's place in "where the room is stuck": the tests shown, most learners first, of how many failing."""
    column: Column
    tests: tuple[tuple[str, int], ...]
    failing: int

    @property
    def cut(self) -> bool:
        return len(self.tests) < self.failing

    def summary(self) -> str:
        """What the list is, so a facilitator never takes the first few for all: "the 3 tests most learners
        are stuck on, of 7 failing", or "2 tests failing" when it is whole."""
        if self.cut:
            return f"the {len(self.tests)} tests most learners are stuck on, of {self.failing} failing"
        return f"{self.failing} test{'s' if self.failing != 1 else ''} failing"


def where_stuck(records: list[Record], cols: list[Column], shown: int = SHOWN) -> list[Stuck]:
    """Each kata some learner not solved is stuck on, with its `shown` most failed tests: the table and the
    figure show these same ones."""
    every = [(c, stuck(records, c.id)) for c in cols]
    return [Stuck(c, tuple(tests[:shown]), len(tests)) for c, tests in every if tests]


def table(records: list[Record], cols: list[Column], standing: Standing | None = None) -> str:
    """The room as text: one row per learner, one column per kata. After a re-grade (`standing`), a claim it
    contradicts gets a "!", a solved claim it could not check a "~", and only confirmed claims count as solved."""
    standing = standing or Standing(records)
    who = names(records)
    rows = [[n] + [cell(r.katas.get(c.id)) + FOUND.get(standing.status(i, c.id), "") for c in cols]
            for i, (n, r) in enumerate(zip(who, records))]
    solved = ["solved"] + [f"{standing.count(c.id, progress.SOLVED)}/{len(records)}" for c in cols]
    unverified = ["not verified"] + [f"{standing.count(c.id, NOT_VERIFIED)}/{len(records)}" for c in cols]
    unverified = [unverified] if any(standing.count(c.id, NOT_VERIFIED) for c in cols) else []
    median = ["median"] + [duration(median_seconds(records, c.id, standing)) for c in cols]
    header = ["learner"] + [c.label for c in cols]
    every = [header, *rows, solved, *unverified, median]
    widths = [max(len(row[i]) for row in every) for i in range(len(header))]

    def line(row):
        return "  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip()

    legend = "✓ solved, ✗ attempted, · untouched, ? missing; the number is how many checks ran"
    if standing.regraded:
        legend = ("✓ solved, ✗ attempted, · untouched, ? missing, as each learner claims; the number is how many "
                  "checks ran; ! the re-grade contradicts the claim, ~ claimed solved, not verified (the re-grade "
                  "could not check it); solved counts only the claims the re-grade confirmed")
    out = [f"{len(records)} learner{'s' if len(records) != 1 else ''}: {legend}"]
    out += ["", line(header), *map(line, rows), "", line(solved), *map(line, unverified),
            line(median) + "   (time from first check to solved)"]
    out += ["", "Katas: " + ", ".join(f"{c.label} {c.id}" for c in cols if c.label != c.id)]
    blocked = where_stuck(records, cols)
    if blocked:
        out += ["", "Where the room is stuck (hidden tests failing at the last check, learners not solved):"]
        for kata in blocked:
            c = kata.column
            if kata.cut:
                out.append(f"  {c.label} {c.id}: {kata.summary()}:")
            for title, n in kata.tests:
                out.append(f"  {c.label} {c.id}: {n} learner{'s' if n != 1 else ''}: {title}")
    return "\n".join(out)
