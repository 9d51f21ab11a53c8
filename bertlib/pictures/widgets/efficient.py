"""Notebook 06's explorer: one efficient attention variant beside the full attention it replaces.

Pick a variant and its knob (window w, block size, projected length k, number of features m, or
number of LSH buckets), a layer and a head of the real BERT; the view draws the full attention of
that head and the attention the variant implies, on one colour scale, with the relative error of
the variant's output. A knob the variant cannot use (an odd window, k > n, a block that does not
divide n) shows the variant's own error message in place of the view.
"""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np

from bertlib.checks import one_of, whole
from bertlib.hf.loading import load_bert
from bertlib.hf.models import check_layer_head, run_bert
from bertlib.hf.params import bert_qkv
from bertlib.paper.approximations import (
    linformer_attention,
    lsh_attention,
    performer_attention,
    relative_error,
)
from bertlib.paper.attention import scaled_dot_product_attention
from bertlib.paper.variants import block_sparse_attention, sliding_window_attention
from bertlib.pictures.viz import attention_heatmap
from bertlib.pictures.widgets import Drawn, live_box, render_safely

__all__ = ["VARIANTS", "DEFAULT_TEXT", "variant_vs_full", "EfficientExplorer"]

#: variant key -> (label, knob name, default knob value)
VARIANTS: dict[str, tuple[str, str, int]] = {
    "sliding": ("sliding window (Longformer)", "window w", 4),
    "block_sparse": ("block-sparse (BigBird)", "block", 2),
    "linformer": ("low rank (Linformer)", "k", 4),
    "performer": ("random features (Performer)", "m", 16),
    "lsh": ("LSH buckets (Reformer)", "n_buckets", 2),
}

DEFAULT_TEXT = "the cat sat on the mat because it was tired after chasing the dog"  # 16 pieces


def variant_vs_full(variant: str, knob: int, Q, K, V, seed: int = 0):
    """Full attention and one variant on the same head.

    variant: a key of VARIANTS; knob: its knob (w, block, k, m or n_buckets). Block-sparse uses
    one random and one global block; LSH uses one hash round and keys shared with the queries,
    and a token does not attend to itself (so it differs from BERT's attention even with one
    bucket).
    Q, K: (n, d_k); V: (n, d_v).
    Returns (full weights (n, n), variant weights (n, n), relative error of the variant's output
    (n, d_v) against full attention's).
    """
    one_of(variant, "variant", VARIANTS)
    full_out, full_A = scaled_dot_product_attention(Q, K, V)
    if variant == "sliding":
        out, A = sliding_window_attention(Q, K, V, knob, return_weights=True)
    elif variant == "block_sparse":
        out, A = block_sparse_attention(Q, K, V, knob, n_random=1, global_blocks=1, seed=seed,
                                        return_weights=True)
    elif variant == "linformer":
        out, A = linformer_attention(Q, K, V, knob, seed=seed, return_weights=True)
    elif variant == "performer":
        out, A = performer_attention(Q, K, V, knob, seed=seed, return_weights=True)
    else:
        out, A = lsh_attention(Q, V, knob, seed=seed, return_weights=True)
    return full_A, A, relative_error(out, full_out)


class EfficientExplorer:
    """Controls (variant, knob, layer, head) on top; full vs variant heatmaps below.

    ``widget`` is the VBox to display; ``ok`` tells whether the last redraw succeeded; ``error``
    holds the last relative error drawn (None after a failed redraw).
    """

    def __init__(self, text: str = DEFAULT_TEXT, variant: str = "sliding", layer: int = 2,
                 head: int = 0, knob: int | None = None) -> None:
        """knob: the variant's starting knob (None = its default in VARIANTS); a knob the variant
        cannot use shows the variant's message in the view, as when typed in the box."""
        one_of(variant, "variant", VARIANTS)
        model = load_bert()
        layer, head = check_layer_head(model, layer, head, allow_mean=False)
        self.run = run_bert(text)  # cached: the forward pass runs once per text
        n_layers, n_heads = self.run.attentions.shape[:2]
        self.variant = widgets.Dropdown(options=[(v[0], k) for k, v in VARIANTS.items()],
                                  value=variant, description="variant")
        start = VARIANTS[variant][2] if knob is None else whole(knob, "knob", low=1)
        self.knob = widgets.IntText(value=start, description=VARIANTS[variant][1],
                              continuous_update=False, layout=widgets.Layout(width="180px"))
        self.layer = widgets.Dropdown(options=list(range(n_layers)), value=layer,
                                      description="layer", layout=widgets.Layout(width="140px"))
        self.head = widgets.Dropdown(options=list(range(n_heads)), value=head, description="head",
                               layout=widgets.Layout(width="140px"))
        self.output = widgets.Output()
        self.drawn = Drawn(message="not drawn yet")
        self.widget = live_box([widgets.HBox([self.variant, self.knob, self.layer, self.head]),
                                self.output], self._static, "efficient attention explorer")
        self.ok = False
        self.error: float | None = None
        self.variant.observe(self._new_variant, names="value")
        for control in (self.knob, self.layer, self.head):
            control.observe(self._redraw, names="value")
        self._redraw()

    def _new_variant(self, change) -> None:
        label, knob, default = VARIANTS[change["new"]]
        self.knob.description = knob
        if self.knob.value != default:
            self.knob.value = default  # triggers the redraw
        else:
            self._redraw()

    def _draw(self) -> None:
        self.error = None
        layer, head = self.layer.value, self.head.value
        Q, K, V = bert_qkv(self.run.hidden_states[layer], layer)
        full_A, variant_A, err = variant_vs_full(self.variant.value, self.knob.value,
                                             Q[head], K[head], V[head])
        hi = float(max(np.abs(full_A).max(), np.abs(variant_A).max()))
        signed = bool(variant_A.min() < 0)  # Linformer's implied weights can be negative
        scale = dict(vmin=-hi if signed else 0.0, vmax=hi, cmap="RdBu_r" if signed else "Blues")
        tokens = self.run.tokens
        fig, axes = plt.subplots(1, 2, figsize=(13, 5.8))
        attention_heatmap(full_A, tokens, ax=axes[0], annotate=False, **scale,
                          title=f"full attention, layer {layer} head {head}")
        label, knob, _ = VARIANTS[self.variant.value]
        attention_heatmap(variant_A, tokens, ax=axes[1], annotate=False, **scale,
                          title=f"{label}, {knob} = {self.knob.value}")
        fig.suptitle(f"output error vs full attention: {err:.1%} "
                     f"(kept pairs: {np.count_nonzero(variant_A)} of {variant_A.size})")
        fig.tight_layout()  # everything inside the figure: its PNG needs no cropping
        self.error = err

    def _redraw(self, change=None) -> None:
        self.drawn = render_safely(self.output, self._draw, crop=False)
        self.ok = bool(self.drawn)

    def _static(self) -> dict:
        """The static picture of the current view (or its message), for viewers without a kernel."""
        label = VARIANTS[self.variant.value][0]
        return self.drawn.bundle(f"full attention beside {label}, layer {self.layer.value} "
                                 f"head {self.head.value}")
