"""Data-flow pictures drawn by code: boxes with labels and shapes, joined by arrows.

A notebook shows the picture of a mechanism before its first matrix product. Each picture is a
small function below that places boxes on a grid of plain coordinates (x to the right, y up) and
returns the matplotlib Figure, so the picture is drawn, not pasted, and stays true to the code.

    fig, ax = canvas(8, 4, title="...")
    box(ax, (1, 2), "X\\n(n, d)")
    box(ax, (4, 2), "Q = X W_Q\\n(n, d_k)", colour="query")
    arrow(ax, (1.6, 2), (3.3, 2), "W_Q")
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

__all__ = ["COLOURS", "canvas", "box", "arrow"]

#: One colour per role, the same in every picture of the series.
COLOURS = {
    "input": "#e8eef7",
    "query": "#fde2c8",
    "key": "#d7ecd9",
    "value": "#e5dcf2",
    "scores": "#fff3b0",
    "weights": "#ffd6d6",
    "output": "#d9eef5",
    "op": "#f2f2f2",
}


def canvas(width: float, height: float, title: str | None = None, scale: float = 1.0):
    """A blank picture ``width`` × ``height`` units (1 unit = ``scale`` inch); returns (fig, ax)."""
    if width <= 0 or height <= 0:
        raise ValueError(f"width and height must be positive, got {width} × {height}")
    fig, ax = plt.subplots(figsize=(width * scale, height * scale))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_aspect("equal")
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=11)
    return fig, ax


def box(ax, centre: tuple[float, float], text: str, colour: str = "op", width: float = 1.2,
        height: float = 0.8, fontsize: float = 9):
    """A rounded box centred at ``centre`` with ``text`` (role name from COLOURS or any colour)."""
    x, y = centre
    face = COLOURS.get(colour, colour)
    ax.add_patch(FancyBboxPatch((x - width / 2, y - height / 2), width, height,
                                boxstyle="round,pad=0.02,rounding_size=0.08",
                                facecolor=face, edgecolor="#444444", linewidth=1))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)


def arrow(ax, start: tuple[float, float], end: tuple[float, float], text: str | None = None,
          fontsize: float = 8, offset: tuple[float, float] = (0.0, 0.15)):
    """An arrow from ``start`` to ``end``, with an optional label at its middle, ``offset`` away."""
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12,
                                 color="#333333", linewidth=1, shrinkA=0, shrinkB=0))
    if text:
        mx = (start[0] + end[0]) / 2 + offset[0]
        my = (start[1] + end[1]) / 2 + offset[1]
        ax.text(mx, my, text, ha="center", va="bottom", fontsize=fontsize, color="#333333")
