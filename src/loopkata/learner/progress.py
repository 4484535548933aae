"""The learner's progress: status per kata, hints seen, and the shipped starter as the learner sees it.

State lives in .loopkata/ at the project root (or $LOOPKATA_STATE): progress.json,
a small JSON file a learner can read or delete, plus starter snapshots and
backups. Nothing ever overwrites a learner's file without first copying it to
.loopkata/backups/ (loopkata.learner.backups).

Several commands may run at once (a watch, a notebook, a shell), so every change
is a read-modify-write under an flock, written to a temp file and renamed into
place. A state folder that cannot be written never costs the learner a verdict:
the change raises NotSaved, which carries what the command did anyway.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import stat
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Callable

from ..model import alternatives, starters
from ..model.catalogue import Kata, project_root
from ..model.paths import shown_path
from ..model.starters import StarterUnavailable  # noqa: F401  (raised by reset and starter_files)

SOLVED, ATTEMPTED, UNTOUCHED, MISSING = "solved", "attempted", "untouched", "missing"
LOCK_WAIT = 10.0  # seconds; a lock holder does a few milliseconds of work, so longer means it is stuck

# What each field of an entry must be; anything else means the file is not ours to trust.
# Every field is optional, so entries written before a field existed still load:
#   checks          how many checks of the learner's copy were recorded
#   first_check_at  when the first of them ran (ISO 8601, UTC); null when the entry
#                   predates this field, so the first check's time is unknown
#   solved_at       when a check first passed (ISO 8601, UTC)
#   failing         the hidden tests the last check did not pass: [{title, outcome, message}]
_FIELDS = {"status": str, "last_verdict": str, "last_failure": str, "checked_at": str, "hints_seen": list,
           "solution_seen": bool, "checks": int, "first_check_at": (str, type(None)), "solved_at": str,
           "failing": list}
MESSAGE_KEPT = 2000  # characters of each failing test's message kept in progress.json
# progress.json is a few kilobytes per kata, four levels deep ({kata: {failing: [{title}]}}):
# a file far past either is not ours, and reading it whole could cost the learner the command.
MAX_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 16


class NotSaved(Exception):
    """Progress could not be written. str() is one line for the learner.

    `result` is what the command did anyway (the hint picked, the backup folder).
    """

    def __init__(self, error: OSError, result=None):
        super().__init__(error)
        self.error, self.result = error, result

    def __str__(self) -> str:
        why = self.error.strerror or str(self.error)
        where = self.error.filename or state_dir()
        return (f"Your progress could not be saved ({why}: {shown_path(where)}); "
                "set LOOPKATA_STATE to a writable folder to keep it.")


def state_dir() -> Path:
    return Path(os.environ.get("LOOPKATA_STATE") or project_root() / ".loopkata")


def _state_file() -> Path:
    return state_dir() / "progress.json"


# --- progress.json: read, check, lock, write -----------------------------------

def _json_type(value) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")


def _depth(value) -> int:
    """How deeply JSON containers nest in `value`, counted with a stack of its own (no recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            if depth <= MAX_DEPTH:  # past it the answer is known: no need to walk further
                stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _parse(raw: bytes) -> tuple[dict, str]:
    """The state in `raw` and "" if it is valid progress, else ({}, what is wrong with it).

    Never raises: whatever the file holds (nesting deeper than the interpreter's stack,
    a number of a million digits) is a reason to keep it aside."""
    if len(raw) > MAX_BYTES:
        return {}, f"larger than {MAX_BYTES // 1024 // 1024} MB, far more than progress ever takes"
    try:
        state = json.loads(raw.decode("utf-8"))
    except ValueError as exc:  # UnicodeDecodeError is a ValueError too
        return {}, f"not valid JSON: {exc}"
    except RecursionError:
        return {}, "JSON nested too deeply to read"
    if not isinstance(state, dict):
        return {}, f"a JSON {_json_type(state)} where an object of katas belongs"
    if _depth(state) > MAX_DEPTH:  # writing it back (json.dump recurses) must not fail either
        return {}, f"JSON nested more than {MAX_DEPTH} levels deep, deeper than progress ever is"
    for kata_id, entry in state.items():
        if not isinstance(entry, dict):
            return {}, f"the entry for {kata_id!r} is a JSON {_json_type(entry)}, not an object"
        for name, kind in _FIELDS.items():
            if name in entry and not isinstance(entry[name], kind):
                return {}, f"{kata_id!r} has a {name} that is a JSON {_json_type(entry[name])}"
        if not all(isinstance(i, int) for i in entry.get("hints_seen", [])):
            return {}, f"{kata_id!r} has hints_seen that are not all numbers"
        if not all(isinstance(t, dict) for t in entry.get("failing", [])):
            return {}, f"{kata_id!r} has failing tests that are not all objects"
    return state, ""


def _read(path: Path) -> tuple[dict, str]:
    """The state in the file at `path`, as _parse gives it; OSError (FileNotFoundError when
    there is none) if it cannot be opened. Reads at most MAX_BYTES + 1 bytes, and something
    that is not a regular file (a FIFO would block a plain read for good) is not progress."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return {}, "not a regular file"
        return _parse(f.read(MAX_BYTES + 1))


_warned: set[str] = set()


def _move_aside(path: Path, problem: str) -> None:
    """Keep a corrupt progress file under a unique name (call with the lock held) and say so."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    dest, n = path.with_name(f"{path.name}.corrupt-{stamp}"), 1
    while dest.exists():
        n += 1
        dest = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    os.replace(path, dest)
    print(f"loopkata: {shown_path(path)} was not valid progress ({problem}); kept it as {shown_path(dest)}, "
          "and your progress starts afresh.", file=sys.stderr)


def _read_locked() -> dict:
    """The state, read with the lock held; a corrupt file is moved aside, never overwritten."""
    path = _state_file()
    try:
        state, problem = _read(path)
    except FileNotFoundError:
        return {}
    # any other OSError propagates: better not saved than overwritten
    if problem:
        _move_aside(path, problem)
    return state


@contextlib.contextmanager
def _locked():
    """Hold progress.json.lock: one read-modify-write at a time, across processes and threads."""
    folder = state_dir()
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / "progress.json.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + LOCK_WAIT
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(errno.ETIMEDOUT, "another loopkata command kept it locked", str(lock))
                time.sleep(0.01)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def _write(state: dict) -> None:
    """Write through a unique temp file in the same folder, then rename: readers see old or new, whole."""
    path = _state_file()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(state, f, indent=2, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it private; it is the learner's file to read
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def load_state() -> dict:
    """Every kata's entry, for reading: no lock needed, since each write renames a whole file in."""
    try:
        state, problem = _read(_state_file())
    except OSError:
        return {}
    if not problem:
        return state
    try:
        with _locked():
            return _read_locked()  # re-read: another command may have moved it aside already
    except OSError as exc:
        if str(_state_file()) not in _warned:
            _warned.add(str(_state_file()))
            print(f"loopkata: {shown_path(_state_file())} is not valid progress ({problem}) and could not be "
                  f"moved aside ({exc.strerror or exc}); ignoring it.", file=sys.stderr)
        return {}


def change(kata: Kata, edit: Callable[[dict], object]):
    """Run edit(entry) on the kata's entry under the lock, save, and return what edit returned.

    `edit` only changes the dict. If the state folder cannot be used, edit still
    runs, on what could be read, and NotSaved carries its result.
    """
    done = False
    try:
        with _locked():
            state = _read_locked()
            result, done = edit(state.setdefault(kata.id, {})), True
            _write(state)
    except OSError as exc:
        if not done:
            result = edit(dict(load_state().get(kata.id, {})))
        raise NotSaved(exc, result) from exc
    return result


def entry(kata: Kata) -> dict:
    return load_state().get(kata.id, {})


def update(kata: Kata, **fields) -> dict:
    def apply(saved: dict) -> dict:
        saved.update(fields)
        return dict(saved)

    return change(kata, apply)


def utc_now() -> str:
    """Now, as progress.json keeps times it computes with: ISO 8601 in UTC."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def record_check(kata: Kata, result) -> None:
    """Remember a check of the learner's own copy (not of solutions or decoys): the last
    one's verdict and failing tests, how many there were, when the first ran and when
    one first passed."""
    now = utc_now()
    failing = [{"title": t.title, "outcome": t.outcome, "message": t.message[:MESSAGE_KEPT]}
               for t in getattr(result, "failures", [])]

    def apply(saved: dict) -> None:
        checked_before = bool(saved.get("checked_at"))
        # An entry from before `checks` was kept had at least one check: count it as one.
        saved["checks"] = saved.get("checks", 1 if checked_before else 0) + 1
        if "first_check_at" not in saved:
            saved["first_check_at"] = None if checked_before else now  # None: the first check's time is unknown
        if result.passed and not saved.get("solved_at"):
            saved["solved_at"] = now
        saved.update(
            status=SOLVED if result.passed else ATTEMPTED,
            last_verdict=result.verdict,
            last_failure=result.failure_text(),
            checked_at=time.strftime("%Y-%m-%d %H:%M:%S"),
            failing=failing,
        )

    change(kata, apply)


# --- starters and status -------------------------------------------------------

def _snapshots() -> Path:
    return starter_snapshots()


def starter_snapshots() -> Path:
    """Where verified copies of the shipped starters are kept, for a learner without git."""
    return state_dir() / "starters"


def starter_files(kata: Kata) -> dict[Path, bytes]:
    """The shipped starter, path (relative to katas/) -> bytes; StarterUnavailable if there is no true copy."""
    return starters.load(kata, _snapshots())


def is_untouched(kata: Kata) -> bool:
    if not starters.matches(kata):
        return False
    # Still the starter: keep a copy, so a learner without git can reset later.
    base = kata.root / "katas"
    with contextlib.suppress(OSError):
        starters.remember({rel: (base / rel).read_bytes() for rel in starters.kata_files(kata, base)}, _snapshots())
    return True


def status(kata: Kata) -> str:
    if not kata.kata_path.exists():
        return MISSING  # deleted by hand: `loopkata reset` brings the starter back
    saved = entry(kata).get("status")
    if saved == SOLVED:
        return SOLVED
    return ATTEMPTED if saved == ATTEMPTED or not is_untouched(kata) else UNTOUCHED


def alternative_copy(kata: Kata, kind: str, name: str) -> Path:
    """A private copy of the kata's decoy or variant `name`, built from its base (a file or folder
    named after it), for a notebook that runs, reads or scans it."""
    path = alternatives.find(kata, kind, name)
    folder = state_dir() / alternatives.KINDS[kind] / kata.id
    target = alternatives.target_in(kata, path, folder)
    if target.is_dir():
        shutil.rmtree(target)  # a file the last build had and this one has not must go
    return alternatives.build(kata, path, folder, _snapshots())


def pristine_starter(kata: Kata) -> Path:
    """A private copy of the shipped starter (never the learner's file), for reproductions:
    a notebook that shows the naive code failing stays true after the kata is solved."""
    files = starter_files(kata)
    folder = state_dir() / "pristine" / kata.id
    for rel, data in files.items():
        target = folder / rel
        if not target.is_file() or target.read_bytes() != data:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    return folder / kata.path
