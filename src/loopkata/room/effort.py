"""How long a kata takes, and what to do first.

Figures kept apart because they measure different things:
- the catalogue's `minutes`: an estimate of the whole pair (reading the notebook, then the kata);
- check records (`loopkata progress --export` files, kata files stripped): the median time from a
  first check to the check that passed. docs/workshop/records/rooms/ holds learners' records from real
  rooms; docs/workshop/records/testers/ holds testers', who read and planned before their first check
  and then tried wrong fixes on purpose, so their times are shown in the guide only, never as a
  learner's time.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from ..model import catalogue
from .exports import Record, load_room
from .table import median_seconds, solved_in_time

RECORDS = Path("docs") / "workshop" / "records"
ROOMS, TESTERS = "rooms", "testers"


@dataclass(frozen=True)
class Measured:
    seconds: float  # median time from the first check to the passing one
    records: int  # how many records solved the kata
    checks: float  # median number of checks
    hints: float  # median number of hints seen


def records(kind: str, root: Path | None = None) -> list[Record]:
    """The exports of one kind (ROOMS or TESTERS) kept with the project; none is a normal state."""
    folder = (root or catalogue.project_root()) / RECORDS / kind
    if not folder.is_dir():
        return []
    found, _ = load_room([folder])
    return found


def measured(kata_id: str, records: list[Record]) -> Measured | None:
    solved = solved_in_time(records, kata_id)
    if not solved:
        return None
    return Measured(seconds=median_seconds(records, kata_id), records=len(solved),
                    checks=statistics.median(k.checks or 0 for k in solved),
                    hints=statistics.median(len(k.hints_seen) for k in solved))


def minutes(seconds: float) -> str:
    return f"{max(1, round(seconds / 60))} min"


def time_label(kata: catalogue.Kata, records: list[Record]) -> str:
    """"about 25 min (estimate)", and the median time to solve where learners' records (ROOMS) exist."""
    said = f"about {kata.minutes} min (estimate)" if kata.minutes else "no estimate yet"
    m = measured(kata.id, records)
    if m is None:
        return said
    who = "1 learner" if m.records == 1 else f"{m.records} learners"
    return f"{said}; solved in {minutes(m.seconds)} from the first check ({who})"


def needs_label(kata: catalogue.Kata, katas) -> str:
    """"02 loop-id-reuse", or "none": the katas whose ideas this one uses."""
    by_id = {k.id: k for k in katas}
    return ", ".join(by_id[r].label for r in kata.requires if r in by_id) or "none"


def guide_table(katas=None, testers=None, rooms=None) -> str:
    """The facilitator guide's table of time per kata (a test keeps docs/workshop.md in step)."""
    katas = catalogue.load() if katas is None else katas
    testers = records(TESTERS) if testers is None else testers
    rooms = records(ROOMS) if rooms is None else rooms
    header = ("| kata | do first | estimate (notebook + kata) | testers: records, median checks, hints, time to solve "
              "| rooms: records, median time to solve |")
    rows = [header, "| --- | --- | --- | --- | --- |"]
    for k in katas:
        t, r = measured(k.id, testers), measured(k.id, rooms)
        said_t = "none yet" if t is None else f"{t.records}: {t.checks:g} checks, {t.hints:g} hints, {minutes(t.seconds)}"
        said_r = "none yet" if r is None else f"{r.records}: {minutes(r.seconds)}"
        estimate = f"{k.minutes} min" if k.minutes else "-"
        rows.append(f"| {k.number:02d} `{k.id}` | {needs_label(k, katas)} | {estimate} | {said_t} | {said_r} |")
    return "\n".join(rows)
