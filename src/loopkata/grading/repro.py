"""Runs a reproduction in a subprocess with a hard timeout, for notebooks.

A reproduction that can hang, leak or segfault must never take the kernel
with it. `run_isolated(code)` runs `code` in a fresh interpreter, kills it
after `timeout` seconds, and returns what happened, including where it was
stuck (every thread's stack is dumped just before the deadline, see stackdump).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

# Runs before the reproduction, from -c, so the reproduction's line numbers stay its own.
_PRELUDE = (
    "import os, runpy, signal, sys, time; "
    "sys.path.append({package_home!r}); "  # where this loopkata lives, installed or not
    "from loopkata.grading.stackdump import dump_stacks_later, dump_stacks_on; "
    "fd = os.open({stacks!r}, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600); "
    # The dump's time is the parent's (a wall-clock instant), so a child that started late dumps in time.
    "dump_stacks_later({dump_at!r} - time.time(), fd); dump_stacks_on(signal.SIGUSR1, fd); del fd; "
    "runpy.run_path({script!r}, run_name='__main__')"
)


@dataclass
class Outcome:
    stdout: str
    stderr: str
    returncode: int | None  # None: killed for running out of time
    stacks: str = ""

    @property
    def hung(self) -> bool:
        return self.returncode is None

    @property
    def crashed(self) -> bool:
        return self.returncode is not None and self.returncode < 0

    def __repr__(self) -> str:
        state = "hang" if self.hung else f"exit {self.returncode}"
        return f"<Outcome {state}>"

    def show(self) -> None:
        """Print the child's output, then how it ended."""
        if self.stdout:
            print(self.stdout.rstrip())
        if self.stderr:
            print(self.stderr.rstrip())
        if self.hung:
            print("-- still running at the deadline: killed (a hang)")
            if self.stacks:
                print(self.stacks.rstrip())
        elif self.crashed:
            print(f"-- the process died from signal {-self.returncode}")


def _trim(stacks: str) -> str:
    """Keep only the threads that were in the reproduction itself, and only their frames there.

    A thread with no frame of the reproduction (the watchdog, a library's) says nothing to the
    reader, and a thread shown twice (the timed dump and the one asked for by signal both came
    on a busy machine) is shown once."""
    kept, block = [], None
    for line in stacks.splitlines() + ["Thread (end)"]:
        if line.startswith(("Thread", "Current thread")):
            if block and block not in kept:
                kept.append(block)
            block = []
        elif "repro.py" in line and block is not None:
            block.append(line)
    return "\n".join("\n".join(["thread (most recent call first):", *b]) for b in kept)


def _clean_traceback(stderr: str) -> str:
    """Drop the launcher's own frames (runpy) from a traceback."""
    lines = stderr.splitlines()
    out, skip = [], False
    for line in lines:
        if line.startswith('  File "<string>"') or line.startswith('  File "<frozen runpy>"'):
            skip = True
            continue
        if skip and line.startswith("    ") and not line.startswith("  File"):
            continue
        skip = False
        out.append(line)
    return "\n".join(out) + ("\n" if stderr.endswith("\n") else "")


def plain_env(extra: dict | None = None) -> dict:
    """The kernel's environment, without colour: ipykernel sets FORCE_COLOR, and from 3.13
    Python then wraps tracebacks in ANSI codes, which would differ between versions."""
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "CLICOLOR_FORCE")}
    return {**env, **(extra or {}), "PYTHONUNBUFFERED": "1", "PYTHON_COLORS": "0", "NO_COLOR": "1"}


def run_isolated(code: str, timeout: float = 5.0, env: dict | None = None) -> Outcome:
    """Run `code` in a new Python process; kill it after `timeout` seconds."""
    with tempfile.TemporaryDirectory(prefix="loopkata-repro-") as tmp:
        script, stacks = Path(tmp, "repro.py"), Path(tmp, "stacks.txt")
        script.write_text(textwrap.dedent(code), encoding="utf-8")
        prelude = _PRELUDE.format(dump_at=time.time() + max(timeout - 0.3, 0.1), stacks=str(stacks), script=str(script),
                                  package_home=str(Path(__file__).resolve().parents[2]))
        child = subprocess.Popen(
            [sys.executable, "-c", prelude], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL, text=True, start_new_session=True, cwd=tmp,
            env=plain_env(env),
        )
        try:
            out, err = child.communicate(timeout=timeout)
            code_ = child.returncode
        except subprocess.TimeoutExpired:
            # The stacks are dumped 0.3 s before the deadline; a child whose watchdog has not had its
            # turn yet on a busy machine is asked (SIGUSR1), given 2 s, then killed.
            if not (stacks.exists() and stacks.stat().st_size):
                try:
                    os.kill(child.pid, signal.SIGUSR1)
                except ProcessLookupError:
                    pass
            until = time.monotonic() + 2.0
            while time.monotonic() < until and not (stacks.exists() and stacks.stat().st_size):
                time.sleep(0.02)
            os.killpg(child.pid, signal.SIGKILL)
            out, err = child.communicate()
            code_ = None
        dumped = stacks.read_text(errors="replace") if stacks.exists() else ""
        trimmed = _trim(dumped).replace('"' + str(script) + '"', "<repro>") if code_ is None else ""
        return Outcome(stdout=out, stderr=_clean_traceback(err.replace(str(script), "<repro>")), returncode=code_, stacks=trimmed)
