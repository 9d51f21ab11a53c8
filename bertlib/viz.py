"""Plots shared by the notebooks: attention heatmaps and weight bars with token labels."""

from __future__ import annotations

import numpy as np

__all__ = ["attention_heatmap", "weight_bars"]


def attention_heatmap(weights, row_tokens, col_tokens=None, ax=None, title: str = "",
                      vmin: float = 0.0, vmax: float | None = 1.0, annotate: bool | None = None,
                      cmap: str = "Blues"):
    """Draw an attention matrix (n_q, n_k) with token tick labels; returns the matplotlib Axes.

    Rows are queries (who attends), columns keys (attended to). One colour scale: ``vmin`` to
    ``vmax`` (pass the same values to every panel of a figure). ``annotate`` writes the numbers
    in the cells (default: when the matrix is at most 8 x 8).
    """
    import matplotlib.pyplot as plt

    W = np.asarray(weights, dtype=float)
    if W.ndim != 2:
        raise ValueError(f"weights must be a 2-D (n_q, n_k) matrix, got shape {W.shape}")
    col_tokens = row_tokens if col_tokens is None else col_tokens
    if len(row_tokens) != W.shape[0] or len(col_tokens) != W.shape[1]:
        raise ValueError(
            f"{len(row_tokens)} row and {len(col_tokens)} column labels for a matrix of shape "
            f"{W.shape}"
        )
    if ax is None:
        size = max(3.0, 0.45 * max(W.shape) + 1.5)
        _, ax = plt.subplots(figsize=(size + 1, size))
    im = ax.imshow(W, cmap=cmap, vmin=vmin, vmax=vmax)
    ax.set_xticks(range(W.shape[1]), col_tokens, rotation=90)
    ax.set_yticks(range(W.shape[0]), row_tokens)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    if title:
        ax.set_title(title)
    if annotate is None:
        annotate = max(W.shape) <= 8
    if annotate:
        top = np.nanmax(W) if vmax is None else vmax
        for i in range(W.shape[0]):
            for j in range(W.shape[1]):
                ax.text(j, i, f"{W[i, j]:.2f}", ha="center", va="center", fontsize=8,
                        color="white" if W[i, j] > 0.6 * top else "black")
    ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    return ax


def weight_bars(weights, tokens, ax=None, title: str = "", highlight: int | None = None):
    """Bar chart of one query's attention weights (n_k,) over ``tokens``; returns the Axes.

    ``highlight`` (a key index) draws that bar in a darker colour, e.g. the largest weight.
    """
    import matplotlib.pyplot as plt

    w = np.asarray(weights, dtype=float)
    if w.ndim != 1 or len(tokens) != len(w):
        raise ValueError(f"need one weight per token: {len(tokens)} tokens, weights {w.shape}")
    if ax is None:
        _, ax = plt.subplots(figsize=(max(4.0, 0.6 * len(w) + 1), 2.8))
    colors = ["tab:blue"] * len(w)
    if highlight is not None:
        colors[highlight] = "navy"
    ax.bar(range(len(w)), w, color=colors)
    ax.set_xticks(range(len(w)), tokens, rotation=45 if len(w) > 8 else 0)
    ax.set_ylim(0, 1)
    ax.set_ylabel("attention weight")
    if title:
        ax.set_title(title)
    for j, v in enumerate(w):
        ax.text(j, v + 0.02, f"{v:.2f}", ha="center", fontsize=8)
    return ax
