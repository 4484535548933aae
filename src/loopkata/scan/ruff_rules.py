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
TIMEOUT = 300  # seconds per ruff run: ruff checks 400 files in well under one
GIVE_UP = 3  # single files ruff failed on before it worked once: ruff itself is broken


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


def _check(command: list[str], paths: list[Path]) -> tuple[list[dict] | None, str]:
    """ruff's diagnostics for `paths`, or (None, why ruff stopped)."""
    try:
        out = subprocess.run([*command, "--", *map(str, paths)], capture_output=True, text=True,
                             env={**os.environ, "NO_COLOR": "1"}, timeout=TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        raise RuffUnavailable(f"ruff took more than {TIMEOUT} s, so LK04's RUF006 and LK05's ASYNC checks were "
                              "skipped") from exc
    except OSError as exc:
        raise RuffUnavailable(f"ruff could not be started ({exc.strerror or exc}), so LK04's RUF006 and LK05's "
                              "ASYNC checks were skipped") from exc
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or [""])[-1]
        return None, f"exit status {out.returncode}" + (f": {last}" if last else "")
    try:
        return json.loads(out.stdout or "[]"), ""
    except ValueError:
        return None, "its output was not JSON"


def run(paths: list[Path]) -> tuple[list[tuple[str, Path, int, int, str]], list[str]]:
    """(rule, path, line, column, sentence) for every RUF006 and ASYNC finding in `paths`, and one
    warning per file that ruff could not check.

    A run that fails is split in two and each half run again: one file that makes ruff abort
    (a stack overflow on an expression thousands of terms long) costs only that file its
    checks. When ruff fails on single files before it has worked at all, it is ruff that is
    broken: RuffUnavailable."""
    command = [*_ruff(), "check", "--isolated", "--no-cache", "--exit-zero", "--output-format", "json",
               "--select", ",".join(SELECT)]
    found, problems, worked = [], [], False
    pending = [paths[start:start + CHUNK] for start in range(0, len(paths), CHUNK)][::-1]
    while pending:
        chunk = pending.pop()
        items, why = _check(command, chunk)
        if items is None and len(chunk) > 1:
            half = len(chunk) // 2
            pending += [chunk[half:], chunk[:half]]
            continue
        if items is None:
            problems.append(f"{chunk[0]}: not checked by ruff, so LK04's RUF006 and LK05's ASYNC checks skipped it "
                            f"(ruff stopped with {why})")
            if not worked and len(problems) >= GIVE_UP:
                raise RuffUnavailable(f"ruff stopped with {why}, so LK04's RUF006 and LK05's ASYNC checks were "
                                      "skipped")
            continue
        worked = True
        by_name = {os.path.abspath(p): p for p in chunk}
        for item in items:
            rule = SELECT.get(item["code"])
            if rule is None:
                continue
            path = by_name.get(os.path.abspath(item["filename"]), Path(item["filename"]))
            found.append((rule, path, item["location"]["row"], item["location"]["column"],
                          f"{item['message'].rstrip('.')} (ruff {item['code']}): {WHY[rule]}"))
    return found, problems
