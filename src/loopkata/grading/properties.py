"""What the property-based hidden tests share: the seed each failure names, so that a learner's
failing examples can be replayed, and what a test says where Hypothesis is missing."""
from __future__ import annotations

import os

SEED_VARIABLE = "LOOPKATA_HYPOTHESIS_SEED"
NO_HYPOTHESIS = "Hypothesis is not installed here (pip install -r requirements.txt), so this test cannot run"


def property_seed() -> int:
    """The seed of this run's examples: LOOPKATA_HYPOTHESIS_SEED when it is a whole number, else a fresh one."""
    given = os.environ.get(SEED_VARIABLE, "").strip()
    return int(given) if given.isdigit() else int.from_bytes(os.urandom(4), "big")


def replay_words(seed: int) -> str:
    """How a failure message tells the learner to see the same examples again."""
    return f"[Hypothesis seed {seed}: {SEED_VARIABLE}={seed} replays these examples]"
