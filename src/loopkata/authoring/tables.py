"""The tables the docs carry, made from the catalogue, the decoys and the testers' records.

Each sits between `<!-- NAME ... -->` and `<!-- end NAME -->` markers. `python -m loopkata.authoring.tables --write`
rewrites them; tests/test_setup.py fails when one is stale, so the docs cannot drift.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from .. import scan
from ..guard.findings import KINDS, UNSEEN
from ..model import catalogue
from ..room import effort
from .mutation import shown_score

LATENCY_RECORD = "benchmarks/check_latency.json"  # written by benchmarks/check_latency.py (make bench)
MUTATION_RECORD = "benchmarks/mutation_score.json"  # written by benchmarks/mutation_score.py (make mutation)


def latency_table() -> str:
    """The README's check-latency table, from the figures benchmarks/check_latency.py recorded."""
    path = catalogue.project_root() / LATENCY_RECORD
    try:
        measured = json.loads(path.read_text(encoding="utf-8")).get("katas", {})
    except (OSError, ValueError):
        measured = {}

    def slowest(times: dict) -> str:
        if not times:
            return "not timed"  # a run with --no-decoys times the reference and the starter only
        name = max(times, key=times.get)
        return f"{times[name]:.2f} s ({name.replace('_', ' ')})"

    rows = ["| kata | reference (passes) | starter (fails) | slowest decoy (fails) | slowest variant (passes) | measured |",
            "| --- | --- | --- | --- | --- | --- |"]
    for k in catalogue.load():
        got = measured.get(k.id)
        if not got:
            rows.append(f"| {k.number:02d} `{k.id}` | not measured yet (`make bench`) | | | | |")
            continue
        when = got.get("measured", {})
        rows.append(f"| {k.number:02d} `{k.id}` | {got['reference']:.2f} s | {got['starter']:.2f} s | "
                    f"{slowest(got.get('decoys', {}))} | {slowest(got.get('variants', {}))} | "
                    f"{when.get('date', '?')}, median of {when.get('runs', '?')}, {when.get('cores', '?')} cores, "
                    f"Python {when.get('python', '?')} |")
    return "\n".join(rows)


