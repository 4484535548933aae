"""Services a kata needs, and a clear paragraph when one is missing.

Each entry names the Python packages that must import. Katas list the
services they need in the catalogue; the grader asks here before running
anything. The servers themselves (on 127.0.0.1) are started by the tests.
"""
from __future__ import annotations

import importlib.util

# name -> (importable modules, what to do when missing)
SERVICES: dict[str, tuple[tuple[str, ...], str]] = {
    "aiohttp": (("aiohttp",), "It uses aiohttp for a real HTTP server and client on 127.0.0.1."),
    "fastapi": (("fastapi", "uvicorn", "httpx"), "It serves a FastAPI app with uvicorn on 127.0.0.1."),
}

_SETUP = "Run `make lab` or `make test` once: both install everything the katas need into .venv."


def problem(names) -> str:
    """'' when every named service is available, else one paragraph saying what is missing."""
    for name in names:
        if name not in SERVICES:
            return f"The catalogue names a service '{name}' that loopkata does not know."
        modules, why = SERVICES[name]
        missing = [m for m in modules if importlib.util.find_spec(m) is None]
        if missing:
            return f"This kata needs {', '.join(missing)}, which is not installed. {why} {_SETUP}"
    return ""
