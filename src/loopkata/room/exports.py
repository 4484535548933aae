"""A workshop room's records: each learner's export, the facilitator's table and figure, and re-grading.

A learner runs `loopkata progress --export FILE [--name NAME]` and hands FILE over.
The export (JSON, "format": "loopkata-progress", "version": 1) holds:

    learner, exported_at (ISO 8601, UTC)
    katas: {id: {number, title, status, checks, first_check_at, solved_at,
                 seconds_to_solve (first check to first pass; null if not solved or unknown),
                 hints_seen (the catalogue's numbers of the hints shown, from 1), solution_seen,
                 last_verdict, failing: [{title, outcome, message}] (the last check's),
                 files: [{path (relative to the project), text | base64}]}}

The facilitator runs `loopkata room EXPORT...` (files, or folders of them) for a
table learner x kata and a PNG figure, and `loopkata room --regrade EXPORT...` to
grade every learner's files again on this machine (loopkata.regrade: a throw-away copy and a
sandbox). A learner's code runs inside the learner's own grader, where it can fool it; the
re-grade is stronger evidence, and every claim it contradicts is marked.

An export is a learner's file, read as hostile: one that is not a usable export (too deep,
numbers not finite, text not Unicode, a file path the re-grade could not write as one file
of the kata) is skipped with one line, the same file named twice counts once, and learners'
text is printed with its control characters made visible.
"""
from __future__ import annotations

import base64
import binascii
import getpass
import hashlib
import json
import math
import os
import re
import statistics
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath

from . import catalogue, progress, sandbox
from .regrade import GRADED, NOTHING, STARTER, UNAVAILABLE, Regrade, regrade_one
from .testing import display_path

FORMAT, VERSION = "loopkata-progress", 1
STATUSES = (progress.SOLVED, progress.ATTEMPTED, progress.UNTOUCHED, progress.MISSING)
MARK = {progress.SOLVED: "✓", progress.ATTEMPTED: "✗", progress.UNTOUCHED: "·", progress.MISSING: "?"}
# What a loaded export may hold. An export nests 5 deep; a re-grade writes each file under a
# temporary folder, so a name must fit the file system's 255 bytes and the whole path stay short.
MAX_DEPTH, MAX_NUMBER, MAX_NAME_BYTES, MAX_PATH_BYTES = 16, 10**9, 255, 1024


class BadExport(Exception):
    """An export that cannot be used; str() says what is wrong with it, in one line."""


def _shown(path) -> str:
    """A path as a person reads it: relative when under the current folder, else absolute."""
    shown = display_path(path)
    return str(Path(path).absolute()) if shown.startswith("..") else shown


# --- writing an export ----------------------------------------------------------

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
            f"to {_shown(path)}: hand this file to your facilitator.")


# --- reading exports ----------------------------------------------------------------

@dataclass
class KataRecord:
    status: str
    checks: int | None
    seconds_to_solve: float | None
    hints_seen: list[int]
    failing: list[dict]
    files: dict[str, bytes]  # path relative to the project -> bytes
    number: int | None = None
    title: str = ""


@dataclass
class Record:
    source: Path
    learner: str
    exported_at: str
    katas: dict[str, KataRecord] = field(default_factory=dict)


def _kind(value) -> str:
    return progress._json_type(value)


