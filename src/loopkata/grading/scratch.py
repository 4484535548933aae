"""A check's temporary folder: removed when the check ends, and by the next check when the check could not.

The folder (loopkata-check-XXXX in the temporary folder) holds the copy of the code under test,
the results and the output. `check_folder()` makes it and keeps an exclusive flock(2) on it for
as long as the check runs. The kernel drops that lock when the process holding it ends, however
it ends, SIGKILL included: a folder whose lock can be taken has no check running in it, and
`sweep()`, with which every check begins, removes it. Neither the maker's pid (the kernel gives it
to another process in time, and another PID namespace has its own) nor the folder's age (a busy
machine stretches every check) decides it. The supervisor of a check removes the folder sooner,
as soon as the grader that made it has died (grading/supervise.py).
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

PREFIX = "loopkata-check-"  # a check's folder, under its lock
_MAKING = "loopkata-making-"  # the same, for the moment before its lock is taken: never swept


def remove(folder: Path) -> None:
    """Remove `folder` and everything in it, as far as this user may; never raises."""
    try:
        shutil.rmtree(folder, ignore_errors=True)
    except RecursionError:  # a folder nested deeper than Python's recursion limit (3.11's rmtree recurses)
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(["rm", "-rf", "--", str(folder)], stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=300, check=False)


def sweep(where: Path | str | None = None) -> list[Path]:
    """Remove the check folders in `where` (the temporary folder) whose check is no longer running; the ones removed.

    Only folders this user owns, under loopkata's name, that are folders (not links), are looked at."""
    where = Path(where if where is not None else tempfile.gettempdir())
    removed = []
    for folder in where.glob(PREFIX + "*"):
        try:
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue  # gone already, a link, or not ours to read
        try:
            if os.fstat(fd).st_uid != os.geteuid() or not stat.S_ISDIR(os.fstat(fd).st_mode):
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # its check is running
            remove(folder)
            removed.append(folder)
        finally:
            os.close(fd)
    return removed


@contextlib.contextmanager
def check_folder() -> Iterator[Path]:
    """A new check folder, locked while the `with` block runs and removed when it ends."""
    made = Path(tempfile.mkdtemp(prefix=_MAKING))
    fd = os.open(made, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # before it has a name sweep() looks at
        folder = made.with_name(PREFIX + made.name.removeprefix(_MAKING))
        os.rename(made, folder)  # the lock is the folder's own, and goes with it
        made = folder
        yield folder
    finally:
        remove(made)
        os.close(fd)
