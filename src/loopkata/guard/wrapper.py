"""`loopkata guard [options] -- COMMAND ...`: a program run guarded, and what the guard found in it.

The command runs as a child with the guard handed on (PYTHONPATH and
LOOPKATA_GUARD_CHILD, see `child`), and so do the Python processes it starts.
What they find is printed when it ends, and the exit status is the command's,
or 1 if it succeeded with findings in fail mode. Ctrl-C and SIGTERM are passed
to the command; the shared folder is removed in every case.
"""
from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from . import child, report
from .config import ConfigError, apply, as_table, from_pyproject
from .core import Guard


def add_parser(sub) -> None:
    p = sub.add_parser("guard", help="run a program with the collection's bugs caught at run time (exit 1 on findings)",
                       description="Run COMMAND (and the Python processes it starts) with loopkata guard; print "
                                   "what it finds. In a test suite, use `pytest -p loopkata.guard` instead.")
    p.add_argument("--warn", action="store_true", help="findings are printed but do not change the exit status")
    p.add_argument("--select", help="codes or names to report, comma-separated (default: all)")
    p.add_argument("--ignore", help="codes or names not to report, comma-separated")
    p.add_argument("--block-ms", help="LG04: how long one callback may hold the loop (default 100)")
    p.add_argument("--report", help="also write every finding to this JSON file")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the program and its arguments, after --")
    p.set_defaults(func=run)


def run(args) -> int:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        print("loopkata guard: name the program to run after --, e.g. loopkata guard -- python app.py")
        return 2
    try:
        settings = apply(from_pyproject(Path.cwd()), {
            "mode": "warn" if args.warn else None, "select": args.select, "ignore": args.ignore,
            "block-threshold-ms": args.block_ms, "report": args.report}, "the command line")
        if settings.report:  # a path that cannot be written is said now, before the program runs
            report.write_json(Path(settings.report), [], settings.source, 0, complete=False)
    except (ConfigError, report.ReportError) as exc:
        print(f"loopkata guard: {exc}")
        return 2
    share = Path(tempfile.mkdtemp(prefix="loopkata-guard-"))
    collect = Guard(settings, share)  # not installed: it only reads what the children write
    env = child.environment(as_table(settings), share, dict(os.environ))
    try:
        try:
            proc = subprocess.Popen(command, env=env)
        except OSError as exc:
            print(f"loopkata guard: cannot start {command[0]}: {exc.strerror or exc}")
            return 127
        previous = signal.signal(signal.SIGTERM, lambda *_: proc.send_signal(signal.SIGTERM))
        try:
            while True:
                try:
                    status = proc.wait()
                    break
                except KeyboardInterrupt:
                    proc.send_signal(signal.SIGINT)  # the program decides how to stop; we wait for it
        finally:
            signal.signal(signal.SIGTERM, previous)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        collect.end_of_test(shlex.join(command))
        found = collect.take()
    finally:
        shutil.rmtree(share, ignore_errors=True)
    for f in found:
        print(report.text(f), end="\n\n", file=sys.stderr)
    print(f"loopkata guard: {report.summary(found)} in `{shlex.join(command)}`", file=sys.stderr)
    if status != 0:
        code = status if status > 0 else 128 - status
    else:
        code = 1 if found and settings.mode == "fail" else 0
    if settings.report:
        try:
            report.write_json(Path(settings.report), found, settings.source, 1)
        except report.ReportError as exc:
            print(f"loopkata guard: {exc}", file=sys.stderr)
            return code or 2
    return code

