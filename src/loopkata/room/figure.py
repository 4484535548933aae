"""The room as a figure: solved per kata, median time to solve, and where the room is stuck."""
from __future__ import annotations

import textwrap
from pathlib import Path

from ..learner import progress
from ..model.paths import shown_path
from .exports import Record, visible
from .standing import CONTRADICTED, NOT_VERIFIED, Standing
from .table import Column, duration, median_seconds, where_stuck

WRAP = 60  # characters per line of a label: a hidden test's title is read whole, on as many lines as it takes
MAX_LINES = 8  # per label: the longest hidden test's title takes 3; only a forged export's needs more
LINE_INCHES = 0.16  # one line of an 8-point label, with room between rows
GAP_LINES = 1.6  # between rows, in lines
PANEL_INCHES = 3.75  # the height of each of the first two panels
MAX_STUCK_LINES = 300  # the stuck panel's height (48 inches): every kata of the catalogue fits, a forged room is cut
# One colour per status, bottom to top; a claim the re-grade did not confirm is a colour of its own, never solved's
STATUSES = ((progress.SOLVED, "#2da44e"), (NOT_VERIFIED, "#9be9a8"), (CONTRADICTED, "#8250df"),
            (progress.ATTEMPTED, "#d29922"), (progress.UNTOUCHED, "#afb8c1"), (progress.MISSING, "#6e7781"))
AFTER_REGRADE = {progress.SOLVED: "solved, confirmed by the re-grade",
                 NOT_VERIFIED: "claimed solved, not verified (the re-grade could not check it)",
                 CONTRADICTED: "claim contradicted by the re-grade"}


def wrapped(text: str) -> str:
    """`text` on lines of at most WRAP characters, whole up to MAX_LINES lines (a long word is split, not cut)."""
    return "\n".join(textwrap.wrap(text, WRAP, break_on_hyphens=False, max_lines=MAX_LINES, placeholder=" …")) or text


def row_lines(label: str) -> float:
    return label.count("\n") + 1 + GAP_LINES


def stuck_rows(records: list[Record], cols: list[Column]) -> list[tuple[str, int | None]]:
    """The stuck panel's rows, top to bottom: per kata a heading (count None) saying what its list is, then
    its tests; the same tests as the table's "where the room is stuck"."""
    rows, blocked = [], where_stuck(records, cols)
    for i, kata in enumerate(blocked):
        c = kata.column
        more = [(wrapped(f"{c.label} {c.id}: {kata.summary()}" if c.label != c.id else f"{c.id}: {kata.summary()}"),
                 None)] + [(wrapped(title), n) for title, n in kata.tests]
        if sum(row_lines(label) for label, _ in rows + more) > MAX_STUCK_LINES - row_lines("a\nb"):
            left = len(blocked) - i  # matplotlib saves no image over 65,536 pixels a side: close with a line
            rows.append((wrapped(f"and {left} more kata{'s' if left != 1 else ''} where learners are stuck: "
                                 "the table lists them"), None))
            break
        rows += more
    return rows


