"""Paths as a person reads them."""
from __future__ import annotations

import os
from pathlib import Path


def display_path(filename) -> str:
    """A path as a learner reads it: relative to where they are, when it can be."""
    try:
        return os.path.relpath(filename)
    except ValueError:
        return str(filename)


def shown_path(path) -> str:
    """A path as a person reads it: relative when under the current folder, else absolute."""
    shown = display_path(path)
    return str(Path(path).absolute()) if shown.startswith("..") else shown
