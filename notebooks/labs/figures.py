"""`show_figure(alt)`: plt.show() for the notebooks, with the figure's alternative text.

The figure is displayed as one output holding the PNG (image/png), the same PNG in an
`<img alt=...>` (text/html: JupyterLab, an HTML export and GitHub show it, with its
alt text) and the alt text (text/plain: what a reader without images gets).
"""
from __future__ import annotations

import html

import matplotlib.pyplot as plt
from IPython.core.pylabtools import print_figure
from IPython.display import display


def show_figure(alt: str, fig=None) -> None:
    """Display `fig` (default: the current figure) with `alt`, a sentence saying what it shows, then close it."""
    fig = plt.gcf() if fig is None else fig
    png = print_figure(fig, "png", base64=True)  # as the inline backend draws it
    display({
        "image/png": png,
        "text/html": f"<img alt=\"{html.escape(alt)}\" src=\"data:image/png;base64,{png}\">",
        "text/plain": alt,
    }, raw=True)
    plt.close(fig)
