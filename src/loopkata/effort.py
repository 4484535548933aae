"""How long a kata takes, and what to do first.

Two figures, kept apart because they measure different things:
- the catalogue's `minutes`: an estimate of the whole pair (reading the notebook, then the kata);
- testers' check records (their `loopkata progress --export` files, kata files stripped, in
  docs/workshop/records/): the median time from a tester's first check to the check that passed.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from . import catalogue, progress, room

RECORDS = Path("docs") / "workshop" / "records"


@dataclass(frozen=True)
class Measured:
    seconds: float  # median time from the first check to the passing one
    records: int  # how many records solved the kata
    checks: float  # median number of checks
    hints: float  # median number of hints seen


def tester_records(root: Path | None = None) -> list[room.Record]:
    """The testers' exports kept with the project; none is a normal state (no line printed)."""
    folder = (root or catalogue.project_root()) / RECORDS
    if not folder.is_dir():
        return []
    records, _ = room.load_room([folder])
    return records


def measured(kata_id: str, records: list[room.Record]) -> Measured | None:
    solved = [r.katas[kata_id] for r in records
              if kata_id in r.katas and r.katas[kata_id].status == progress.SOLVED
              and r.katas[kata_id].seconds_to_solve is not None]
    if not solved:
        return None
    return Measured(seconds=statistics.median(k.seconds_to_solve for k in solved), records=len(solved),
                    checks=statistics.median(k.checks or 0 for k in solved),
                    hints=statistics.median(len(k.hints_seen) for k in solved))


def minutes(seconds: float) -> str:
    return f"{max(1, round(seconds / 60))} min"


def time_label(kata: catalogue.Kata, records: list[room.Record]) -> str:
    """"about 25 min (estimate)", and the testers' median time to solve where records exist."""
    said = f"about {kata.minutes} min (estimate)" if kata.minutes else "no estimate yet"
    m = measured(kata.id, records)
    if m is None:
        return said
    who = "1 tester" if m.records == 1 else f"{m.records} testers"
    return f"{said}; solved in {minutes(m.seconds)} from the first check ({who})"


def needs_label(kata: catalogue.Kata, katas) -> str:
    """"02 loop-id-reuse", or "none": the katas whose ideas this one uses."""
    by_id = {k.id: k for k in katas}
    return ", ".join(by_id[r].label for r in kata.requires if r in by_id) or "none"


def guide_table(katas=None, records=None) -> str:
    """The facilitator guide's table of time per kata (a test keeps docs/workshop.md in step)."""
    katas = catalogue.load() if katas is None else katas
    records = tester_records() if records is None else records
    rows = ["| kata | do first | estimate (notebook + kata) | testers' records | median time to solve | median checks | median hints |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for k in katas:
        m = measured(k.id, records)
        got = ("none yet", "-", "-", "-") if m is None else (
            str(m.records), minutes(m.seconds), f"{m.checks:g}", f"{m.hints:g}")
        rows.append(f"| {k.number:02d} `{k.id}` | {needs_label(k, katas)} | {f'{k.minutes} min' if k.minutes else '-'} | " + " | ".join(got) + " |")
    return "\n".join(rows)
