"""Findings as a person reads them (a block per finding) and as a JSON report."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from .findings import KINDS, Finding, kata_label


def text(f: Finding) -> str:
    kind = f.kind
    lines = [f"{f.code} {kind.name}: {f.message}"]
    lines += [f"    at {w}" if not w.startswith(("used ", "taken ", "waiting ", "holding ")) else f"    {w}" for w in f.where]
    lines += [f"    {d}" for d in f.details]
    lines.append(f"    taught by {kata_label(kind)}")
    return "\n".join(lines)


def summary(findings: list[Finding]) -> str:
    counts = Counter(f.code for f in findings)
    return ", ".join(f"{n} {code} {KINDS[code].name}" for code, n in sorted(counts.items())) or "no findings"


def write_json(path: Path, findings: list[Finding], settings_source: str, tests: int) -> None:
    data = {"tool": "loopkata guard", "settings": settings_source, "tests": tests,
            "counts": dict(Counter(f.code for f in findings)),
            "findings": [f.as_dict() for f in findings]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
