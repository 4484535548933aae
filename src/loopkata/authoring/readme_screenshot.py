"""The README's screenshot: kata 01's check panel turned green, taken by the browser stage.

`make screenshot` runs the browser stage's learner loop and stores its screenshot
here with the panel's headline in a PNG text chunk; tests/test_setup.py compares
that headline with what the panel would say today (how many tests kata 01 has),
so the picture cannot go on showing a count that changed.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from PIL import Image, PngImagePlugin

from ..grading import runner
from ..model import catalogue

PATH = "docs/screenshot.png"
KEY = "loopkata-headline"  # the PNG text chunk holding the panel's headline


def expected_headline() -> str:
    """What kata 01's panel says once it is solved, with today's number of tests."""
    kata = catalogue.load()[0]
    return f"{kata.label}: solved, all {len(runner.expected_tests(kata))} tests pass"


def write(shot: Path, target: Path, headline: str) -> None:
    """Store the browser's screenshot `shot` at `target`, its headline kept in a text chunk."""
    info = PngImagePlugin.PngInfo()
    info.add_text(KEY, headline)
    with Image.open(shot) as image:
        image.save(target.with_suffix(".tmp.png"), pnginfo=info)
    shutil.move(target.with_suffix(".tmp.png"), target)


def stored_headline(path: Path) -> str | None:
    """The headline the stored screenshot shows, or None if it carries none."""
    try:
        with Image.open(path) as image:
            return image.text.get(KEY)
    except OSError:
        return None
