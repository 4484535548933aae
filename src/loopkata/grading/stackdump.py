"""Every thread's stack written to a file just before a deadline, without crashing the process.

`faulthandler.dump_traceback_later` writes from a C thread that reads the other
threads' frames without holding the GIL. While a thread is busy in Python (a
drain that spins, the very hang we want to show), those frames change under
it, and on Python 3.12 and later the dump sometimes dies with SIGSEGV (about 1
run in 200 on this kind of machine): a hang then reads as a crash.

`dump_stacks_later` writes the same text from a Python thread that holds the
GIL while it reads the frames, so it is safe. A thread that never releases the
GIL would keep that thread from running, so faulthandler stays armed a little
later as the fallback and is cancelled once the safe dump is written.
"""
from __future__ import annotations

import _thread
import faulthandler
import os
import signal
import sys
import time
import traceback

FALLBACK_AFTER = 0.2  # s after the safe dump: faulthandler's turn, only if the safe one never ran
FOLLOW_EVERY = 0.25  # s between two reads of a deadline that can move


def format_stacks(skip: int | None = None) -> str:
    """Every thread's stack in faulthandler's layout (innermost frame first); `skip`: a thread ident to leave out."""
    me = _thread.get_ident()
    blocks = []
    for ident, frame in sys._current_frames().items():
        if ident == skip:
            continue
        head = "Current thread" if ident == me else "Thread"
        lines = [f"{head} 0x{ident:016x} (most recent call first):"]
        for summary in reversed(traceback.extract_stack(frame)):
            lines.append(f'  File "{summary.filename}", line {summary.lineno} in {summary.name}')
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def dump_stacks_later(seconds: float, fd: int, moved_by: str = "") -> None:
    """In `seconds`, write every thread's stack (but the watchdog's own) to file descriptor `fd`.

    `moved_by`, if given, is a file where the one who keeps the deadline writes it anew (a wall-clock
    time) when it moves it back: the dump then waits for it, half a second before."""
    faulthandler.dump_traceback_later(seconds + FALLBACK_AFTER, exit=False, file=fd)

    def watchdog() -> None:
        due = time.monotonic() + seconds
        while (left := due - time.monotonic()) > 0:
            time.sleep(min(left, FOLLOW_EVERY) if moved_by else left)
            later = _read_deadline(moved_by) - 0.5 - time.time() if moved_by else 0.0
            if later > due - time.monotonic() + FOLLOW_EVERY / 2:
                due = time.monotonic() + later
                faulthandler.dump_traceback_later(later + FALLBACK_AFTER, exit=False, file=fd)
        text = format_stacks(skip=_thread.get_ident())
        faulthandler.cancel_dump_traceback_later()
        os.write(fd, text.encode("utf-8", errors="replace"))

    # A bare thread, not a threading.Thread: it stays out of threading.enumerate(), which tests may count.
    _thread.start_new_thread(watchdog, ())


def _read_deadline(path: str) -> float:
    try:
        with open(path) as f:
            return float(f.read())
    except (OSError, ValueError):
        return 0.0


def dump_stacks_on(signum: int, fd: int) -> None:
    """On signal `signum`, write every thread's stack to `fd`: for a parent whose deadline came before
    the timed dump (a child that started late on a busy machine). The handler runs in the main thread
    between two bytecodes, holding the GIL: a loop that spins in Python runs it too."""
    signal.signal(signum, lambda *_: os.write(fd, format_stacks().encode("utf-8", errors="replace")))
