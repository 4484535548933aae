"""A scan's report as text (for people), JSON (for scripts) or SARIF 2.1.0 (for code scanning)."""
from __future__ import annotations

import functools
import json
from pathlib import Path

from ..model import catalogue

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
HOME = "https://github.com/loop-katas/loop-katas"


@functools.lru_cache
def notebook(rule: str) -> str:
    """Where rule LKnn is taught: kata nn's notebook, from the catalogue when this is a Loop Katas folder."""
    number = int(rule[2:])
    try:
        kata = next(k for k in catalogue.load() if k.number == number)
        return f"notebooks/{kata.notebook}"
    except Exception:  # noqa: BLE001 - scanning another project: no catalogue at hand
        return f"Loop Katas, kata {number:02d}"


def text(report, rules: dict, timed: bool = True) -> str:
    taught = {rule: notebook(rule) for rule in rules}
    lines = [f"{f.path}:{f.line}:{f.column}: {f.rule} {f.message} [{taught[f.rule]}]" for f in report.findings]
    lines += [f"warning: {w}" for w in report.warnings]
    count = len(report.findings)
    if not report.files:  # "No findings in 0 files" would read as a clean bill
        summary = ("Nothing scanned: no file could be read (see the warnings above)" if report.warnings
                   else "Nothing scanned: no Python file or deploy file was found")
        return "\n".join([*lines, summary])
    summary = (f"{count} finding{'s' if count != 1 else ''}" if count else "No findings") + \
        f" in {report.files} file{'s' if report.files != 1 else ''} ({report.lines} lines" + \
        (f", {report.seconds:.2f} s)" if timed else ")")
    if count:
        summary += "; silence one on its line with `# loopkata: ignore[LKnn]`"
    return "\n".join([*lines, summary])


def as_json(report, rules: dict) -> str:
    return json.dumps({
        "findings": [{**f.to_json(), "notebook": notebook(f.rule)} for f in report.findings],
        "warnings": report.warnings,
        "files": report.files, "lines": report.lines, "seconds": round(report.seconds, 3),
    }, indent=2)


def _uri(path: str) -> str:
    p = Path(path)
    return p.as_posix() if not p.is_absolute() else p.as_uri()


def sarif(report, rules: dict) -> str:
    ids = list(rules)
    results = [{
        "ruleId": f.rule,
        "ruleIndex": ids.index(f.rule),
        "level": "warning",
        "message": {"text": f.message},
        "locations": [{"physicalLocation": {
            "artifactLocation": {"uri": _uri(f.path), **({} if Path(f.path).is_absolute() else {"uriBaseId": "%SRCROOT%"})},
            "region": {"startLine": f.line, "startColumn": f.column},
        }}],
    } for f in report.findings]
    driver = {
        "name": "loopkata", "informationUri": HOME,
        "rules": [{
            "id": rule, "name": rule,
            "shortDescription": {"text": description},
            "fullDescription": {"text": f"{description}. Taught in {notebook(rule)}."},
            "helpUri": f"{HOME}/blob/HEAD/{notebook(rule)}" if notebook(rule).startswith("notebooks/") else HOME,
            "defaultConfiguration": {"level": "warning"},
        } for rule, description in rules.items()],
    }
    run = {"tool": {"driver": driver}, "results": results,
           "invocations": [{"executionSuccessful": True,
                            "toolExecutionNotifications": [{"level": "warning", "message": {"text": w}}
                                                           for w in report.warnings]}]}
    return json.dumps({"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}, indent=2)


FORMATS = {"text": text, "json": as_json, "sarif": sarif}
