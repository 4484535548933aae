"""The learner's progress and files: status per kata, hints seen, starters, backups.

State lives in .loopkata/ at the project root (or $LOOPKATA_STATE), a small
JSON file a learner can read or delete. Nothing here ever overwrites a
learner's file without first copying it to .loopkata/backups/.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from .catalogue import Kata, project_root

SOLVED, ATTEMPTED, UNTOUCHED, MISSING = "solved", "attempted", "untouched", "missing"


def state_dir() -> Path:
    return Path(os.environ.get("LOOPKATA_STATE") or project_root() / ".loopkata")


def _state_file() -> Path:
    return state_dir() / "progress.json"


def load_state() -> dict:
    try:
        return json.loads(_state_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _save_state(state: dict) -> None:
    path = _state_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True), encoding="utf-8")
    tmp.replace(path)  # atomic: a crash never leaves half a file


def entry(kata: Kata) -> dict:
    return load_state().get(kata.id, {})


def update(kata: Kata, **fields) -> dict:
    state = load_state()
    state.setdefault(kata.id, {}).update(fields)
    _save_state(state)
    return state[kata.id]


def record_check(kata: Kata, result) -> None:
    """Remember the last check of the learner's own copy (not of solutions or decoys)."""
    update(
        kata,
        status=SOLVED if result.passed else ATTEMPTED,
        last_verdict=result.verdict,
        last_failure=result.failure_text(),
        checked_at=time.strftime("%Y-%m-%d %H:%M:%S"),
    )


# --- starters -------------------------------------------------------------

def _kata_files(kata: Kata, base: Path) -> list[Path]:
    """Relative paths of the kata's files under `base` (katas/ or a snapshot)."""
    target = base / kata.path
    if target.is_dir():
        return sorted(p.relative_to(base) for p in target.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return [Path(kata.path)]


def starter_files(kata: Kata) -> dict[Path, bytes]:
    """The shipped starter, path (relative to katas/) -> bytes: from git, else from the first snapshot."""
    root = kata.root
    try:
        listed = subprocess.run(
            ["git", "ls-tree", "-r", "--name-only", "HEAD", "--", f"katas/{kata.path}"],
            cwd=root, capture_output=True, text=True, check=True,
        ).stdout.split()
        if listed:
            return {
                Path(name).relative_to("katas"): subprocess.run(
                    ["git", "show", f"HEAD:{name}"], cwd=root, capture_output=True, check=True
                ).stdout
                for name in listed
            }
    except (OSError, subprocess.CalledProcessError):
        pass
    snapshot = state_dir() / "starters"
    if not (snapshot / kata.path).exists() and not kata.kata_path.exists():
        return {}
    if not (snapshot / kata.path).exists():
        # No git: the first time we look, the files in katas/ are taken as the starter.
        for rel in _kata_files(kata, root / "katas"):
            (snapshot / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / "katas" / rel, snapshot / rel)
    return {rel: (snapshot / rel).read_bytes() for rel in _kata_files(kata, snapshot)}


def is_untouched(kata: Kata) -> bool:
    base = kata.root / "katas"
    starters = starter_files(kata)
    current = {rel: (base / rel).read_bytes() for rel in _kata_files(kata, base) if (base / rel).exists()}
    return current == starters


def status(kata: Kata) -> str:
    if not kata.kata_path.exists():
        return MISSING  # deleted by hand: `loopkata reset` brings the starter back
    saved = entry(kata).get("status")
    if saved == SOLVED:
        return SOLVED
    return ATTEMPTED if saved == ATTEMPTED or not is_untouched(kata) else UNTOUCHED


def backup(kata: Kata) -> Path:
    """Copy the learner's current version aside; returns the backup folder."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    dest = state_dir() / "backups" / kata.id / stamp
    n = 1
    while dest.exists():
        n += 1
        dest = dest.with_name(f"{stamp}-{n}")
    base = kata.root / "katas"
    for rel in _kata_files(kata, base):
        if (base / rel).exists():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(base / rel, dest / rel)
    return dest


def reset(kata: Kata) -> Path:
    """Back up the learner's version, then restore the starter. Returns the backup folder."""
    saved = backup(kata)
    base = kata.root / "katas"
    target = base / kata.path
    starters = starter_files(kata)
    if target.is_dir():
        for rel in _kata_files(kata, base):
            if rel not in starters:
                (base / rel).unlink()  # already in the backup
    for rel, data in starters.items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_bytes(data)
    update(kata, status=UNTOUCHED, last_verdict="", last_failure="", hints_seen=[])
    return saved
