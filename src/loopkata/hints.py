"""Progressive hints: the next unseen hint that matches the learner's last failure."""
from __future__ import annotations

from . import progress
from .catalogue import Hint, Kata


def next_hint(kata: Kata) -> tuple[int, Hint] | None:
    """Pick and remember the next hint; None when every hint has been shown.

    Hints keyed to the last failure come first, in catalogue order; then the
    other keyed hints, in order; the general ones (no `when`: "compare with the
    reference") always come last. With no failure recorded (a new or reset
    kata) the hints go in catalogue order, general ones still last.
    Picking and remembering happen under one lock, so two commands at once never
    show the same hint twice. Raises progress.NotSaved (its result: the hint)
    when the choice cannot be remembered.
    """
    def pick(saved: dict) -> tuple[int, Hint] | None:
        seen = set(saved.get("hints_seen", []))
        failure = saved.get("last_failure", "")
        unseen = [(i, h) for i, h in enumerate(kata.hints) if i not in seen]
        matching = [(i, h) for i, h in unseen if h.when and failure and h.matches(failure)]
        keyed = [(i, h) for i, h in unseen if h.when and (i, h) not in matching]
        general = [(i, h) for i, h in unseen if not h.when]
        choice = (matching + keyed + general or [None])[0]
        if choice is not None:
            saved["hints_seen"] = sorted(seen | {choice[0]})
        return choice

    return progress.change(kata, pick)


def solved_message(kata: Kata) -> str:
    """What `hint` says for a solved kata: no hint spent, and where to go next."""
    from .catalogue import load  # the whole list, to name the next kata

    later = [k for k in load(kata.root) if progress.status(k) != progress.SOLVED]
    following = next((k for k in later if k.number > kata.number), later[0] if later else None)
    nxt = (f" Next: {following.label}, {following.title} (loopkata check {following.id}, or notebooks/{following.notebook})."
           if following else " Every kata is solved.")
    return f"{kata.id} is solved, so there is no hint to give. Compare with the reference fix: loopkata solution {kata.id}.{nxt}"


def describe(kata: Kata, choice: tuple[int, Hint] | None) -> str:
    if choice is None:
        return (
            f"No more hints for {kata.id}. `loopkata solution {kata.id} --force` shows the "
            "reference fix; the notebook explains the mechanism step by step."
        )
    i, hint = choice
    return f"Hint {i + 1} of {len(kata.hints)} for {kata.id}: {hint.text}"
