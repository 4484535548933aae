"""A learner's record for the facilitator: `loopkata progress --export FILE [--name NAME]`.

The export (JSON, "format": "loopkata-progress", "version": 1) holds:

    learner, exported_at (ISO 8601, UTC)
    katas: {id: {number, title, status, checks, first_check_at, solved_at,
                 seconds_to_solve (first check to first pass; null if not solved or unknown),
                 hints_seen (the catalogue's numbers of the hints shown, from 1), solution_seen,
                 last_verdict, failing: [{title, outcome, message}] (the last check's),
                 files: [{path (relative to the project), text | base64}]}}

The learner hands FILE over; the facilitator reads it with `loopkata room` (loopkata.room.exports).
"""
from __future__ import annotations

import base64
import getpass
import json
import os
import sys
from datetime import datetime
from pathlib import Path

from ..model import catalogue
from ..model.paths import shown_path
from . import progress

FORMAT, VERSION = "loopkata-progress", 1


def learner_name(given: str | None = None) -> str:
    if given and given.strip():
        return given.strip()
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name and no passwd entry (some containers)
        return os.environ.get("USER") or "unknown"


def _parse_time(text) -> datetime | None:
    try:
        moment = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None
    return moment if moment.tzinfo else None


def seconds_to_solve(entry: dict, status: str) -> float | None:
    """From the first check to the first passing one; None if not solved or the first check's time is unknown."""
    start, end = _parse_time(entry.get("first_check_at")), _parse_time(entry.get("solved_at"))
    if status != progress.SOLVED or start is None or end is None or end < start:
        return None
    return round((end - start).total_seconds(), 1)


def _file_record(path: Path, root: Path) -> dict:
    data = path.read_bytes()
    rel = path.relative_to(root).as_posix()  # "katas/...": where the facilitator's copy puts it
    try:
        return {"path": rel, "text": data.decode("utf-8")}
    except UnicodeDecodeError:  # kept byte for byte: the re-grade must see what the learner's grader saw
        return {"path": rel, "base64": base64.b64encode(data).decode("ascii")}


def export(name: str | None = None, with_files: bool = True) -> dict:
    """This learner's record for the facilitator: progress per kata and (unless left out) the learner's kata files."""
    katas = catalogue.load()
    state = progress.load_state()
    out = {"format": FORMAT, "version": VERSION, "learner": learner_name(name),
           "exported_at": progress.utc_now(), "katas": {}}
    for kata in katas:
        entry, status = state.get(kata.id, {}), progress.status(kata)
        files = [f for f in catalogue.files_of(kata.kata_path) if f.is_file()] if with_files else []
        out["katas"][kata.id] = {
            "number": kata.number,
            "title": kata.title,
            "status": status,
            "checks": entry.get("checks", 1 if entry.get("checked_at") else 0),
            "first_check_at": entry.get("first_check_at"),
            "solved_at": entry.get("solved_at"),
            "seconds_to_solve": seconds_to_solve(entry, status),
            "hints_seen": [i + 1 for i in entry.get("hints_seen", [])],
            "solution_seen": entry.get("solution_seen", False),
            "last_verdict": entry.get("last_verdict", ""),
            "failing": [{"title": str(t.get("title", "")), "outcome": str(t.get("outcome", "")),
                         "message": str(t.get("message", ""))} for t in entry.get("failing", [])],
            "files": [_file_record(f, kata.root) for f in files],
        }
    return out


def write_export(path: Path, name: str | None = None, with_files: bool = True) -> str:
    """Write the export to `path` ("-": standard output); returns the line to print."""
    data = export(name, with_files)
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if str(path) == "-":
        sys.stdout.write(text)
        return ""
    path = Path(path)
    path.write_text(text, encoding="utf-8")
    solved = sum(k["status"] == progress.SOLVED for k in data["katas"].values())
    files = "with your kata files" if with_files else "without your kata files"
    return (f"Wrote {data['learner']}'s progress ({solved} of {len(data['katas'])} solved, {files}) "
            f"to {shown_path(path)}: hand this file to your facilitator.")


def cmd_export(args) -> int:
    """`loopkata progress --export FILE [--name NAME]`."""
    try:
        said = write_export(args.export, args.name, with_files=not args.without_files)
    except OSError as exc:
        print(f"Could not write your export to {shown_path(args.export)} ({exc.strerror or exc}).", file=sys.stderr)
        return 1
    if said:
        print(said)
    return 0