def visible(text: str) -> str:
    """`text` safe to print: each character a terminal would act on (escape sequences, carriage
    returns, bidirectional overrides) is written as its Python escape instead."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape", "backslashreplace").decode("ascii")
                   for c in text)


def _brief(text: str, limit: int = 60) -> str:
    """A learner's string quoted for a one-line message, cut when long; repr() shows what a
    terminal would act on as escapes, as visible() does."""
    return repr(text if len(text) <= limit else text[:limit - 1] + "…")


def _need(mapping: dict, key: str, kinds, where: str, optional: bool = False):
    if key not in mapping:
        if optional:
            return None
        raise BadExport(f"{where} has no `{key}`")
    value = mapping[key]
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, kinds):  # JSON true is no number
        raise BadExport(f"{where} has a `{key}` that is a JSON {_kind(value)}")
    return value


def _count(mapping: dict, key: str, where: str) -> int | None:
    """A whole number from 0 to MAX_NUMBER, or None when absent."""
    value = _need(mapping, key, int, where, optional=True)
    if value is not None and not 0 <= value <= MAX_NUMBER:
        raise BadExport(f"{where} has a `{key}` of {value}, not a whole number from 0 to {MAX_NUMBER}")
    return value


def _seconds(mapping: dict, key: str, where: str) -> float | None:
    """A finite number of seconds from 0 to MAX_NUMBER, or None when absent."""
    value = _need(mapping, key, (int, float), where, optional=True)
    if value is None:
        return None
    try:
        seconds = float(value)
    except OverflowError:  # a whole number too large for a float
        seconds = math.inf
    if not (math.isfinite(seconds) and 0 <= seconds <= MAX_NUMBER):
        raise BadExport(f"{where} has a `{key}` that is not a number of seconds from 0 to {MAX_NUMBER}")
    return seconds


def _safe_path(text: str, kata_id: str) -> str:
    """The file's path under katas/, normalised; BadExport for any path the re-grade could not write
    as the one file it names inside a throw-away copy."""
    where = f"kata {_brief(kata_id)} has a file"
    if not text.isprintable():  # NUL, control characters, escape sequences: no kata file is named so
        raise BadExport(f"{where} whose path has a control character: {_brief(text)}")
    path = PurePosixPath(text)
    if path.is_absolute() or ".." in path.parts or len(path.parts) < 2 or path.parts[0] != "katas" or "\\" in text:
        raise BadExport(f"{where} outside katas/: {_brief(text)}")
    if any(len(part.encode("utf-8")) > MAX_NAME_BYTES for part in path.parts):
        raise BadExport(f"{where} with a name longer than {MAX_NAME_BYTES} bytes: {_brief(text)}")
    if len(path.as_posix().encode("utf-8")) > MAX_PATH_BYTES:
        raise BadExport(f"{where} whose path is longer than {MAX_PATH_BYTES} bytes: {_brief(text)}")
    return path.as_posix()


def _file_tree_problem(files: dict[str, bytes], kata: catalogue.Kata | None) -> str:
    """What makes these paths impossible as one tree of files ("" if nothing): a path that is a file
    and also a folder of another, or a file inside a kata that is a single file."""
    for path in files:
        folder = next((p.as_posix() for p in PurePosixPath(path).parents if p.as_posix() in files), None)
        if folder:
            return f"{_brief(folder)} both as a file and as the folder of {_brief(path)}"
    if kata is not None and not kata.kata_path.is_dir():
        own = (PurePosixPath("katas") / kata.path).as_posix()
        inside = sorted(p for p in files if PurePosixPath(own) in PurePosixPath(p).parents)
        if inside:
            return f"{_brief(inside[0])} inside {own}, which is a single file"
    return ""


def _kata_record(kata_id: str, data, kata: catalogue.Kata | None = None) -> KataRecord:
    """One kata's entry; `kata` is this catalogue's kata of that id, when there is one here."""
    where = f"kata {_brief(kata_id)}"
    if not isinstance(data, dict):
        raise BadExport(f"{where} is a JSON {_kind(data)}, not an object")
    status = _need(data, "status", str, where)
    if status not in STATUSES:
        raise BadExport(f"{where} has the status {_brief(status)}, not one of {', '.join(STATUSES)}")
    checks = _count(data, "checks", where)
    seconds = _seconds(data, "seconds_to_solve", where)
    hints = _need(data, "hints_seen", list, where, optional=True) or []
    if not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i <= MAX_NUMBER for i in hints):
        raise BadExport(f"{where} has hints_seen that are not all whole numbers from 0 to {MAX_NUMBER}")
    failing = []
    for t in _need(data, "failing", list, where, optional=True) or []:
        if not isinstance(t, dict) or not isinstance(t.get("title"), str):
            raise BadExport(f"{where} has a failing test without a title")
        failing.append({"title": visible(t["title"]), "outcome": visible(str(t.get("outcome", ""))),
                        "message": visible(str(t.get("message", "")))})
    files = {}
    for f in _need(data, "files", list, where, optional=True) or []:
        if not isinstance(f, dict) or not isinstance(f.get("path"), str):
            raise BadExport(f"{where} has a file without a path")
        path = _safe_path(f["path"], kata_id)
        if path in files:
            raise BadExport(f"{where} has the file {path} twice")
        if isinstance(f.get("text"), str):
            files[path] = f["text"].encode("utf-8")  # encodable: _unicode_problem checked every string
        elif isinstance(f.get("base64"), str):
            try:
                files[path] = base64.b64decode(f["base64"], validate=True)
            except (binascii.Error, ValueError):
                raise BadExport(f"{where} has a file {path} whose base64 is not valid") from None
        else:
            raise BadExport(f"{where} has a file {path} with neither text nor base64")
    clash = _file_tree_problem(files, kata)
    if clash:
        raise BadExport(f"{where} has the file {clash}")
    number = data.get("number")
    if isinstance(number, bool) or not isinstance(number, int) or not 0 <= number <= MAX_NUMBER:
        number = None
    title = data.get("title")
    return KataRecord(status=status, checks=checks, seconds_to_solve=seconds, hints_seen=hints, failing=failing,
                      files=files, number=number, title=visible(title) if isinstance(title, str) else "")


_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_JSON_BRACKET = re.compile(r"[\[\]{}]")


def _too_deep(text: str) -> bool:
    """Whether the JSON in `text` nests arrays and objects more than MAX_DEPTH deep, counted
    without parsing: the parser recurses once per level and a deep enough file exhausts the stack."""
    depth = 0
    for bracket in _JSON_BRACKET.finditer(_JSON_STRING.sub('""', text)):
        depth += 1 if bracket.group() in "[{" else -1
        if depth > MAX_DEPTH:
            return True
    return False


def _not_finite(constant: str):
    raise BadExport(f"has the number {constant}, which JSON does not allow (numbers must be finite)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400 parses as infinity
        raise BadExport(f"has the number {_brief(text)}, too large to be finite")
    return value


def _unicode_problem(data) -> str:
    """"" if every string (keys too) can be written as UTF-8, else what cannot: JSON's \\ud800
    escapes make lone surrogates, which no file or terminal takes."""
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack += item.keys()
            stack += item.values()
        elif isinstance(item, list):
            stack += item
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return f"has text that is not valid Unicode (a lone surrogate in {_brief(item)})"
    return ""


def parse_export(raw: bytes, source: Path, katas: dict[str, catalogue.Kata] | None = None) -> Record:
    """One learner's export from its bytes; BadExport (one line) if it is not a usable export.
    `katas`: this catalogue's katas by id, to check the files of the katas it knows."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadExport(f"is not valid JSON ({exc})") from None
    if _too_deep(text):
        raise BadExport(f"is nested too deep (more than {MAX_DEPTH} levels of arrays and objects)")
    try:
        data = json.loads(text, parse_constant=_not_finite, parse_float=_finite_float)
    except RecursionError:  # _too_deep should have seen it first
        raise BadExport(f"is nested too deep (more than {MAX_DEPTH} levels of arrays and objects)") from None
    except ValueError as exc:
        raise BadExport(f"is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise BadExport(f"is a JSON {_kind(data)}, not a loopkata progress export")
    if data.get("format") != FORMAT:
        raise BadExport(f"is not a loopkata progress export (no \"format\": \"{FORMAT}\"); "
                        "learners write one with `loopkata progress --export FILE`")
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BadExport("has no format version (a whole number from 1)")
    if version > VERSION:
        raise BadExport(f"was written by a newer loopkata (format version {version}; this one reads up to {VERSION})")
    unreadable = _unicode_problem(data)
    if unreadable:
        raise BadExport(unreadable)
    learner = _need(data, "learner", str, "the export")
    if not learner.strip():
        raise BadExport("names no learner")
    exported_at = _need(data, "exported_at", str, "the export")
    entries = _need(data, "katas", dict, "the export")
    katas = _catalogue_katas() if katas is None else katas
    records = {}
    try:
        for kata_id, entry in entries.items():
            shown = visible(kata_id)
            if shown in records:
                raise BadExport(f"names the kata {_brief(shown)} twice")
            records[shown] = _kata_record(kata_id, entry, katas.get(kata_id))
    except BadExport as exc:
        raise BadExport(f"is not a valid export: {exc}") from None
    return Record(source=Path(source), learner=visible(learner.strip()), exported_at=visible(exported_at),
                  katas=records)


def _catalogue_katas() -> dict[str, catalogue.Kata]:
    """This catalogue's katas by id; none when the room is read outside a checkout."""
    try:
        return {k.id: k for k in catalogue.load()}
    except catalogue.CatalogueError:
        return {}


def load_export(path: Path) -> Record:
    """One learner's export; BadExport (one line) if it cannot be read or is not an export."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise BadExport(f"could not be read ({exc.strerror or exc})") from None
    return parse_export(raw, path)


def export_paths(arguments: list[Path]) -> tuple[list[Path], list[str]]:
    """The export files named, folders expanded to their *.json; and one line per argument that gives none."""
    paths, problems = [], []
    for arg in map(Path, arguments):
        if arg.is_dir():
            found = sorted(p for p in arg.glob("*.json") if p.is_file())
            if not found:
                problems.append(f"{_shown_name(arg)}: a folder with no .json export in it")
            paths += found
        elif arg.exists():
            paths.append(arg)
        else:
            problems.append(f"{_shown_name(arg)}: no such file or folder")
    return paths, problems


def _shown_name(path) -> str:
    """An export's path for the terminal: file names in a collected folder are the learners' choice."""
    return visible(display_path(path))


def load_room(arguments: list[Path]) -> tuple[list[Record], list[str]]:
    """Every readable export, once, and one line for each file or argument that is not used."""
    paths, problems = export_paths(arguments)
    katas = _catalogue_katas()
    records, by_place, by_content = [], {}, {}
    for path in paths:
        place = path.resolve()
        if place in by_place:
            problems.append(f"{_shown_name(path)}: named twice (as {_shown_name(by_place[place])} too), counted once")
            continue
        by_place[place] = path
        try:
            raw = path.read_bytes()
        except OSError as exc:
            problems.append(f"{_shown_name(path)}: could not be read ({exc.strerror or exc})")
            continue
        digest = hashlib.sha256(raw).digest()
        if digest in by_content:
            problems.append(f"{_shown_name(path)}: the same export, byte for byte, as "
                            f"{_shown_name(by_content[digest])}, counted once")
            continue
        by_content[digest] = path
        try:
            records.append(parse_export(raw, path, katas))
        except BadExport as exc:
            problems.append(f"{_shown_name(path)}: {exc}")
    return records, problems


# --- the room: table and figure ----------------------------------------------------

@dataclass(frozen=True)
class Column:
    id: str
    number: int | None
    title: str

    @property
    def label(self) -> str:
        return f"{self.number:02d}" if self.number is not None else self.id


def columns(records: list[Record]) -> list[Column]:
    """The katas the exports name: in this catalogue's order when there is one here, then any others by id."""
    named = {kata_id: rec for r in records for kata_id, rec in r.katas.items()}
    try:
        known = [Column(k.id, k.number, k.title) for k in catalogue.load() if k.id in named]
    except catalogue.CatalogueError:  # a room can be read outside a checkout; re-grading cannot
        known = []
    taken = {c.number for c in known}  # a number this catalogue gives another kata is shown as the id instead
    others = [Column(kata_id, None if named[kata_id].number in taken else named[kata_id].number, named[kata_id].title)
              for kata_id in set(named) - {c.id for c in known}]
    return known + sorted(others, key=lambda c: (c.number is None, c.number or 0, c.id))


def names(records: list[Record]) -> list[str]:
    """Each record's learner, with its file's name when two exports name the same learner."""
    count = {}
    for r in records:
        count[r.learner] = count.get(r.learner, 0) + 1
    return [r.learner if count[r.learner] == 1 else f"{r.learner} ({visible(r.source.name)})" for r in records]


def cell(rec: KataRecord | None) -> str:
    """"✓ 3": the status's mark and how many checks ran ("?": not known); a bare "·" for a kata never checked."""
    if rec is None:
        return "-"
    if rec.checks == 0:
        return MARK[rec.status]
    return f"{MARK[rec.status]} {'?' if rec.checks is None else rec.checks}"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def solved_in_time(records: list[Record], kata_id: str) -> list[KataRecord]:
    """The records of `kata_id` that solved it and know how long that took."""
    return [rec for r in records if (rec := r.katas.get(kata_id)) is not None
            and rec.status == progress.SOLVED and rec.seconds_to_solve is not None]


def median_seconds(records: list[Record], kata_id: str) -> float | None:
    times = [rec.seconds_to_solve for rec in solved_in_time(records, kata_id)]
    return statistics.median(times) if times else None


def stuck(records: list[Record], kata_id: str) -> list[tuple[str, int]]:
    """The hidden tests failing at the last check of learners who have not solved the kata, most learners first."""
    count: dict[str, int] = {}
    for r in records:
        rec = r.katas.get(kata_id)
        if rec is None or rec.status == progress.SOLVED:
            continue
        for title in {t["title"] for t in rec.failing}:
            count[title] = count.get(title, 0) + 1
    return sorted(count.items(), key=lambda kv: (-kv[1], kv[0]))


def table(records: list[Record], cols: list[Column], marked: set[tuple[int, str]] = frozenset()) -> str:
    """The room as text: one row per learner, one column per kata; `marked` (record index, kata id) get a "!"."""
    who = names(records)
    rows = [[n] + [cell(r.katas.get(c.id)) + ("!" if (i, c.id) in marked else "") for c in cols]
            for i, (n, r) in enumerate(zip(who, records))]
    solved = ["solved"] + [f"{sum(1 for r in records if getattr(r.katas.get(c.id), 'status', '') == progress.SOLVED)}"
                           f"/{len(records)}" for c in cols]
    median = ["median"] + [duration(median_seconds(records, c.id)) for c in cols]
    header = ["learner"] + [c.label for c in cols]
    every = [header, *rows, solved, median]
    widths = [max(len(row[i]) for row in every) for i in range(len(header))]

    def line(row):
        return "  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip()

    out = [f"{len(records)} learner{'s' if len(records) != 1 else ''}: ✓ solved, ✗ attempted, · untouched, "
           "? missing; the number is how many checks ran" + ("; ! the re-grade disagrees" if marked else "")]
    out += ["", line(header), *map(line, rows), "", line(solved), line(median) + "   (time from first check to solved)"]
    out += ["", "Katas: " + ", ".join(f"{c.label} {c.id}" for c in cols if c.label != c.id)]
    blocked = [(c, stuck(records, c.id)) for c in cols]
    blocked = [(c, s) for c, s in blocked if s]
    if blocked:
        out += ["", "Where the room is stuck (hidden tests failing at the last check, learners not solved):"]
        for c, tests in blocked:
            for title, n in tests[:3]:
                out.append(f"  {c.label} {c.id}: {n} learner{'s' if n != 1 else ''}: {title}")
    return "\n".join(out)


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
        raise FigureFormatError(f"cannot save a figure as .{visible(suffix)} ({_shown(path)}); "
                                f"name a file ending in .png, .svg or .pdf (or .{', .'.join(sorted(writable))})")
    return suffix


class FigureFormatError(ValueError):
    """A figure path whose extension names no format matplotlib writes; str() is one line."""


# --- re-grading (loopkata.regrade grades; this walks the room) ---------------------

def regrade(records: list[Record], announce=print) -> tuple[list[Regrade], list[str]]:
    """Re-grade every kata of every record that claims something; one Regrade each, and one
    line per kata this catalogue does not have."""
    katas = {k.id: k for k in catalogue.load()}
    results, problems = [], []
    for i, (name, record) in enumerate(zip(names(records), records)):
        for kata_id, rec in record.katas.items():
            kata = katas.get(kata_id)
            if kata is None:
                problems.append(f"{visible(display_path(record.source))}: kata {visible(kata_id)!r} is not in this "
                                "catalogue, so it was not re-graded")
                continue
            one = regrade_one(kata, rec, name, i)
            results.append(one)
            if one.how not in (STARTER, NOTHING) or one.differs:
                mark = "   <- differs from the claim" if one.differs else ""
                announce(visible(f"  {name}, {kata.label}: claimed {rec.status}, re-grade {one.detail}") + mark)
    return results, problems


# --- the command ---------------------------------------------------------------------

def cmd_room(args) -> int:
    """`loopkata room [--regrade] [--figure PATH] EXPORT...`; exit 0, 1 if an export was skipped or a claim
    differs from the re-grade, 2 if no export could be read or the figure's path names no format to write."""
    try:
        figure_format(args.figure)  # before any work: a re-grade can take minutes
    except FigureFormatError as exc:
        print(f"loopkata room: {exc}", file=sys.stderr)
        return 2
    except ImportError:
        pass  # said after the table, which needs no matplotlib
    records, problems = load_room(args.exports)
    for line in problems:
        print(f"loopkata room: skipped {line}", file=sys.stderr)
    if not records:
        print("loopkata room: no export could be read, so there is no room to show. Learners write one with "
              "`loopkata progress --export FILE`.", file=sys.stderr)
        return 2
    marked, differing = set(), []
    if args.regrade:
        learners = f"{len(records)} learner{'s' if len(records) != 1 else ''}"
        why_not = sandbox.why_no_sandbox()
        where = (f"no sandbox ({why_not}): their code runs as you, with your files in reach" if why_not else
                 "each in a sandbox (bubblewrap): as nobody, loopback only, nothing of your home or checkout")
        print(f"Re-grading the kata files of {learners} with this machine's hidden tests, in throw-away copies; "
              f"{where}.", flush=True)
        results, lost = regrade(records, announce=lambda line: print(line, flush=True))
        for line in lost:
            print(f"loopkata room: {line}", file=sys.stderr)
        differing = [r for r in results if r.differs]
        marked = {(r.index, r.kata.id) for r in differing}
        count = {how: sum(r.how == how for r in results) for how in (GRADED, STARTER, UNAVAILABLE)}
        could_not = f", {count[UNAVAILABLE]} could not be re-graded here" if count[UNAVAILABLE] else ""
        print(f"{count[GRADED]} re-graded, {count[STARTER]} left alone (the starter as shipped){could_not}; "
              f"{len(differing)} claim{' differs' if len(differing) == 1 else 's differ'} from the re-grade.\n")
    cols = columns(records)
    print(table(records, cols, marked))
    if differing:
        print("\nClaims the re-grade contradicts:")
        for r in differing:
            print(f"  ! {visible(r.line())}")
    status = 1 if problems or differing else 0
    try:
        figure(records, cols, args.figure)
    except ImportError:
        print("loopkata room: the figure needs matplotlib (pip install matplotlib); the table above is complete.",
              file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"loopkata room: could not save the figure to {_shown(args.figure)} "
              f"({exc.strerror or exc}).", file=sys.stderr)
        return 1
    print(f"\nFigure: {_shown(args.figure)}")
    return status


def cmd_export(args) -> int:
    """`loopkata progress --export FILE [--name NAME]`."""
    try:
        said = write_export(args.export, args.name, with_files=not args.without_files)
    except OSError as exc:
        print(f"Could not write your export to {_shown(args.export)} ({exc.strerror or exc}).", file=sys.stderr)
        return 1
    if said:
        print(said)
    return 0
