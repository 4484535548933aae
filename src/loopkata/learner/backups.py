"""The learner's kata files backed up, reset to the shipped starter, and restored from a backup.

Nothing here overwrites a learner's file without first copying it to the state folder's
backups/ (`loopkata reset`, `loopkata restore`); the status the learner sees is kept by
loopkata.learner.progress.
"""
from __future__ import annotations

import shutil
import time
from pathlib import Path

from ..model import starters
from ..model.catalogue import Kata
from ..model.paths import shown_path
from . import progress


class BackupFailed(Exception):
    """The learner's version could not be backed up, so nothing was reset; str() is one paragraph."""


def backup(kata: Kata) -> Path | None:
    """Copy the learner's current version aside; returns the backup folder, None if there was nothing.

    Raises BackupFailed (after removing a partial copy) when the copy cannot be made.
    """
    base = kata.root / "katas"
    present = [rel for rel in starters.kata_files(kata, base) if (base / rel).is_file()]
    if not present:
        return None
    stamp = time.strftime("%Y%m%d-%H%M%S")
    dest, n = progress.state_dir() / "backups" / kata.id / stamp, 1
    while dest.exists():
        n += 1
        dest = dest.with_name(f"{stamp}-{n}")
    try:
        for rel in present:
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(base / rel, dest / rel)
    except OSError as exc:
        shutil.rmtree(dest, ignore_errors=True)
        raise BackupFailed(
            f"Could not back up your version of {kata.id} ({exc.strerror or exc}: {shown_path(exc.filename or dest)}), "
            f"so nothing was reset: {shown_path(kata.kata_path)} is as you left it. Make {shown_path(progress.state_dir())} "
            f"writable, or set LOOPKATA_STATE to a writable folder, then run `loopkata reset {kata.id}` again."
        ) from exc
    return dest


def reset(kata: Kata) -> Path | None:
    """Back up the learner's version, then restore the shipped starter. Returns the backup folder (None: nothing to back up).

    StarterUnavailable and BackupFailed are raised before any file is touched;
    progress.NotSaved (result: the backup folder) when only the progress could not be written.
    """
    starter = progress.starter_files(kata)
    saved = backup(kata)
    base = kata.root / "katas"
    if (base / kata.path).is_dir():
        for rel in starters.kata_files(kata, base):
            if rel not in starter:
                (base / rel).unlink()  # already in the backup
    for rel, data in starter.items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_bytes(data)
    try:
        progress.update(kata, status=progress.UNTOUCHED, last_verdict="", last_failure="", hints_seen=[])
    except progress.NotSaved as exc:
        raise progress.NotSaved(exc.error, saved) from exc.error
    return saved


def backups(kata: Kata) -> list[Path]:
    """The kata's backups, oldest first (their names are timestamps)."""
    folder = progress.state_dir() / "backups" / kata.id
    if not folder.is_dir():
        return []
    return sorted((p for p in folder.iterdir() if p.is_dir()), key=lambda p: (p.stat().st_mtime, p.name))


def restore(kata: Kata, source: Path) -> Path | None:
    """Put a backup back in katas/, after backing up what is there now (a restore can be undone too).

    Returns the backup of the version that was replaced (None: nothing was there).
    """
    saved = backup(kata)
    base = kata.root / "katas"
    files = [p for p in source.rglob("*") if p.is_file()]
    if (base / kata.path).is_dir():
        for rel in starters.kata_files(kata, base):
            if not (source / rel).is_file():
                (base / rel).unlink()  # already in the new backup
    for f in files:
        rel = f.relative_to(source)
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, base / rel)
    try:
        progress.update(kata, status=progress.ATTEMPTED, last_verdict="", last_failure="")
    except progress.NotSaved as exc:
        raise progress.NotSaved(exc.error, saved) from exc.error
    return saved
