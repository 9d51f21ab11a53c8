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


# --- notebook 09 ---
def pretraining_step(batch: int = 128, n: int = 16, vocab: int = 102):
    """One masked-LM pre-training step of notebook 09: sentences -> ids (B, N) -> 15 % masked
    (80/10/10) -> BertForMaskedLM -> logits (B, N, V) -> cross-entropy at the chosen positions
    -> AdamW. Shapes use ``batch`` = B, ``n`` = N (padded length) and ``vocab`` = V."""
    for name, value in (("batch", batch), ("n", n), ("vocab", vocab)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    fig, ax = canvas(13, 4.2, title="One pre-training step", scale=0.8)
    top, low = 3.0, 1.2
    box(ax, (1.2, top), f"grammar\n{batch} sentences", "input", width=1.9)
    box(ax, (4.0, top), f"tokenizer\nids ({batch}, {n})", "input", width=1.9)
    box(ax, (7.0, top), f"mask 15 %\n80 / 10 / 10\nids' + labels ({batch}, {n})", "op",
        width=2.5, height=1.0)
    box(ax, (10.6, top), f"BertForMaskedLM\nlogits ({batch}, {n}, {vocab})", "output",
        width=2.6)
    box(ax, (10.6, low), "cross-entropy\nat chosen positions\nloss (scalar)", "scores",
        width=2.6, height=1.0)
    box(ax, (7.0, low), "backward\nAdamW + warm-up", "weights", width=2.5)
    arrow(ax, (2.15, top), (3.05, top))
    arrow(ax, (4.95, top), (5.75, top))
    arrow(ax, (8.25, top), (9.3, top))
    arrow(ax, (10.6, top - 0.4), (10.6, low + 0.5))
    arrow(ax, (9.3, low), (8.25, low))
    arrow(ax, (7.0, low + 0.4), (9.6, top - 0.4), "new weights", offset=(-0.6, 0.0))
    return fig
