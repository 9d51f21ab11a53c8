"""Head explorer: pick a head and a query word; that head is drawn in colour, the others greyed.

Works on any stack of attention maps: the toy's two heads (h, n, n) or a real BERT's
(layers, h, n, n), e.g. ``run_bert(text).attentions``.
"""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.cm import ScalarMappable
from matplotlib.colors import ListedColormap, Normalize
from matplotlib.patches import Rectangle

from bertlib.checks import attention_stack
from bertlib.hf.models import check_layer_head
from bertlib.pictures.viz import attention_heatmap
from bertlib.pictures.widgets import Drawn, live_box, query_index, render_safely

__all__ = ["ANNOTATION_SIZE", "draw_heads", "HeadExplorer"]

#: Font size (pt) of the weights printed in draw_heads' left map: the figure is wide (two panels),
#: so a notebook column shrinks it by about a third; size 11 stays about 10 px tall there.
ANNOTATION_SIZE = 11


def draw_heads(weights, tokens: list[str], head: int, query: int | str, title: str = ""):
    """Draw one head's attention beside every head's row for one query word; returns the Figure.

    weights: (h, n, n) attention weights of h heads; tokens: the n tokens.
    head: 0..h−1. query: a position 0..n−1 or a token (its first occurrence).
    Left: head ``head``'s (n, n) matrix, the query's row outlined. Right: the query's weights
    weights[:, query, :] in all h heads, an (h, n) grid: the chosen head's row on the left panel's
    colour scale (32 even steps of Blues, 0 to 1; the colour bar's label and the title say so),
    the other heads greyed (a white-to-dark grey ramp, 0 to 1, with its own colour bar below);
    each weight is printed when n ≤ 12.
    Raises ValueError/TypeError for a bad head or query.
    """
    A = attention_stack(weights, "weights", len(tokens), "(h, n, n)", "(n = the number of tokens)",
                        ndim=3)
    h, n, _ = A.shape
    _, head = check_layer_head(A[None], 0, head, allow_mean=False)
    i = query_index(query, tokens)

    fig, (ax_head, ax_all) = plt.subplots(
        1, 2, figsize=(5.5 + 0.9 * n, 0.45 * max(n, h) + 2.2),
        gridspec_kw={"width_ratios": [1, 1]}, layout="constrained")
    # 32 even steps of Blues: the static picture's palette PNG keeps each one, so its colour bar
    # is not cut into uneven bands (a 256-step ramp beside the grey one loses most of its steps)
    blues = ListedColormap(plt.get_cmap("Blues")(np.linspace(0, 1, 32)))
    attention_heatmap(A[head], tokens, ax=ax_head, title=f"head {head}: every query",
                      annotate=n <= 10, cmap=blues,
                      cbar_label=f"attention weight (head {head}: this map and its blue row)")
    ax_head.add_patch(Rectangle((-0.5, i - 0.5), n, 1, fill=False, edgecolor="crimson", lw=2))
    for number in ax_head.texts:  # legible when the wide figure is shrunk to a notebook column
        number.set_fontsize(ANNOTATION_SIZE)

    rows = A[:, i, :]  # (h, n)
    greys = ListedColormap(plt.get_cmap("Greys")(0.02 + 0.8 * np.linspace(0, 1, 256)))
    rgba = greys(rows)  # the other heads: white to dark grey, 0..1 like the chosen head
    rgba[head] = blues(rows[head])  # the chosen head, same 0..1 scale as left
    ax_all.imshow(rgba, aspect="auto")
    ax_all.set_xticks(range(n), tokens, rotation=90)
    ax_all.set_yticks(range(h), [f"head {k}" for k in range(h)])
    ax_all.yaxis.tick_right()  # away from the left panel's colour bar
    ax_all.yaxis.set_label_position("right")
    ax_all.set_xlabel("key (attended to)")
    ax_all.set_ylabel("head")
    ax_all.set_title(f"query {tokens[i]!r} (position {i}) in all {h} heads\n"
                     f"head {head} in blue (left colour bar), the others grey (bar below)")
    for k, j in np.ndindex(rows.shape) if n <= 12 else ((head, j) for j in range(n)):
        v, text = rows[k, j], f"{rows[k, j]:.2f}"  # every weight printed (when they fit)
        ax_all.text(j, k, text if text == "1.00" else text[1:], ha="center", va="center",
                    fontsize=9, fontweight="bold" if k == head else "normal",
                    color="white" if v > 0.55 else "black")
    fig.colorbar(ScalarMappable(Normalize(0, 1), greys), ax=ax_all, label="weight (other heads)",
                 location="bottom", shrink=0.6)
    if title:
        fig.suptitle(title)
    return fig


class HeadExplorer:
    """Widget: head and query word on top, :func:`draw_heads` below; bad input -> a message.

    weights: (h, n, n) or (layers, h, n, n); tokens: the n tokens. ``layer``, ``head``, ``query``
    (a position or a token) set the starting view; a bad ``query`` raises at once. The head (and
    layer) are typed numbers, so an out-of-range choice shows a message naming the valid range in
    place of the figure; the controls stay usable.
    Show it with ``display(explorer.widget)``; ``explorer.ok`` says whether the last draw worked.
    """

    def __init__(self, weights, tokens: list[str], head: int = 0, query: int | str = 0,
                 layer: int = 0, title: str = ""):
        A = attention_stack(weights, "weights", len(tokens), "(h, n, n) or (layers, h, n, n)",
                            "(n = the number of tokens)", ndim=4 if np.ndim(weights) == 4 else 3)
        A = A[None] if A.ndim == 3 else A
        self.weights, self.tokens, self.title = A, list(tokens), title
        L, h = A.shape[:2]
        self.layer = widgets.IntText(value=layer, description=f"layer (0..{L - 1})",
                                     continuous_update=False, layout={"width": "170px"},
                                     style={"description_width": "initial"})
        self.head = widgets.IntText(value=head, description=f"head (0..{h - 1})",
                                    continuous_update=False, layout={"width": "170px"},
                                    style={"description_width": "initial"})
        self.query = widgets.Dropdown(
            options=[(f"{k}: {t}", k) for k, t in enumerate(self.tokens)],
            value=query_index(query, self.tokens), description="query word")
        self.output = widgets.Output()
        controls = [self.head, self.query] if L == 1 else [self.layer, self.head, self.query]
        for control in controls:
            control.observe(lambda _: self.redraw(), names="value")
        self.drawn = Drawn(message="not drawn yet")
        self.widget = live_box([widgets.HBox(controls), self.output], self._static,
                               "head explorer")
        self.ok = False
        self.redraw()

    def draw(self) -> None:
        """Draw the current choice (raises ValueError/TypeError for a bad layer or head)."""
        layer, _ = check_layer_head(self.weights, self.layer.value)
        title = self.title if len(self.weights) == 1 else f"{self.title} layer {layer}".strip()
        draw_heads(self.weights[layer], self.tokens, self.head.value, self.query.value, title)

    def redraw(self) -> bool:
        """Redraw into the output (a message instead if the choice is bad); True if it drew."""
        self.drawn = render_safely(self.output, self.draw, crop=False)  # constrained layout
        self.ok = bool(self.drawn)
        return self.ok

    def _static(self) -> dict:
        """The static picture of the current view (or its message), for viewers without a kernel."""
        return self.drawn.bundle(f"head {self.head.value}: attention of every query, and the "
                                 "chosen query's row in every head")
