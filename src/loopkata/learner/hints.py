"""Progressive hints: the next unseen hint that matches the learner's last failure."""
from __future__ import annotations

from ..model.catalogue import Hint, Kata, load
from . import progress


def next_hint(kata: Kata) -> tuple[int, Hint] | None:
    """Pick and remember the next hint; (how many hints the learner has now seen, the hint),
    or None when every hint has been shown.

    After a failure: the unseen hints keyed to it, in catalogue order, then the general ones
    (no `when`); a hint keyed to a failure the learner has not met comes only when neither is
    left. With no failure recorded (a new or reset kata) the general ones come first, then
    the others in catalogue order. The number shown counts up in the order the learner sees them.
    Picking and remembering happen under one lock, so two commands at once never show the
    same hint twice. Raises progress.NotSaved (its result: the hint) when the choice cannot
    be remembered.
    """
    def pick(saved: dict) -> tuple[int, Hint] | None:
        seen = set(saved.get("hints_seen", []))
        failure = saved.get("last_failure", "")
        unseen = [(i, h) for i, h in enumerate(kata.hints) if i not in seen]
        matching = [(i, h) for i, h in unseen if h.when and failure and h.matches(failure)]
        keyed = [(i, h) for i, h in unseen if h.when and (i, h) not in matching]
        general = [(i, h) for i, h in unseen if not h.when]
        # With no failure recorded (a new or reset kata), a hint about a failure is about one not met.
        order = matching + general + keyed if failure else general + keyed
        if not order:
            return None
        i, hint = order[0]
        saved["hints_seen"] = sorted(seen | {i})
        return len(saved["hints_seen"]), hint

    return progress.change(kata, pick)


def solved_message(kata: Kata) -> str:
    """What `hint` says for a solved kata: no hint spent, and where to go next."""

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
    shown, hint = choice
    return f"Hint {shown} of {len(kata.hints)} for {kata.id}: {hint.text}"
