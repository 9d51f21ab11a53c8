"""Plots shared by the notebooks, drawn by matplotlib: attention heatmaps, weight bars,
token-to-token lines, and a figure as (small) PNG bytes.

bertviz's interactive views live in :mod:`bertlib.pictures.bertviz_offline`; the explorers' SVG/PNG
drawings in :mod:`bertlib.pictures.widgets.render`."""

from __future__ import annotations

import io
import re

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.colors import to_rgba
from PIL import Image

from bertlib.checks import (
    are_attention_weights,
    as_array,
    attention_rows,
    attention_stack,
    labels,
    number,
    whole,
)

__all__ = [
    "check_attention_weights",
    "attention_heatmap",
    "weight_bars",
    "shown_decimals",
    "line_view",
    "line_segments",
    "figure_png",
    "small_png",
]


def check_attention_weights(weights, tokens) -> np.ndarray:
    """``weights`` as a float (n, n) matrix of attention weights over the n ``tokens``: rows =
    queries, columns = keys, n >= 1, every entry in [0, 1] (the one rule of attention weights,
    :func:`bertlib.checks.attention_rows`, as lab.analysis.check_maps applies it, but without the
    rows' sum to 1: a picture may draw weights rounded for display, as bertviz_offline does).

    Raises ValueError naming the shape expected, or the values out of range; TypeError for
    something that is not an array of numbers.
    """
    n = whole(len(tokens), "the number of tokens n", 1)
    A = attention_stack(weights, "weights", n, "(n, n)", f"for {n} tokens", ndim=2)
    return attention_rows(A, "weights", rows_sum_to_one=False)


def attention_heatmap(weights, row_tokens, col_tokens=None, ax=None, title: str = "",
                      vmin: float = 0.0, vmax: float | None = 1.0, annotate: bool | None = None,
                      cmap: str = "Blues", cbar_label: str | None = None):
    """Draw an attention matrix (n_q, n_k) with token tick labels; returns the matplotlib Axes.

    Rows are queries (who attends), columns keys (attended to). One colour scale: ``vmin`` to
    ``vmax`` (pass the same values to every panel of a figure). ``annotate`` writes the numbers
    in the cells (default: when the matrix is at most 8 x 8), with :func:`shown_decimals` digits.
    ``cbar_label`` names the colour bar; by default "attention weight" when the matrix keeps the
    one rule of attention weights (:func:`bertlib.checks.are_attention_weights`: entries in
    [0, 1], rows summing to 1, within 1e-3), no label otherwise (scores, priors: pass a label of
    your own).
    """
    A = as_array(weights, "weights", ndim=2, layout="(n_q, n_k)", finite=False)
    of = f"a matrix of shape {A.shape}"
    row_tokens = labels(row_tokens, A.shape[0], "row labels", of)
    col_tokens = row_tokens if col_tokens is None else col_tokens
    col_tokens = labels(col_tokens, A.shape[1], "column labels", of, each="column")
    if ax is None:
        size = max(3.0, 0.45 * max(A.shape) + 1.5)
        _, ax = plt.subplots(figsize=(size + 1, size))
    im = ax.imshow(A, cmap=cmap, vmin=vmin, vmax=vmax)
    ax.set_xticks(range(A.shape[1]), col_tokens, rotation=90)
    ax.set_yticks(range(A.shape[0]), row_tokens)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    if title:
        ax.set_title(title)
    if annotate is None:
        annotate = max(A.shape) <= 8
    if annotate:
        top, digits = (np.nanmax(A) if vmax is None else vmax), shown_decimals(max(A.shape))
        for i in range(A.shape[0]):
            for j in range(A.shape[1]):
                ax.text(j, i, f"{A[i, j]:.{digits}f}", ha="center", va="center", fontsize=8,
                        color="white" if A[i, j] > 0.6 * top else "black")
    if cbar_label is None:
        cbar_label = "attention weight" if are_attention_weights(A) else ""
    ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label=cbar_label)
    return ax


def shown_decimals(n: int) -> int:
    """Decimals a figure prints for n tokens: 3 up to 6 (the toy sentence, as its tables print
    them, so 0.625 is not drawn as 0.62), 2 beyond (the numbers must fit their cells)."""
    return 3 if whole(n, "n", low=0) <= 6 else 2


