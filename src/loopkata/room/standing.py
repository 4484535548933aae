"""What the room counts as solved: each learner's claims, or, after a re-grade, what it found of them.

Without a re-grade every claim stands. After one, a claim the re-grade contradicts is shown as
contradicted and counts as not solved; a solved claim the re-grade could not check (not possible on
this machine, no verdict, a kata this catalogue lacks) is "claimed, not verified": the evidence is
missing, so it is neither counted solved nor taken as contradicted.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..learner import progress
from .exports import KataRecord, Record

# What a re-grade found of one claim, by (record index, kata id); a claim it did not check has none.
CONFIRMED, CONTRADICTED = "confirmed", "contradicted"
# A status beside progress's: a solved claim the re-grade did not confirm, nor contradict.
NOT_VERIFIED = "not verified"


@dataclass(frozen=True)
class Standing:
    records: list[Record]
    found: dict[tuple[int, str], str] | None = None  # None: no re-grade, the claims stand

    @property
    def regraded(self) -> bool:
        return self.found is not None

    def status(self, index: int, kata_id: str) -> str | None:
        """progress's status as claimed, CONTRADICTED or NOT_VERIFIED; None for a kata the record lacks."""
        rec = self.records[index].katas.get(kata_id)
        if rec is None:
            return None
        if self.found is None:
            return rec.status
        said = self.found.get((index, kata_id))
        if said == CONTRADICTED:
            return CONTRADICTED
        if rec.status == progress.SOLVED and said != CONFIRMED:
            return NOT_VERIFIED
        return rec.status

    def count(self, kata_id: str, status: str) -> int:
        return sum(self.status(i, kata_id) == status for i in range(len(self.records)))

    def solved(self, kata_id: str) -> list[KataRecord]:
        """The records of `kata_id` counted as solved."""
        return [r.katas[kata_id] for i, r in enumerate(self.records) if self.status(i, kata_id) == progress.SOLVED]
