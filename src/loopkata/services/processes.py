"""The processes a service starts: told to die with their starter, and seen to end without reaping."""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal


def die_with_parent(sig: int = signal.SIGKILL):
    """A Popen preexec_fn: the child gets `sig` when the process that started it dies (Linux only).

    It runs after Popen changed the child's user, which would clear the setting."""
    def arm() -> None:
        with contextlib.suppress(Exception):
            ctypes.CDLL(None, use_errno=True).prctl(1, sig)  # PR_SET_PDEATHSIG
    return arm


def ended(pid: int) -> int | None:
    """How child `pid` ended (an exit code, or minus the signal), None while it runs; it stays unreaped.

    The grader's supervise.py has the same function: it runs alone (`python -I -S`), standard
    library only, so it cannot import this one."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return 0
    if info is None:
        return None
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
