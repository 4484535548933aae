"""Before grading: is the implementation something the grader can import, and can Python read it?

Each check returns a paragraph for the learner ("" when all is well), so a file saved in the
wrong encoding or with a syntax error is one clear sentence instead of a failed test run.
"""
from __future__ import annotations

import tokenize
from pathlib import Path

from ..model.paths import display_path


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def _source_problem(f: Path) -> str:
    """A paragraph if Python could not read or compile `f`, else ''."""
    try:
        with tokenize.open(f) as handle:  # honours a `# coding:` line, as an import does
            source = handle.read()
    except OSError as exc:
        return f"Could not read {display_path(f)}: {exc.strerror}."
    except (UnicodeDecodeError, SyntaxError) as exc:
        data = f.read_bytes()
        where = f" (line {_line_of(data, exc.start)}, byte 0x{data[exc.start]:02x})" if isinstance(exc, UnicodeDecodeError) else ""
        return (
            f"{display_path(f)} is not valid text in its encoding{where}: {exc}. Python reads a source "
            "file as UTF-8 unless a `# coding: ...` line at its top names another encoding, so no test "
            "could run. Save the file as UTF-8 (or fix its coding line) and check again."
        )
    if "\0" in source:
        return (
            f"{display_path(f)} contains a null byte on line {source.count(chr(10), 0, source.index(chr(0))) + 1}, "
            "which Python refuses in source code, so no test could run. Delete that character and check again."
        )
    try:
        compile(source, str(f), "exec")
    except SyntaxError as exc:
        line = (exc.text or "").rstrip()
        shown = f"\n    {line.strip()}" if line else ""
        return (
            f"{display_path(f)} has a syntax error on line {exc.lineno}: {exc.msg}.{shown}\n"
            "Python stops reading a file at its first syntax error, so no test could run. "
            "Fix that line and check again."
        )
    return ""


def syntax_problem(impl: Path) -> str:
    """A paragraph naming the first unreadable file or syntax error in the implementation, or ''."""
    files = sorted(impl.rglob("*.py")) if impl.is_dir() else [impl]
    for f in files:
        problem = _source_problem(f)
        if problem:
            return problem
    return ""


def impl_problem(impl: Path) -> str:
    """A paragraph if `impl` is not something the grader can import, else ''."""
    if not impl.exists():
        return f"There is no implementation at {display_path(impl)}."
    if impl.is_dir():
        if not (impl / "__init__.py").is_file():
            return (f"{display_path(impl)} is a folder but not a Python package (it has no __init__.py), "
                    "so the grader cannot import it. Give the kata's .py file or its package folder.")
        return ""
    if not impl.is_file() or impl.suffix not in (".py", ".diff"):  # .diff: a decoy's or variant's difference
        what = "a regular file" if impl.is_file() else "not a regular file"
        return (f"{display_path(impl)} exists, but it is {what}, not a Python file (.py) or package folder, "
                "so the grader cannot import it. Give the kata's .py file or its package folder.")
    return ""
