"""Progressive hints: the next unseen hint that matches the learner's last failure."""
from __future__ import annotations

from . import progress
from .catalogue import Hint, Kata


def next_hint(kata: Kata) -> tuple[int, Hint] | None:
    """Pick and remember the next hint; None when every hint has been shown.

    Hints keyed to the last failure come first, in catalogue order; then the
    general ones. A learner who has not run a check yet gets the general ones.
    Picking and remembering happen under one lock, so two commands at once never
    show the same hint twice. Raises progress.NotSaved (its result: the hint)
    when the choice cannot be remembered.
    """
    def pick(saved: dict) -> tuple[int, Hint] | None:
        seen = set(saved.get("hints_seen", []))
        failure = saved.get("last_failure", "")
        unseen = [(i, h) for i, h in enumerate(kata.hints) if i not in seen]
        keyed = [(i, h) for i, h in unseen if h.when and failure and h.matches(failure)]
        general = [(i, h) for i, h in unseen if not h.when]
        choice = (keyed or general or unseen or [None])[0]
        if choice is not None:
            saved["hints_seen"] = sorted(seen | {choice[0]})
        return choice

    return progress.change(kata, pick)


def describe(kata: Kata, choice: tuple[int, Hint] | None) -> str:
    if choice is None:
        return (
            f"No more hints for {kata.id}. `loopkata solution {kata.id} --force` shows the "
            "reference fix; the notebook explains the mechanism step by step."
        )
    i, hint = choice
    return f"Hint {i + 1} of {len(kata.hints)} for {kata.id}: {hint.text}"
