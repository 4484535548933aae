"""`loopkata scan` on the command line, and an exit status a CI job can trust.

0: nothing found (warnings alone are not findings); 1: findings; 2: the scan could
not run as asked (an unknown rule, a path that does not exist) or failed in its own
code. A failure of the scanner's own must never read as 1, "your code has findings".
"""
from __future__ import annotations

import sys

from . import RULES, BadSelection, output, rule_ids, scan


def run(paths: list[str], select: str | None, ignore: str | None, fmt: str) -> int:
    try:
        chosen, skipped = rule_ids(select), rule_ids(ignore)
    except BadSelection as exc:
        print(exc, file=sys.stderr)
        return 2
    try:
        report = scan(paths, chosen, skipped)
    except FileNotFoundError as exc:
        print(exc, file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - anything else is the scanner's own fault: one line, exit 2
        what = " ".join(str(exc).split())[:200]
        print(f"loopkata scan failed in its own code ({exc.__class__.__name__}{': ' + what if what else ''}); "
              "nothing was judged. This is a bug in loopkata, not a finding in your code.", file=sys.stderr)
        return 2
    rules = {r: d for r, d in RULES.items() if r in ((chosen or set(RULES)) - (skipped or set()))}
    print(output.FORMATS[fmt](report, rules))
    return 1 if report.findings else 0
