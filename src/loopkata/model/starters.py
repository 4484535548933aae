"""The shipped starter of each kata, known by its content rather than by git HEAD.

A learner may commit their own edits, so HEAD says nothing about what was
shipped. katas/starters.toml records each starter file's sha256 and git blob
id: the blob id finds the original bytes in git's history whatever HEAD is,
and the sha256 vouches for any copy (git's, a snapshot in the state folder, or
the file in katas/ while it is still untouched).

After changing a starter, regenerate the manifest (a test checks it):
    python -m loopkata.authoring.starter_manifest --write
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import tempfile
import tomllib
from pathlib import Path

from . import catalogue
from .catalogue import Kata
from .paths import display_path

MANIFEST = Path("katas") / "starters.toml"


class StarterUnavailable(LookupError):
    """No trustworthy copy of a shipped starter; str() is one paragraph for the learner."""


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def blob_id(data: bytes) -> str:
    """The id git gives these bytes (`git hash-object`), computed without git."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def kata_files(kata: Kata, base: Path) -> list[Path]:
    """Relative paths of the kata's files under `base` (katas/ or a snapshot)."""
    target = base / kata.path
    if target.is_dir():
        return [p.relative_to(base) for p in catalogue.files_of(target)]
    return [Path(kata.path)]


# --- the manifest ------------------------------------------------------------

def expected(kata: Kata) -> dict[Path, dict]:
    """The manifest's entries for `kata`: relative path -> {"sha256", "blob"}; {} if it lists none."""
    try:
        data = tomllib.loads((kata.root / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {Path(s["path"]): s for s in data.get("starter", []) if s.get("kata") == kata.id and "path" in s}


def matches(kata: Kata) -> bool:
    """True while the learner's copy is byte for byte the shipped starter."""
    want, base = expected(kata), kata.root / "katas"
    if not want or set(kata_files(kata, base)) != set(want):
        return False
    try:
        return all(sha256((base / rel).read_bytes()) == e.get("sha256") for rel, e in want.items())
    except OSError:
        return False


# --- reading a starter back ----------------------------------------------------

def _from_git(root: Path, entry: dict) -> bytes | None:
    try:
        out = subprocess.run(["git", "-C", str(root), "cat-file", "blob", str(entry.get("blob", ""))],
                             capture_output=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None  # no git, or a git that does not answer
    return out.stdout if out.returncode == 0 and sha256(out.stdout) == entry.get("sha256") else None


def _verified(path: Path, entry: dict) -> bytes | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return data if sha256(data) == entry.get("sha256") else None


def remember(files: dict[Path, bytes], snapshots: Path | None) -> None:
    """Keep a copy of verified starter files in the state folder, for a learner without git.

    Best effort: a state folder that cannot be written only means no snapshot.
    """
    for rel, data in files.items() if snapshots is not None else ():
        dest = snapshots / rel
        if _verified(dest, {"sha256": sha256(data)}) is not None:
            continue
        tmp = None
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, dest)
        except OSError:
            if tmp:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)


def load(kata: Kata, snapshots: Path | None) -> dict[Path, bytes]:
    """The shipped starter, path (relative to katas/) -> bytes, every file checked against the manifest.

    Each file comes from git (by blob id), else from the snapshot, else from
    katas/ while it still matches. Raises StarterUnavailable rather than hand
    back anything else.
    """
    want = expected(kata)
    if not want:
        raise StarterUnavailable(
            f"{display_path(kata.root / MANIFEST)} does not list the starter of {kata.id}, so loopkata "
            "cannot tell which version was shipped and has changed nothing. Get the project's "
            f"katas/ folder again (git pull, or a fresh download) and run `loopkata reset {kata.id}` again."
        )
    found, lost = {}, []
    for rel, entry in want.items():
        data = _from_git(kata.root, entry)
        if data is None and snapshots is not None:
            data = _verified(snapshots / rel, entry)
        if data is None:
            data = _verified(kata.root / "katas" / rel, entry)
        if data is None:
            lost.append(rel.as_posix())
        else:
            found[rel] = data
    if lost:
        kept = f"{display_path(snapshots)} holds no copy of it" if snapshots is not None else "no copy of it was kept"
        raise StarterUnavailable(
            f"loopkata cannot find the shipped starter of {kata.id} ({', '.join(lost)}): git does not have it "
            f"(this folder may not be a git clone), {kept}, and your file "
            "in katas/ no longer matches it. Nothing was changed, so your version is as you left it. "
            "Copy the starter from the project's repository (or a fresh download) into katas/ to start over."
        )
    remember(found, snapshots)
    return found


def shipped(kata: Kata, snapshots: Path | None = None) -> dict[Path, bytes]:
    """The shipped starter, as `load` finds it, read from katas/ while it is still untouched (no git needed then)."""
    if matches(kata):
        base = kata.root / "katas"
        return {rel: (base / rel).read_bytes() for rel in expected(kata)}
    return load(kata, snapshots)
