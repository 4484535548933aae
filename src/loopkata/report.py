"""Turns a CheckResult into words: the one text form shared by the CLI and the notebook panel."""
from __future__ import annotations

from .catalogue import Kata
from .runner import (
    ERROR,
    FAILED,
    HANG,
    NO_REPORT,
    NOT_RUN,
    PASSED,
    SKIPPED,
    CheckResult,
)

MARK = {PASSED: "✓", FAILED: "✗", HANG: "⧗", ERROR: "!", NOT_RUN: "·", NO_REPORT: "?", SKIPPED: "-"}


def headline(result: CheckResult, kata: Kata) -> str:
    if result.verdict == ERROR:
        return f"{kata.label}: could not be graded"
    passed = sum(t.outcome == PASSED for t in result.tests)
    total = len(result.tests)
    if result.passed:
        return f"{kata.label}: solved, all {total} tests pass"
    counts = {}
    for t in result.failures:
        counts[t.outcome] = counts.get(t.outcome, 0) + 1
    words = {FAILED: "failed", HANG: "hung", ERROR: "errored", NOT_RUN: "did not run",
             NO_REPORT: "did not report", SKIPPED: "skipped"}
    detail = ", ".join(f"{n} {words.get(o, o)}" for o, n in counts.items())
    return f"{kata.label}: not solved yet, {passed} of {total} tests pass ({detail})"


def test_lines(test, stacks: bool = True) -> list[str]:
    """The lines for one test: its mark and title, then what went wrong."""
    suffix = " (hang)" if test.outcome == HANG else ""
    lines = [f"  {MARK.get(test.outcome, '?')} {test.title}{suffix}"]
    if test.outcome == PASSED or (test.outcome == NOT_RUN and not test.message):
        return lines
    lines += [f"      {line}" for line in test.message.splitlines()]
    if test.where:
        lines.append(f"      at {test.where}")
    if stacks and test.stacks:
        lines += [f"      {line}" for line in test.stacks.splitlines()]
    return lines


def render_text(result: CheckResult, kata: Kata, stacks: bool = True) -> str:
    lines = [headline(result, kata)]
    if result.verdict == ERROR:
        lines += ["", result.problem]
        return "\n".join(lines)
    for test in result.tests:
        lines += test_lines(test, stacks)
    if result.notice:
        lines += ["", result.notice]
    return "\n".join(lines)
