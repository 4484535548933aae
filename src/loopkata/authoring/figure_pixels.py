"""Does a figure show data? Its coloured pixels, counted.

A notebook's figures draw their data in colour; axes, ticks and text are black, grey and white.
A blank image, or bare axes with nothing plotted on them, has (almost) no coloured pixel.
"""
from __future__ import annotations

import io

# Fewer coloured pixels than this: a blank image, or axes with nothing on them.
WITH_DATA = 500


def coloured_pixels(png: bytes) -> int:
    """How many pixels of the PNG are in colour: their channels differ by more than a sixth of the range."""
    import matplotlib.image

    rgb = matplotlib.image.imread(io.BytesIO(png), format="png")[..., :3]
    return int(((rgb.max(axis=-1) - rgb.min(axis=-1)) > 0.16).sum())
