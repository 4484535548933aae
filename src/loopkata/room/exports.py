"""A workshop room's records: each learner's export, read as hostile.

A learner writes an export with `loopkata progress --export` (loopkata.learner.export, which
says what it holds); the facilitator hands the files to `loopkata room`. An export is a
learner's file: one that is not a usable export (not a regular file, larger than 16 MiB, too
deep, naming more than 64 katas, numbers not finite, text not Unicode, a file path the re-grade
could not write as one file of the kata) is skipped with one line, in time linear in its
size; the same file named twice counts once, and learners' text is printed with its control
characters made visible.
"""
from __future__ import annotations

import base64
import binascii
import errno
import hashlib
import json
import math
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ..learner import progress
from ..learner.export import FORMAT, VERSION
from ..model import catalogue, nesting
from ..model.paths import display_path

STATUSES = (progress.SOLVED, progress.ATTEMPTED, progress.UNTOUCHED, progress.MISSING)
# What a loaded export may hold. An export nests 5 deep; a re-grade writes each file under a
# temporary folder, so a name must fit the file system's 255 bytes and the whole path stay short.
MAX_DEPTH, MAX_NUMBER, MAX_NAME_BYTES, MAX_PATH_BYTES = 16, 10**9, 255, 1024
# An export holds a learner's kata files: every starter of the collection together is about 250 KB,
# so a real one stays under 1 MiB; 16 MiB leaves room for files a learner adds and bounds the memory
# one file can take (a 1 GiB export took 2 GiB to read).
MAX_EXPORT_BYTES = 16 * 2**20
# Four times the collection's 16 katas: room for an export of a newer loopkata, whose katas this
# room does not know, while one export's columns stay a second or two of table and figure
# (3,000 made-up katas took 47 s). Fixed, not taken from the catalogue: a room is read outside a checkout too.
MAX_KATAS = 64


class BadExport(Exception):
    """An export that cannot be used; str() says what is wrong with it, in one line."""


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


def _too_deep(text: str) -> bool:
    """Whether the JSON in `text` nests arrays and objects more than MAX_DEPTH deep, counted
    without parsing: the parser recurses once per level and a deep enough file exhausts the stack."""
    return nesting.json_too_deep(text, MAX_DEPTH)


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
    if len(entries) > MAX_KATAS:
        raise BadExport(f"names {len(entries)} katas, more than {MAX_KATAS} (an export names the katas of "
                        "one collection)")
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


def read_export(path: Path) -> bytes:
    """The bytes of the export at `path`; BadExport (one line) unless it is a regular file of at
    most MAX_EXPORT_BYTES. A FIFO or a device is refused before a byte is read: reading one could
    wait for ever (a FIFO nobody writes to) or never end (/dev/zero)."""
    not_regular = BadExport("is not a regular file, so it is no export")
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # never opened: opening some devices acts on them
            raise not_regular
        # O_NONBLOCK: should the path become a FIFO meanwhile, opening it does not wait for a writer
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
        with open(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise not_regular
            # at most one byte more than the cap: a file that grows while it is read is refused all the same
            raw = f.read(MAX_EXPORT_BYTES + 1) if os.fstat(fd).st_size <= MAX_EXPORT_BYTES else None
    except OSError as exc:
        raise BadExport(f"could not be read ({exc.strerror or exc})") from None
    except ValueError:  # a NUL byte in the name, from a caller other than the command line
        raise BadExport("could not be read (its name holds a NUL byte)") from None
    if raw is None or len(raw) > MAX_EXPORT_BYTES:
        raise BadExport(f"is larger than {MAX_EXPORT_BYTES // 2**20} MiB, the most an export may be "
                        "(a real one is well under 1 MiB)")
    return raw


def load_export(path: Path) -> Record:
    """One learner's export; BadExport (one line) if it cannot be read or is not an export."""
    return parse_export(read_export(path), path)


def export_paths(arguments: list[Path]) -> tuple[list[Path], list[str]]:
    """The export files named, folders expanded to their *.json; and one line per argument that gives none."""
    paths, problems = [], []
    for arg in map(Path, arguments):
        try:
            is_folder = stat.S_ISDIR(arg.stat().st_mode)
        except OSError as exc:  # a name too long for a file, a loop of links, ...
            missing = exc.errno in (errno.ENOENT, errno.ENOTDIR)
            problems.append(f"{_shown_name(arg)}: {'no such file or folder' if missing else exc.strerror or exc}")
            continue
        except ValueError:  # a NUL byte, from a caller other than the command line
            problems.append(f"{_shown_name(arg)}: no file is named with a NUL byte")
            continue
        if is_folder:
            found = sorted(p for p in arg.glob("*.json") if p.is_file())
            if not found:
                problems.append(f"{_shown_name(arg)}: a folder with no .json export in it")
            paths += found
        else:  # anything else is read, and refused there unless it is a regular file
            paths.append(arg)
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
            raw = read_export(path)
        except BadExport as exc:
            problems.append(f"{_shown_name(path)}: {exc}")
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
