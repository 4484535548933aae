"""Findings as a person reads them (a block per finding) and as a JSON report."""
from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
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


class ReportError(OSError):
    """The JSON report cannot be written; its message is one line that names the file."""


def _shown(path: Path) -> str:
    """The report's path for a one-line message: a name of thousands of characters is cut."""
    text = str(path)
    return text if len(text) <= 160 else f"{text[:100]}...{text[-40:]} (a path of {len(text)} characters)"


def _refuse_unless_regular(path: Path) -> None:
    """ReportError if `path` exists and is not a regular file: the report is renamed onto its path,
    and renaming onto a FIFO or a device (/dev/null, as root) would put a regular file in its place."""
    try:
        mode = os.stat(path).st_mode  # through a link: a link to a FIFO is refused as the FIFO is
    except FileNotFoundError:
        return
    except OSError:
        return  # a name too long, a folder missing: said by the write below, with its reason
    if not stat.S_ISREG(mode):
        what = "a folder" if stat.S_ISDIR(mode) else "not a regular file (a FIFO, a device or a socket)"
        raise ReportError(f"cannot write the report to {_shown(path)}: it is {what}; name a new or a regular file")


def write_json(path: Path, findings: list[Finding], settings_source: str, tests: int, complete: bool = True) -> None:
    """Write the report whole or not at all: a run that dies between two writes leaves the previous one.

    `complete` is false while the run goes on, so a report left by a run that crashed says so."""
    data = {"tool": "loopkata guard", "complete": complete, "settings": settings_source, "tests": tests,
            "counts": dict(Counter(f.code for f in findings)),
            "findings": [f.as_dict() for f in findings]}
    if "\0" in str(path):  # no file system takes it; open() would raise ValueError, not OSError
        raise ReportError(f"cannot write the report to {_shown(path)!r}: a path cannot hold a NUL byte")
    _refuse_unless_regular(path)
    partial = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # A fresh file of a name nobody could guess or plant a link under (O_EXCL), then renamed
        # onto the report, so that a reader never sees half of it.
        fd, name = tempfile.mkstemp(prefix=".loopkata-report-", suffix=".partial", dir=path.parent)
        partial = Path(name)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(data, indent=1) + "\n")
        os.chmod(partial, 0o644)  # as a plain open() would have made it, not mkstemp's 0600
        os.replace(partial, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            if partial is not None:
                partial.unlink(missing_ok=True)
        raise ReportError(f"cannot write the report to {_shown(path)}: {exc.strerror or exc}") from None