def weight_bars(weights, tokens, ax=None, title: str = "", highlight: int | None = None):
    """Bar chart of one query's attention weights (n_k,) over ``tokens``; returns the Axes.

    ``highlight`` (a key index) draws that bar in a darker colour, e.g. the largest weight.
    """
    row = as_array(weights, "weights", shape=(len(tokens),), layout="(n,)",
                   why="(one weight per token)", finite=False)
    if ax is None:
        _, ax = plt.subplots(figsize=(max(4.0, 0.6 * len(row) + 1), 2.8))
    colors = ["tab:blue"] * len(row)
    if highlight is not None:
        colors[highlight] = "navy"
    ax.bar(range(len(row)), row, color=colors)
    ax.set_xticks(range(len(row)), tokens, rotation=45 if len(row) > 8 else 0)
    ax.set_ylim(0, 1)
    ax.set_ylabel("attention weight")
    if title:
        ax.set_title(title)
    for j, v in enumerate(row):
        ax.text(j, v + 0.02, f"{v:.{shown_decimals(len(row))}f}", ha="center", fontsize=8)
    return ax


def line_segments(weights, query: int | None = None, min_weight: float = 0.0,
                  color: str = "tab:blue") -> tuple[np.ndarray, np.ndarray]:
    """The lines of :func:`line_view`: (segments (m, 2, 2), RGBA colours (m, 4)).

    weights: (n, n), rows = queries. Line (i → j) runs from (0, i) to (1, j) with alpha = A[i, j];
    only query ``query``'s row if given, and only weights >= ``min_weight`` (m lines in all).
    """

    A = np.asarray(weights, dtype=float)
    shown = A >= min_weight
    if query is not None:
        shown &= (np.arange(A.shape[0]) == query)[:, None]
    i, j = np.nonzero(shown)
    segments = np.stack([np.stack([np.zeros(len(i)), i], -1),
                         np.stack([np.ones(len(j)), j], -1)], axis=1)
    colors = np.tile(np.array(to_rgba(color)), (len(i), 1))
    colors[:, 3] = np.clip(A[i, j], 0, 1)
    return segments, colors


def line_view(weights, tokens, ax=None, title: str = "", query: int | None = None,
              color: str = "tab:blue", min_weight: float = 0.0, max_labels: int = 48):
    """Token-to-token lines: queries in a left column, keys in a right column, one line per pair
    with opacity (alpha) equal to its attention weight; returns the matplotlib Axes.

    weights: (n, n) attention weights, rows = queries, columns = keys, entries in [0, 1]; tokens: n
    labels.
    query: draw only that query's row (an index 0..n−1, its label in bold); None = every row.
    min_weight: leave out lines below this weight (they are nearly invisible; faster for long
    inputs). max_labels: above this many tokens, label only every k-th one.
    """
    A = check_attention_weights(weights, tokens)
    n = len(tokens)
    if query is not None:
        whole(query, "query", 0, n - 1, why="(a token index, or None for every query)")
    if ax is None:
        _, ax = plt.subplots(figsize=(4.2, max(2.5, 0.28 * n + 0.8)))
    segments, colors = line_segments(A, query, min_weight, color)
    ax.add_collection(LineCollection(segments, colors=colors, linewidths=2.0))
    step = int(np.ceil(n / max_labels)) if n > max_labels else 1
    for i in range(0, n, step):
        bold = "bold" if i == query else "normal"
        ax.text(-0.03, i, tokens[i], ha="right", va="center", fontsize=9, fontweight=bold)
        ax.text(1.03, i, tokens[i], ha="left", va="center", fontsize=9)
    ax.set_xlim(-0.6, 1.6)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_xticks([0, 1], ["query (attending)", "key (attended to)"])
    ax.set_yticks([])
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    if title:
        ax.set_title(title)
    return ax


#: Colours kept in a static picture's PNG palette (an adaptive palette: small files, clean text);
#: the most a palette PNG holds, so a colour bar beside a second colour ramp stays smooth.
PNG_COLOURS = 256


def figure_png(fig, dpi: float | None = None, crop: bool = True) -> bytes:
    """PNG bytes of a matplotlib figure, white background, at ``dpi`` (default: the figure's).

    crop=True: cut to the bounding box of what is drawn (``bbox_inches="tight"``), which also
    takes in text placed outside the figure (a caption under it); matplotlib then lays the
    figure out twice before drawing it. crop=False: the whole figure, drawn once (about a third
    less work): for a figure already laid out to fit inside itself (``layout="constrained"``, or
    ``fig.tight_layout()`` called after the last artist was added). The PNG is
    figsize × dpi pixels then.
    """
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi or fig.dpi, bbox_inches="tight" if crop else None,
                facecolor="white")
    return buffer.getvalue()


def small_png(png: bytes, colours: int = PNG_COLOURS) -> bytes:
    """The PNG re-encoded with an adaptive palette of ``colours`` colours (no dithering, so the
    same input always gives the same bytes) and maximal zlib compression."""
    image = Image.open(io.BytesIO(png)).convert("RGB")
    palette = image.quantize(colors=colours, method=Image.Quantize.MEDIANCUT,
                             dither=Image.Dither.NONE)
    buffer = io.BytesIO()
    palette.save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()



