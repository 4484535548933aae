"""`%%isolated`: run a cell's body in a fresh Python process, with a deadline, and print what it printed.

The body stays Python code in the notebook (highlighted and editable as code), and runs where
`asyncio.run()` may start a loop of its own: not in the kernel, which already runs one. Load it
once per kernel with `%load_ext labs.isolated`; `%%isolated --timeout 2` sets the deadline
(default 10 s), after which a script still running is killed and its stuck lines are shown.
"""
from __future__ import annotations

from loopkata import run_isolated

DEFAULT_TIMEOUT = 10.0


def _timeout(line: str) -> float:
    """The deadline the magic's line asks for: nothing, or `--timeout SECONDS`."""
    words = line.split()
    if not words:
        return DEFAULT_TIMEOUT
    if len(words) == 2 and words[0] == "--timeout":
        try:
            seconds = float(words[1])
        except ValueError:
            seconds = 0.0
        if seconds > 0:
            return seconds
    raise ValueError(f"%%isolated takes nothing or `--timeout SECONDS` (a number above 0), not {line.strip()!r}")


def isolated(line: str, cell: str) -> None:
    """Run the cell's body in a new Python process and print its output and how it ended."""
    try:
        timeout = _timeout(line)
    except ValueError as exc:
        print(exc)
        return
    run_isolated(cell, timeout=timeout).show()


def load_ipython_extension(ipython) -> None:
    ipython.register_magic_function(isolated, magic_kind="cell")