def figure(records: list[Record], cols: list[Column], path: Path, standing: Standing | None = None) -> None:
    """Save the room as a figure (PNG, or the format `path` ends in): solved per kata, median time to solve,
    and where the room is stuck (the tests the table lists, each title whole on as many lines as it takes).
    After a re-grade (`standing`) the first two panels count as solved only the claims it confirmed.

    Uses matplotlib's Agg canvas directly, so no display and no pyplot state is involved. Every text
    is plain: kata ids and test titles come from learners, and "$" or TeX in them must not be parsed.
    """
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    standing = standing or Standing(records)
    rows = stuck_rows(records, cols)
    # Each row as tall as its wrapped label, and a gap: the stuck panel grows with its titles.
    heights = [row_lines(label) for label, _ in rows]
    stuck_inches = max(4.5, 1.5 + sum(heights) * LINE_INCHES)
    with matplotlib.rc_context({"text.parse_math": False, "text.usetex": False}):  # read as each text is made
        fig = Figure(figsize=(10, 2 * PANEL_INCHES + stuck_inches), layout="constrained")
        FigureCanvasAgg(fig)
        # One subfigure per panel: the long test titles of the last must not squeeze the others.
        top, middle, bottom = (sub.subplots() for sub in
                               fig.subfigures(3, 1, height_ratios=[PANEL_INCHES, PANEL_INCHES, stuck_inches]))
        labels = [f"{c.label} {c.id}" if c.label != c.id else c.id for c in cols]
        xs = range(len(cols))

        base = [0] * len(cols)
        for status, colour in STATUSES:
            counts = [standing.count(c.id, status) for c in cols]
            if any(counts) or status in (progress.SOLVED, progress.ATTEMPTED, progress.UNTOUCHED):
                label = AFTER_REGRADE.get(status, status) if standing.regraded else status
                top.bar(xs, counts, bottom=base, color=colour, label=label)
                base = [b + n for b, n in zip(base, counts)]
        after = ", after the re-grade" if standing.regraded else ""
        top.set_title(f"Learners per kata and status{after} ({len(records)} in the room)")
        top.set_ylabel("learners")
        top.set_xticks(list(xs), labels, fontsize=8, rotation=20, ha="right")
        top.yaxis.get_major_locator().set_params(integer=True)
        if standing.regraded:  # its longer labels under the panel, where they hide no bar
            top.get_figure(root=False).legend(loc="outside lower center", ncols=3, fontsize=8)
        else:
            top.legend(loc="upper right", fontsize=8)

        minutes = [median_seconds(records, c.id, standing) for c in cols]
        middle.bar(xs, [m / 60 if m is not None else 0 for m in minutes], color="#0969da")
        for x, m, c in zip(xs, minutes, cols):
            n = sum(1 for rec in standing.solved(c.id) if rec.seconds_to_solve is not None)
            middle.annotate(duration(m) + (f"\n(n={n})" if n else ""), (x, (m or 0) / 60), ha="center", va="bottom",
                            fontsize=8)
        middle.set_title("Median time from first check to solved" + (" (solves the re-grade confirmed)"
                                                                     if standing.regraded else ""))
        middle.set_ylabel("minutes")
        middle.set_xticks(list(xs), labels, fontsize=8, rotation=20, ha="right")
        middle.set_ylim(0, max([1.0] + [m / 60 * 1.3 for m in minutes if m is not None]))

        bottom.set_title("Where the room is stuck: hidden tests failing at the last check")
        if rows:
            centres = [sum(heights[:i]) + h / 2 for i, h in enumerate(heights)]
            tests = [(y, n) for y, (_, n) in zip(centres, rows) if n is not None]
            bottom.barh([y for y, _ in tests], [n for _, n in tests], height=1.2, color="#cf222e")
            bottom.set_yticks(centres, [label for label, _ in rows], fontsize=8)
            for tick, (_, n) in zip(bottom.get_yticklabels(), rows):
                if n is None:  # a kata's heading
                    tick.set_fontweight("bold")
            bottom.set_ylim(sum(heights), 0)  # the first kata at the top, as in the table
            bottom.tick_params(axis="y", length=0)
            bottom.set_xlabel("learners not solved whose last check fails this test")
            bottom.xaxis.get_major_locator().set_params(integer=True)
        else:
            bottom.text(0.5, 0.5, "No learner's last check fails a hidden test", ha="center", va="center",
                        transform=bottom.transAxes)
            bottom.set_axis_off()
        # "tight": a text the layout could not fit (a kata id of any length, say) is saved whole, not clipped
        fig.savefig(path, dpi=100, format=figure_format(path), bbox_inches="tight", pad_inches=0.2)


def figure_format(path: Path) -> str:
    """The format a figure at `path` is saved in (its extension; PNG without one); FigureFormatError
    when matplotlib cannot write that extension, ImportError without matplotlib."""
    from matplotlib.backend_bases import FigureCanvasBase

    suffix = Path(path).suffix.lower().lstrip(".")
    if not suffix:
        return "png"
    writable = FigureCanvasBase.get_supported_filetypes()
    if suffix not in writable:
        raise FigureFormatError(f"cannot save a figure as .{visible(suffix)} ({shown_path(path)}); "
                                f"name a file ending in .png, .svg or .pdf (or .{', .'.join(sorted(writable))})")
    return suffix


class FigureFormatError(ValueError):
    """A figure path whose extension names no format matplotlib writes; str() is one line."""
