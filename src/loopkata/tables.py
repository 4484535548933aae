"""The tables the docs carry, made from the catalogue, the decoys and the testers' records.

Each sits between `<!-- NAME ... -->` and `<!-- end NAME -->` markers. `python -m loopkata.tables --write`
rewrites them; tests/test_setup.py fails when one is stale, so the docs cannot drift.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from . import catalogue, effort

# (file, marker name, what makes the table)
BLOCKS = (
    ("README.md", "kata-table", catalogue.markdown_table),
    ("docs/workshop.md", "wrong-fixes", catalogue.wrong_fixes_table),
    ("docs/workshop.md", "solve-times", effort.guide_table),
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
        raise SystemExit("usage: python -m loopkata.tables --write")
    done = write(catalogue.project_root())
    print("rewrote " + ", ".join(done) if done else "every table is up to date")
