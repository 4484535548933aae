"""What the suite costs, by group and by kata, read from pytest's JUnit files.

    .venv/bin/python benchmarks/suite_cost.py RUN.xml [MORE.xml ...] [--markdown]
    .venv/bin/python benchmarks/suite_cost.py --run [-- PYTEST ARGS]   (runs the suite first)

A JUnit file records each test's own time (set-up, call and tear-down) and the
session's wall time. With pytest-xdist the tests' times add up to more than the
wall time: the sum is the work, the wall time is what a person waits for. So
each group and each kata is shown twice:

- work: the sum of its tests' times, in seconds of one worker;
- share of the wall: its fraction of the work, times the session's wall time;
  this is what the kata adds to a stage, and what the budget (60 s a kata per
  Python stage) is measured against.

A kata's tests are its proofs (test_katas_proven), its notebook under nbval,
the stay-true run of its notebook, its notebook in the browser stage, and any
other test whose name carries the kata's id or its notebook's name.
Several files (one per stage) are read together: one table each, one total.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from loopkata.model import catalogue  # noqa: E402

# (group, how a test's "classname" or file starts): the first that matches names the group.
GROUPS = [
    ("kata proofs", "tests.test_katas_proven"),
    ("nbval (notebooks)", "notebooks."),
    ("stay-true", "tests.test_notebooks_stay_true"),
    ("browser stage", "tests.browser."),
    ("offline install", "tests.test_offline_install"),
    ("workshop hub", "tests.test_workshop_hub"),
    ("services", "tests.test_services"),
    ("room", "tests.test_room"),
    ("scan", "tests.test_scan"),
    ("guard", "tests.test_guard"),  # test_guard and test_guard_katas
    ("state", "tests.test_state"),
    ("grader", "tests.test_grader"),
    ("diagnosis", "tests.test_diagnosis"),
]
BUDGET_PER_KATA = 60.0  # s of a stage's wall time
# A kata's share, split by where it is spent (each as a share of the wall).
KATA_PARTS = {"kata proofs": "proofs", "nbval (notebooks)": "nbval", "stay-true": "stay-true",
              "browser stage": "browser", "other": "other"}


@dataclass
class Case:
    group: str
    kata: str | None
    seconds: float


@dataclass
class Run:
    name: str
    wall: float
    cases: list[Case]

    @property
    def work(self) -> float:
        return sum(c.seconds for c in self.cases)

    def share(self, seconds: float) -> float:
        """`seconds` of work as seconds of this run's wall time."""
        return seconds * self.wall / self.work if self.work else 0.0


def group_of(classname: str) -> str:
    for group, prefix in GROUPS:
        if classname.startswith(prefix):
            return group
    return "everything else"


def kata_of(classname: str, name: str, katas) -> str | None:
    text = f"{classname}::{name}"
    # A proof's id is the kata's id and then its role ("bound-semaphore-solution-passes"): the
    # longest id that matches wins, should one kata's id begin another's.
    for k in sorted(katas, key=lambda k: -len(k.id)):
        if re.search(rf"(?<![\w-]){re.escape(k.id)}(?!\w)", text) or Path(k.notebook).stem in text:
            return k.id
    return None


def read(path: Path, katas) -> Run:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise SystemExit(f"{path}: not a JUnit file pytest wrote ({exc})") from None
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    wall = sum(float(s.get("time", 0) or 0) for s in suites)
    cases = [Case(group_of(tc.get("classname", "")), kata_of(tc.get("classname", ""), tc.get("name", ""), katas),
                  float(tc.get("time", 0) or 0)) for tc in root.iter("testcase")]
    return Run(path.name, wall, cases)


def table(run: Run, katas, markdown: bool) -> str:
    """Two tables: by group, then by kata (its share split by where it is spent)."""
    groups = [("", "tests", "work (s)", "share of the wall (s)")]
    by_group, count = defaultdict(float), defaultdict(int)
    for c in run.cases:
        by_group[c.group] += c.seconds
        count[c.group] += 1
    for g in sorted(by_group, key=by_group.get, reverse=True):
        groups.append((g, str(count[g]), f"{by_group[g]:.0f}", f"{run.share(by_group[g]):.0f}"))
    groups.append(("whole run", str(len(run.cases)), f"{run.work:.0f}", f"{run.wall:.0f} (wall)"))
    rows = [("kata", "tests", "work (s)", f"share of the wall (s), budget {BUDGET_PER_KATA:.0f}",
             *(f"of it {label}" for label in KATA_PARTS.values()))]
    by_kata, kcount = defaultdict(float), defaultdict(int)
    by_part = defaultdict(float)  # (kata, part): work
    for c in run.cases:
        if c.kata:
            by_kata[c.kata] += c.seconds
            kcount[c.kata] += 1
            by_part[c.kata, c.group if c.group in KATA_PARTS else "other"] += c.seconds
    for k in katas:
        if k.id in by_kata:
            share = run.share(by_kata[k.id])
            rows.append((k.id, str(kcount[k.id]), f"{by_kata[k.id]:.0f}",
                         f"{share:.0f}" + ("  OVER" if share > BUDGET_PER_KATA else ""),
                         *(f"{run.share(by_part[k.id, part]):.0f}" for part in KATA_PARTS)))
    return render(groups, markdown) + "\n\n" + render(rows, markdown)


def render(rows, markdown: bool) -> str:
    if markdown:
        out = []
        for r in rows:
            out.append("| " + " | ".join(r) + " |")
            if r[0] in ("", "kata") and r[1] == "tests":
                out.append("| " + " | ".join("---" for _ in r) + " |")
        return "\n".join(out)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(r, widths)))
                     for r in rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, help="JUnit files pytest wrote (--junitxml)")
    parser.add_argument("--run", action="store_true", help="run the suite first (arguments after -- go to pytest)")
    parser.add_argument("--markdown", action="store_true", help="tables in Markdown, for the README")
    args, extra = parser.parse_known_args(argv)
    extra = [a for a in extra if a != "--"]
    katas = catalogue.load()
    files = list(args.files)
    if args.run:
        out = Path(tempfile.mkdtemp(prefix="suite-cost-")) / "run.xml"
        subprocess.run([str(Path(sys.executable).with_name("pytest")), f"--junitxml={out}", *extra], cwd=ROOT,
                       check=False, env=os.environ)
        files.append(out)
    if not files:
        parser.error("name a JUnit file, or --run")
    runs = [read(f, katas) for f in files]
    for run in runs:
        print(f"{'## ' if args.markdown else '=== '}{run.name}: {len(run.cases)} tests, {run.wall:.0f} s wall, "
              f"{run.work:.0f} s of work ({run.work / run.wall if run.wall else 0:.2f} tests' seconds per second)")
        print(table(run, katas, args.markdown))
        print()
    if len(runs) > 1:
        print(f"all files: {sum(r.wall for r in runs):.0f} s wall, {sum(r.work for r in runs):.0f} s of work")
    return 0


if __name__ == "__main__":
    sys.exit(main())
