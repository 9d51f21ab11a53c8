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


# --- notebook 03 ---
def encoder_layer(n: int, d: int, h: int, d_ff: int):
    """One BERT encoder layer (post-LN) as boxes and arrows, every arrow labelled with its shape.

    X (n, d) → multi-head self-attention (h heads of d_k = d/h) → add X (residual) → LayerNorm
    → X₁ (n, d) → feed-forward GELU(X₁W₁ + b₁)W₂ + b₂ through (n, d_ff) → add X₁ → LayerNorm
    → X₂ (n, d). n: pieces, d: width, h: heads, d_ff: feed-forward width (from model.config).
    Returns the matplotlib Figure.
    """
    for label, value in (("n", n), ("d", d), ("h", h), ("d_ff", d_ff)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{label} must be a positive whole number, got {value!r}")
    if d % h:
        raise ValueError(f"d = {d} must be divisible by the number of heads h = {h}")
    fig, ax = canvas(13.6, 3.9, title="One encoder layer (BERT normalises after each residual sum)",
                     scale=0.85)
    y, yr = 1.5, 3.0  # the main row, and the row of the residual (skip) paths
    steps = [  # x, text, colour, width
        (0.7, f"X\n({n}, {d})", "input", 1.1),
        (3.3, f"multi-head\nattention\n{h} heads,\nd_k = {d // h}", "weights", 1.9),
        (5.5, "+", "op", 0.5),
        (6.8, "LayerNorm", "op", 1.3),
        (9.5, f"feed-forward\nGELU(X₁W₁+b₁)W₂+b₂\ninside ({n}, {d_ff})", "value", 2.5),
        (11.6, "+", "op", 0.5),
        (12.8, "LayerNorm", "op", 1.3),
    ]
    for x, text, colour, width in steps:
        box(ax, (x, y), text, colour=colour, width=width, height=1.2 if width > 1 else 0.6)
    edges = [(0.7 + 0.55, 3.3 - 0.95, f"({n}, {d})"), (3.3 + 0.95, 5.5 - 0.25, f"({n}, {d})"),
             (5.5 + 0.25, 6.8 - 0.65, None), (6.8 + 0.65, 9.5 - 1.25, f"X₁\n({n}, {d})"),
             (9.5 + 1.25, 11.6 - 0.25, None), (11.6 + 0.25, 12.8 - 0.65, None)]
    for x0, x1, text in edges:
        arrow(ax, (x0, y), (x1, y), text, fontsize=7)
    for x_from, x_to, text in ((0.7, 5.5, "residual: X"), (6.8, 11.6, "residual: X₁")):
        ax.plot([x_from, x_from, x_to], [y + 0.6, yr, yr], color="#333333", linewidth=1)
        arrow(ax, (x_to, yr), (x_to, y + 0.3), None)
        ax.text((x_from + x_to) / 2, yr + 0.1, text, ha="center", va="bottom", fontsize=8)
    ax.text(12.8, y - 0.7, f"X₂ ({n}, {d})\nto the next layer", ha="center", va="top", fontsize=8)
    return fig
