"""The room as a figure: solved per kata, median time to solve, the tests most often failing."""
from __future__ import annotations

from pathlib import Path

from ..learner import progress
from ..model.paths import shown_path
from .exports import Record, visible
from .table import Column, duration, median_seconds, stuck


def figure(records: list[Record], cols: list[Column], path: Path) -> None:
    """Save the room as a figure (PNG, or the format `path` ends in): solved per kata, median time to solve,
    the tests most often failing.

    Uses matplotlib's Agg canvas directly, so no display and no pyplot state is involved. Every text
    is plain: kata ids and test titles come from learners, and "$" or TeX in them must not be parsed.
    """
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with matplotlib.rc_context({"text.parse_math": False, "text.usetex": False}):  # read as each text is made
        fig = Figure(figsize=(10, 12), layout="constrained")
        FigureCanvasAgg(fig)
        # One subfigure per panel: the long test titles of the last must not squeeze the others.
        top, middle, bottom = (sub.subplots() for sub in fig.subfigures(3, 1, height_ratios=[1, 1, 1.2]))
        labels = [f"{c.label} {c.id}" if c.label != c.id else c.id for c in cols]
        xs = range(len(cols))

        base = [0] * len(cols)
        for status, colour in ((progress.SOLVED, "#2da44e"), (progress.ATTEMPTED, "#d29922"),
                               (progress.UNTOUCHED, "#afb8c1"), (progress.MISSING, "#6e7781")):
            counts = [sum(1 for r in records if getattr(r.katas.get(c.id), "status", "") == status) for c in cols]
            if any(counts) or status != progress.MISSING:
                top.bar(xs, counts, bottom=base, color=colour, label=status)
                base = [b + n for b, n in zip(base, counts)]
        top.set_title(f"Learners per kata and status ({len(records)} in the room)")
        top.set_ylabel("learners")
        top.set_xticks(list(xs), labels, fontsize=8, rotation=20, ha="right")
        top.yaxis.get_major_locator().set_params(integer=True)
        top.legend(loc="upper right", fontsize=8)

        minutes = [median_seconds(records, c.id) for c in cols]
        middle.bar(xs, [m / 60 if m is not None else 0 for m in minutes], color="#0969da")
        for x, m, c in zip(xs, minutes, cols):
            n = sum(1 for r in records if getattr(r.katas.get(c.id), "seconds_to_solve", None) is not None
                    and r.katas[c.id].status == progress.SOLVED)
            middle.annotate(duration(m) + (f"\n(n={n})" if n else ""), (x, (m or 0) / 60), ha="center", va="bottom",
                            fontsize=8)
        middle.set_title("Median time from first check to solved")
        middle.set_ylabel("minutes")
        middle.set_xticks(list(xs), labels, fontsize=8, rotation=20, ha="right")
        middle.set_ylim(0, max([1.0] + [m / 60 * 1.3 for m in minutes if m is not None]))

        failing = [(f"{c.label} · {title}" if c.label != c.id else f"{c.id} · {title}", n)
                   for c in cols for title, n in stuck(records, c.id)]
        failing = sorted(failing, key=lambda kv: -kv[1])[:10]
        bottom.set_title("Where the room is stuck: hidden tests failing at the last check")
        if failing:
            names_ = [t if len(t) <= 70 else t[:69] + "…" for t, _ in failing][::-1]
            bottom.barh(range(len(failing)), [n for _, n in failing][::-1], color="#cf222e")
            bottom.set_yticks(range(len(failing)), names_, fontsize=8)
            bottom.set_xlabel("learners not solved whose last check fails this test")
            bottom.xaxis.get_major_locator().set_params(integer=True)
        else:
            bottom.text(0.5, 0.5, "No learner's last check fails a hidden test", ha="center", va="center",
                        transform=bottom.transAxes)
            bottom.set_axis_off()
        fig.savefig(path, dpi=100, format=figure_format(path))


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
