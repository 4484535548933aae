"""Ruff's rules where ruff already has them, run for real: RUF006 as LK04, the ASYNC rules as LK05."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

# ruff code -> our rule. Of the ASYNC rules, only those that name a call which blocks the
# loop (HTTP, subprocesses, open, input, time.sleep): the others are style (a `timeout`
# parameter, sleep(0) spellings) or a file-system stat, not the bug kata 05 teaches.
BLOCKING = ("ASYNC210", "ASYNC212", "ASYNC220", "ASYNC221", "ASYNC222", "ASYNC230", "ASYNC250", "ASYNC251")
SELECT = {"RUF006": "LK04", **{code: "LK05" for code in BLOCKING}}
WHY = {
    "LK04": "the event loop keeps only a weak reference to a task, so a garbage collection can destroy it mid-await",
    "LK05": "a blocking call in async def stops the whole event loop: every other request waits for it",
}
CHUNK = 400  # paths per ruff run: command lines have a length limit


class RuffUnavailable(RuntimeError):
    """ruff is not installed: its checks were skipped (one warning, not a crash)."""


def _ruff() -> list[str]:
    try:
        from ruff.__main__ import find_ruff_bin

        return [find_ruff_bin()]
    except (ImportError, FileNotFoundError):
        found = shutil.which("ruff")
        if found:
            return [found]
    raise RuffUnavailable("ruff is not installed, so LK04's RUF006 and LK05's ASYNC checks were skipped: "
                          f"run `{sys.executable} -m pip install ruff` to include them")


def run(paths: list[Path]) -> list[tuple[str, Path, int, int, str]]:
    """(rule, path, line, column, sentence) for every RUF006 and ASYNC finding in `paths`."""
    command = [*_ruff(), "check", "--isolated", "--no-cache", "--exit-zero", "--output-format", "json",
               "--select", ",".join(SELECT)]
    found = []
    for start in range(0, len(paths), CHUNK):
        chunk = paths[start:start + CHUNK]
        out = subprocess.run([*command, "--", *map(str, chunk)], capture_output=True, text=True,
                             env={**os.environ, "NO_COLOR": "1"}, timeout=300)
        if out.returncode != 0:
            raise RuffUnavailable(f"ruff stopped with exit status {out.returncode}, so LK04's RUF006 and LK05's "
                                  f"ASYNC checks were skipped: {out.stderr.strip().splitlines()[-1:] or ''}")
        by_name = {os.path.abspath(p): p for p in chunk}
        for item in json.loads(out.stdout or "[]"):
            rule = SELECT.get(item["code"])
            if rule is None:
                continue
            path = by_name.get(os.path.abspath(item["filename"]), Path(item["filename"]))
            found.append((rule, path, item["location"]["row"], item["location"]["column"],
                          f"{item['message'].rstrip('.')} (ruff {item['code']}): {WHY[rule]}"))
    return found
