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


# --- notebook 05 ---


def tiled_softmax_picture(n_blocks: int = 3):
    """The tiled online softmax of notebook 05: queries meet the keys one block at a time.

    Top row: key/value blocks K_j, V_j (B, d_k). Middle: each block's scores S_j = s·Q K_jᵀ
    (n, B), the only n-by-something matrix alive. Bottom: the running state (m, ℓ: (n, 1);
    O: (n, d_v)) handed from block to block, rescaled by e^(m − m'); last, out = O / ℓ.
    n_blocks: how many key blocks to draw (2..6). Returns the matplotlib Figure.
    """
    if isinstance(n_blocks, bool) or not isinstance(n_blocks, int) or not 2 <= n_blocks <= 6:
        raise ValueError(f"n_blocks must be a whole number in 2..6, got {n_blocks!r}")
    step = 3.0
    width = 3.0 + step * n_blocks + 2.0
    fig, ax = canvas(width, 6.2, title="Tiled attention with an online softmax: "
                                       "one block of keys at a time, never the n × n matrix")
    box(ax, (1.2, 3.4), "Q\n(n, d_k)", colour="query", width=1.4, height=1.0)
    box(ax, (1.2, 1.2), "start:\nm = −∞, ℓ = 0\nO = 0", colour="op", width=1.7, height=1.1)
    previous = (2.05, 1.2)
    for j in range(1, n_blocks + 1):
        x = 1.4 + step * j
        box(ax, (x, 5.3), f"K_{j}, V_{j}\n(B, d_k), (B, d_v)", colour="key", width=2.0, height=0.9)
        box(ax, (x, 3.4), f"S_{j} = s·Q K_{j}ᵀ\n(n, B)", colour="scores", width=1.9, height=0.9)
        box(ax, (x, 1.2), f"after block {j}:\nm, ℓ (n, 1)\nO (n, d_v)", colour="weights",
            width=1.9, height=1.1)
        arrow(ax, (x, 4.85), (x, 3.85))
        arrow(ax, (x, 2.95), (x, 1.75), "P = exp(S − m′)", offset=(0.8, -0.1))
        arrow(ax, previous, (x - 0.95, 1.2), "× e^(m−m′)", offset=(0.0, -0.45))
        previous = (x + 0.95, 1.2)
    arrow(ax, (1.9, 3.4), (1.4 + step - 0.95, 3.4), "all n queries,")
    ax.text(1.2 + step / 2, 2.75, "at every block", ha="center", fontsize=8, color="#333333")
    box(ax, (width - 1.1, 1.2), "out = O / ℓ\n(n, d_v)", colour="output", width=1.7, height=0.9)
    arrow(ax, previous, (width - 1.95, 1.2))
    ax.text(width / 2, 0.2, "B = block size; each step keeps one (n, B) block of scores, so "
            "memory grows like n, not n²", ha="center", fontsize=8)
    return fig
