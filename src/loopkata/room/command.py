"""`loopkata room [--regrade] [--figure PATH] EXPORT...`: the facilitator's view of a room.

A table learner x kata and a figure; with --regrade, every learner's files graded again on this
machine (loopkata.room.regrade: a throw-away copy and a sandbox). A learner's code runs inside the
learner's own grader, where it can fool it; the re-grade is stronger evidence: every claim it
contradicts is marked, a re-grade that gave no verdict is reported as the room's problem, and the
table and the figure count as solved only the claims it confirmed (loopkata.room.standing).
"""
from __future__ import annotations

import sys

from ..model import catalogue
from ..model.paths import shown_path
from . import sandbox
from .exports import load_room, visible
from .figure import FigureFormatError, figure, figure_format
from .regrade import GRADED, NO_VERDICT, STARTER, UNAVAILABLE, regrade_room
from .standing import Standing
from .table import columns, table


def cmd_room(args) -> int:
    """`loopkata room [--regrade] [--figure PATH] EXPORT...`; exit 0, 1 if an export was skipped, a claim
    differs from the re-grade or a re-grade gave no verdict, 2 if no export could be read or the figure's
    path names no format to write."""
    try:
        figure_format(args.figure)  # before any work: a re-grade can take minutes
    except FigureFormatError as exc:
        print(f"loopkata room: {exc}", file=sys.stderr)
        return 2
    except ImportError:
        pass  # said after the table, which needs no matplotlib
    katas = None
    if args.regrade:
        try:  # before any work or word of re-grading: it needs this machine's catalogue and hidden tests
            katas = catalogue.load()
        except catalogue.CatalogueError as exc:
            print(f"loopkata room: --regrade cannot run here: {' '.join(str(exc).split())}", file=sys.stderr)
            return 2
    records, problems = load_room(args.exports)
    for line in problems:
        print(f"loopkata room: skipped {line}", file=sys.stderr)
    if not records:
        print("loopkata room: no export could be read, so there is no room to show. Learners write one with "
              "`loopkata progress --export FILE`.", file=sys.stderr)
        return 2
    standing, differing, broken = Standing(records), [], []
    if katas is not None:
        learners = f"{len(records)} learner{'s' if len(records) != 1 else ''}"
        why_not = sandbox.why_no_sandbox()
        where = (f"no sandbox ({why_not}): their code runs as you, with your files in reach" if why_not else
                 f"each in a sandbox (bubblewrap): {sandbox.promise()}")
        print(f"Re-grading the kata files of {learners} with this machine's hidden tests, in throw-away copies; "
              f"{where}.", flush=True)
        results, lost = regrade_room(records, katas, announce=lambda line: print(line, flush=True))
        for line in lost:
            print(f"loopkata room: {line}", file=sys.stderr)
        differing = [r for r in results if r.differs]
        broken = [r for r in results if r.how == NO_VERDICT]
        standing = Standing(records, {(r.index, r.kata.id): r.found for r in results if r.found})
        count = {how: sum(r.how == how for r in results) for how in (GRADED, STARTER, UNAVAILABLE)}
        could_not = f", {count[UNAVAILABLE]} could not be re-graded here" if count[UNAVAILABLE] else ""
        no_verdict = (f", {len(broken)} gave no verdict (the grading itself failed, which neither confirms nor "
                      "contradicts a claim)" if broken else "")
        print(f"{count[GRADED]} re-graded, {count[STARTER]} left alone (the starter as shipped){could_not}"
              f"{no_verdict}; {len(differing)} claim{' differs' if len(differing) == 1 else 's differ'} "
              "from the re-grade.\n")
    cols = columns(records)
    print(table(records, cols, standing))
    if differing:
        print("\nClaims the re-grade contradicts:")
        for r in differing:
            print(f"  ! {visible(r.line())}")
    if broken:
        print("\nRe-grades that gave no verdict: the claim is not verified, and can be re-graded again once the "
              "reason is found:")
        for r in broken:
            print(f"  ~ {visible(r.line())}")
    status = 1 if problems or differing or broken else 0
    try:
        figure(records, cols, args.figure, standing)
    except ImportError:
        print("loopkata room: the figure needs matplotlib (pip install matplotlib); the table above is complete.",
              file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"loopkata room: could not save the figure to {shown_path(args.figure)} "
              f"({exc.strerror or exc}).", file=sys.stderr)
        return 1
    print(f"\nFigure: {shown_path(args.figure)}")
    return status