#: The colour of a route's arcs by the layer of their head ("L0...", "L1...", ...): one layer,
#: one colour, in every panel.
LAYER_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red")


def route_arcs(tokens, arcs, ax=None, title: str = "", costs=None, min_cost: float = 0.0,
               measure: str = "costs"):
    """One sentence's tokens on a line, with an arc for each attention link of a route.

    tokens: (n,) strings. arcs: [(query, key, weight, label), ...]: an arc from token ``query``
    (attending) to token ``key`` (attended to), drawn above the line for the first layer's heads
    and below for later ones when labels start with "L0"/"L1"..., coloured by that layer
    (LAYER_COLOURS; a second title line says so), its width growing with ``weight`` (0..1),
    labelled "label weight" at its top. costs: optional (len(arcs),) what switching each arc's
    head off costs (e.g. an agreement drop); an arc whose cost is below ``min_cost`` is not
    drawn (no causal test supports it) and is named in a note under the line instead ("label
    <measure> value < min_cost": ``measure`` names what costs holds, e.g. "flips" for the share of
    choices a head's patched output flips).
    ValueError for a position outside 0..n − 1, a weight outside 0..1 or costs of another
    length. Returns the Axes.
    """
    tokens = [str(t) for t in tokens]
    n = len(tokens)
    whole(n, "the number of tokens", 2)
    for query, key, weight, _ in arcs:
        whole(query, "query", 0, n - 1)
        whole(key, "key", 0, n - 1)
        number(weight, "an arc's weight", 0, 1)
    costs = [np.inf] * len(arcs) if costs is None else [float(c) for c in costs]
    whole(len(costs), "the number of costs", len(arcs), len(arcs), "(one per arc)")
    left_out = [f"{a[3]} ({measure} {c:.2f} < {min_cost:g})"
                for a, c in zip(arcs, costs, strict=True) if c < min_cost]
    arcs = [a for a, c in zip(arcs, costs, strict=True) if c >= min_cost]
    if ax is None:
        _, ax = plt.subplots(figsize=(max(6.0, 0.75 * n), 2.8))
    for i, t in enumerate(tokens):
        ax.text(i, 0, t, ha="center", va="center", fontsize=9,
                bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "#ccc"})
    t, layers = np.linspace(0, np.pi, 50), [_layer_of(a[3]) for a in arcs]
    for k, (query, key, weight, label) in enumerate(arcs):
        side = 1 if layers[k] in (0, None) else -1  # the first layer above, later ones below
        height = side * (0.35 + 0.12 * abs(query - key))
        x = (query + key) / 2 + (query - key) / 2 * np.cos(t)
        y = 0.18 * side + height * np.sin(t)
        color = LAYER_COLOURS[layers[k] % len(LAYER_COLOURS)] if layers[k] is not None else (
            plt.cm.tab10(k % 10))
        ax.plot(x, y, color=color, lw=0.8 + 5 * float(weight), alpha=0.85)
        ax.annotate("", xy=(key, 0.18 * side), xytext=(x[-3], y[-3]),
                    arrowprops={"arrowstyle": "->", "color": color, "lw": 1.2})
        ax.text((query + key) / 2, 0.18 * side + height + 0.08 * side,
                f"{label} {float(weight):.2f}", ha="center",
                va="bottom" if side > 0 else "top", fontsize=8, color=color)
    top = max([0.6] + [0.5 + 0.12 * abs(q - k) for q, k, _, _ in arcs])
    ax.set_xlim(-0.7, n - 0.3)
    ax.set_ylim(-top - (0.65 if left_out else 0.5), top + 0.5)  # room for the arcs' labels
    ax.axis("off")
    if left_out:
        ax.text(-0.6, -top - 0.6, "not drawn: " + "; ".join(left_out), fontsize=7,
                color="#666", va="bottom")
    key = "; ".join(f"layer {layer}: {'above' if layer == 0 else 'below'} the words ("
                    f"{LAYER_COLOURS[layer % len(LAYER_COLOURS)].removeprefix('tab:')})"
                    for layer in sorted({x for x in layers if x is not None}))
    if title or key:
        ax.set_title("\n".join(x for x in (title, f"arcs of {key}" if key else "") if x),
                     fontsize=10)
    return ax


def _layer_of(label) -> int | None:
    """The layer an arc's label names ("L1H2 ..." -> 1), or None."""
    found = re.match(r"L(\d+)", str(label))
    return int(found.group(1)) if found else None