def mutation_table() -> str:
    """The README's mutation score per kata, from the figures benchmarks/mutation_score.py recorded."""
    path = catalogue.project_root() / MUTATION_RECORD
    try:
        measured = json.loads(path.read_text(encoding="utf-8")).get("katas", {})
    except (OSError, ValueError):
        measured = {}
    rows = ["| kata | mutants | killed | survived | timed out | equivalent | score | cost | measured |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for k in catalogue.load():
        got = measured.get(k.id)
        if not got:
            rows.append(f"| {k.number:02d} `{k.id}` | not run yet (`make mutation`) | | | | | | | |")
            continue
        when = got.get("measured", {})
        rows.append(f"| {k.number:02d} `{k.id}` | {got['mutants']} | {got['killed']} | {got['survived']} | "
                    f"{got['timed_out']} | {got['equivalent']} | {shown_score(got['score'], got['survived'])} | "
                    f"{got['seconds']:.0f} s on {got.get('workers', '?')} worker{'' if got.get('workers') == 1 else 's'} | "
                    f"{when.get('date', '?')}, {when.get('cores', '?')} cores, {when.get('tool', '?')} |")
    return "\n".join(rows)


def scan_rules() -> str:
    """The README's paragraph and table of `loopkata scan`'s rules, made from `scan.RULES` and the catalogue."""
    katas = {k.number: k for k in catalogue.load()}
    numbers = sorted(int(rule[2:]) for rule in scan.RULES)
    untaught = [n for n in sorted(katas) if n not in numbers]
    covered = f"katas {numbers[0]:02d} to {numbers[-1]:02d}" if numbers == list(range(numbers[0], numbers[-1] + 1)) \
        else "katas " + ", ".join(f"{n:02d}" for n in numbers)
    rows = [
        "Every notebook ends with \"keeping it out\". `loopkata scan` runs those checks on your repository: "
        f"a rule for each of {covered} (`{min(scan.RULES)}` to `{max(scan.RULES)}`"
        + (f"; {'kata' if len(untaught) == 1 else 'katas'} {', '.join(f'{n:02d}' for n in untaught)} "
           f"{'has' if len(untaught) == 1 else 'have'} none yet" if untaught else "")
        + "), each finding with its rule, `file:line`, one sentence and the notebook that teaches it.",
        "",
        "| rule | finds | taught in |",
        "| --- | --- | --- |",
    ]
    for rule, finds in scan.RULES.items():
        kata = katas.get(int(rule[2:]))
        taught = f"[{kata.number:02d} · {kata.title}](notebooks/{kata.notebook})" if kata else rule[2:]
        rows.append(f"| `{rule}` | {finds} | {taught} |")
    return "\n".join(rows)


def guard_kinds() -> str:
    """The README's table of what `loopkata guard` finds, made from `guard.findings.KINDS` and the catalogue."""
    katas = {k.number: k for k in catalogue.load()}
    rows = ["| code | name | finds | taught in |", "| --- | --- | --- | --- |"]
    for kind in KINDS.values():
        taught = ", ".join(f"[{n:02d} · {katas[n].title}](notebooks/{katas[n].notebook})" if n in katas else f"{n:02d}"
                           for n in kind.katas)
        rows.append(f"| `{kind.code}` | `{kind.name}` | {kind.finds} | {taught} |")
    for n, why in sorted(UNSEEN.items()):
        taught = f"[{n:02d} · {katas[n].title}](notebooks/{katas[n].notebook})" if n in katas else f"{n:02d}"
        rows.append(f"| none | | a test run cannot see it: {why} | {taught} |")
    return "\n".join(rows)


def markdown_table(katas=None) -> str:
    """The README's kata table, made from the catalogue (a test keeps the README in step)."""
    katas = catalogue.load() if katas is None else katas
    records = effort.records(effort.ROOMS, katas[0].root if katas else None)
    rows = ["| # | Kata | Notebook | What goes wrong | Do first | Time |", "| --- | --- | --- | --- | --- | --- |"]
    for k in katas:
        rows.append(
            f"| {k.number:02d} | `{k.id}` | [{k.title}](notebooks/{k.notebook}) | {k.summary} "
            f"| {effort.needs_label(k, katas)} | {effort.time_label(k, records)} |"
        )
    return "\n".join(rows)


# (file, marker name, what makes the table)
BLOCKS = (
    ("README.md", "kata-table", markdown_table),
    ("README.md", "scan-rules", scan_rules),
    ("README.md", "guard-kinds", guard_kinds),
    ("docs/workshop.md", "wrong-fixes", catalogue.wrong_fixes_table),
    ("docs/workshop.md", "solve-times", effort.guide_table),
    ("README.md", "check-latency", latency_table),
    ("README.md", "mutation-score", mutation_table),
)


def _span(name: str) -> re.Pattern:
    return re.compile(rf"(<!-- {name}\b[^>]*-->\n)(.*?)\n?(<!-- end {name} -->)", re.S)


def current(root: Path, file: str, name: str) -> str | None:
    m = _span(name).search((root / file).read_text(encoding="utf-8"))
    return m.group(2).strip() if m else None


def write(root: Path) -> list[str]:
    """Rewrite every table; the names of those that changed."""
    changed = []
    for file, name, make in BLOCKS:
        path = root / file
        text = path.read_text(encoding="utf-8")
        new, n = _span(name).subn(lambda m: m.group(1) + make() + "\n" + m.group(3), text, count=1)
        if n == 0:
            raise SystemExit(f"{file} has no <!-- {name} --> ... <!-- end {name} --> markers to write between.")
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(f"{file}: {name}")
    return changed


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: python -m loopkata.authoring.tables --write")
    done = write(catalogue.project_root())
    print("rewrote " + ", ".join(done) if done else "every table is up to date")
