"""For a notebook's "Keeping it out" section: a team's test run under the guard, out of the kernel.

`show_guarded(case, impl)` runs `python -m pytest -p loopkata.guard` on the test file
`case`, with the code under test at `impl` (LOOPKATA_GUARD_CASE_IMPL), in a
child process with a hard deadline, and prints what the guard found. Paths are
printed relative to the folders of `case` and `impl`, so the output is the same
on every machine; the test's own verdict is printed too, because a team's test
that passes while the guard finds the bug is the point.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from ..model import catalogue
from .findings import KINDS

DEADLINE = 180  # seconds: a case that starts a database or a worker takes a few


def show_guarded(case, impl, *, deadline: float = DEADLINE) -> None:
    case, impl = Path(case).resolve(), Path(impl).resolve()
    with tempfile.TemporaryDirectory(prefix="loopkata-guard-show-") as tmp:
        report = Path(tmp) / "report.json"
        env = {**os.environ, "LOOPKATA_GUARD_CASE_IMPL": str(impl), "TMPDIR": tmp,
               "PY_COLORS": "0", "NO_COLOR": "1"}  # a kernel's environment may ask for colours
        try:  # the case runs in a folder of its own: the services it starts keep their data in the project's
            env.setdefault("LOOPKATA_ROOT", str(catalogue.project_root()))
        except catalogue.CatalogueError:
            pass
        # The case stands alone, as in a team's repository: none of this project's own conftest.py or
        # notebook plugin (nbval's import alone takes 1.5 s), which it does not need.
        command = [sys.executable, "-m", "pytest", "-p", "loopkata.guard", "--loopkata-guard=warn",
                   f"--loopkata-guard-report={report}", "-p", "no:cacheprovider", "-o", "addopts=", "-q",
                   "-p", "no:randomly", "-p", "no:nbval", f"--confcutdir={case.parent}", str(case)]
        try:
            ran = subprocess.run(command, cwd=tmp, env=env, capture_output=True, text=True, timeout=deadline,
                                 check=False, start_new_session=True)
        except subprocess.TimeoutExpired:
            print(f"The guarded run of {case.name} did not finish within {deadline:g} s and was stopped.")
            return
        written = json.loads(report.read_text()) if report.exists() else {}
    findings = written.get("findings", [])
    if not written.get("complete"):  # the run died: say how, then what the guard had found by then
        if ran.returncode < 0:
            print(f"The guarded run of {case.name} was ended by {signal.Signals(-ran.returncode).name} "
                  "before the guard could finish its report.")
        else:
            tail = "\n".join((ran.stdout + ran.stderr).strip().splitlines()[-5:])
            print(f"The guarded run of {case.name} ended ({ran.returncode}) without finishing its report:\n{tail}")
        if not findings:
            return
        print("What the guard had found by then:")
    verdict = next((line for line in reversed(ran.stdout.splitlines()) if " in " in line and
                    any(word in line for word in ("passed", "failed", "error"))), "").split(" in ")[0]
    print(f"$ pytest -p loopkata.guard {case.name}    (the code under test: {impl.name})")
    print(f"the team's tests: {verdict or 'no verdict'}; the guard: "
          f"{len(findings)} finding{'s' if len(findings) != 1 else ''}")
    bases = (str(impl.parent) + os.sep, str(case.parent) + os.sep)
    shown: dict[tuple, int] = {}  # the same finding from several tests is printed once, with its count
    for f in findings:
        key = (f["code"], _short(f["message"], bases), tuple(_short(w, bases) for w in f["where"]))
        shown[key] = shown.get(key, 0) + 1
    for (code, message, where), times in shown.items():
        print()
        print(f"{code} {KINDS[code].name}: {message}" + (f"  ({times} times)" if times > 1 else ""))
        for w in where:
            print(f"    {'' if w.startswith(('used ', 'taken ', 'waiting ', 'holding ')) else 'at '}{w}")


def _short(text: str, bases: tuple[str, ...]) -> str:
    # A loop made inside an installed package (uvicorn's runner) is made on a line that differs by Python version.
    text = re.sub(r", made at (\S+):\d+ in \S+\)",
                  lambda m: m.group(0) if m.group(1).startswith(bases) else ", made by a library)", text)
    for base in bases:
        text = text.replace(base, "")
    text = re.sub(r"for \d+ ms, more than", "for more than", text)  # a measured time differs run to run
    return re.sub(r"event loop #\d+", "event loop", text)  # numbered in the order made: differs by Python
