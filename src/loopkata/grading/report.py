"""Turns a CheckResult into words: the one text form shared by the CLI and the notebook panel."""
from __future__ import annotations

from ..model.catalogue import Kata
from .runner import (
    COULD_NOT_RUN,
    ERROR,
    FAILED,
    HANG,
    NO_REPORT,
    NOT_HERE,
    NOT_RUN,
    PASSED,
    SKIPPED,
    CheckResult,
)

MARK = {PASSED: "✓", FAILED: "✗", HANG: "⧗", ERROR: "!", NOT_RUN: "·", NO_REPORT: "?", SKIPPED: "-", COULD_NOT_RUN: "○"}


def headline(result: CheckResult, kata: Kata) -> str:
    if result.verdict == ERROR:
        return f"{kata.label}: could not be graded"
    passed = sum(t.outcome == PASSED for t in result.tests)
    total = len(result.tests)
    if result.passed:
        return f"{kata.label}: solved, all {total} tests pass"
    if result.verdict == NOT_HERE:
        return (f"{kata.label}: could not run here, {passed} of {total} tests pass and "
                f"{total - passed} need{'s' if total - passed == 1 else ''} what this machine does not give")
    counts = {}
    for t in result.failures:
        counts[t.outcome] = counts.get(t.outcome, 0) + 1
    words = {FAILED: "failed", HANG: "hung", ERROR: "errored", NOT_RUN: "did not run",
             NO_REPORT: "did not report", SKIPPED: "skipped", COULD_NOT_RUN: "could not run here"}
    detail = ", ".join(f"{n} {words.get(o, o)}" for o, n in counts.items())
    return f"{kata.label}: not solved yet, {passed} of {total} tests pass ({detail})"


def stack_repeats(tests) -> dict[int, int]:
    """For the first test showing each distinct stack: how many later tests repeat it.
    Later tests with the same stacks map to -1 (shown once, not again)."""
    first: dict[str, int] = {}
    counts: dict[int, int] = {}
    for i, t in enumerate(tests):
        if not t.stacks:
            continue
        if t.stacks in first:
            counts[first[t.stacks]] += 1
            counts[i] = -1
        else:
            first[t.stacks], counts[i] = i, 0
    return counts


def test_lines(test, stacks: bool = True, repeats: int = 0) -> list[str]:
    """The lines for one test: its mark and title, then what went wrong.

    `repeats`: how many later tests are stuck at the same lines (-1: this one
    repeats an earlier test's stacks, which are not shown again)."""
    suffix = " (hang)" if test.outcome == HANG else ""
    lines = [f"  {MARK.get(test.outcome, '?')} {test.title}{suffix}"]
    if test.outcome == PASSED or (test.outcome == NOT_RUN and not test.message):
        return lines
    lines += [f"      {line}" for line in test.message.splitlines()]
    if test.where:
        lines.append(f"      at {test.where}")
    if stacks and test.stacks and repeats >= 0:
        lines += [f"      {line}" for line in test.stacks.splitlines()]
        if repeats:
            lines.append(f"      (stuck at the same lines in {repeats} more test{'s' if repeats > 1 else ''})")
    elif stacks and test.stacks:
        lines.append("      (stuck at the same lines as above)")
    return lines


def render_text(result: CheckResult, kata: Kata, stacks: bool = True) -> str:
    lines = [headline(result, kata)]
    if result.verdict == ERROR:
        lines += ["", result.problem]
        return "\n".join(lines)
    repeats = stack_repeats(result.tests)
    for i, test in enumerate(result.tests):
        lines += test_lines(test, stacks, repeats.get(i, 0))
    if result.notice:
        lines += ["", result.notice]
    return "\n".join(lines)
