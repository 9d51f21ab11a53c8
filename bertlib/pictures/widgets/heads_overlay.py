"""An overlay for the attention explorer: the selected head's pattern class and shares.

    from bertlib.pictures.widgets.explorer import BertAttentionExplorer
    from bertlib.pictures.widgets.heads_overlay import heads_overlay
    BertAttentionExplorer("The cat sat on the mat.", overlay=heads_overlay)

Under the heatmap it shows, for the input on screen, the head's pattern label (the rules of
:func:`bertlib.lab.analysis.pattern_labels`), its shares of attention to [CLS], [SEP], punctuation,
itself, the previous and the next token, its entropy against log n, and its mean distance.
"""

from __future__ import annotations

import html

import numpy as np

from bertlib.lab.analysis import (
    attention_distance,
    attention_entropy,
    pattern_features,
    pattern_labels,
    to_token_shares,
)
from bertlib.pictures.widgets.explorer import selected_weights

__all__ = ["segments_from_tokens", "heads_overlay"]


def segments_from_tokens(tokens: list[str]) -> np.ndarray | None:
    """Sentence of each piece (n,) for ``[CLS] A [SEP] B [SEP]``: 0 up to the first [SEP], then
    1; None for a single sentence (one [SEP] or none)."""
    seps = [i for i, t in enumerate(tokens) if t == "[SEP]"]
    if len(seps) < 2:
        return None
    return (np.arange(len(tokens)) > seps[0]).astype(int)


def heads_overlay(tokens: list[str], attentions: np.ndarray, layer: int,
                  head: int | None) -> str:
    """HTML summary of one head (or the mean of a layer's heads, head None) on this input.

    tokens: n pieces; attentions: (layers, heads, n, n). The contract of the explorer's
    ``overlay``. Raises ValueError/TypeError for a bad layer or head, or maps that are not
    attention (the explorer shows the message).
    """
    A = selected_weights(attentions, layer, head)  # (n, n)
    n = len(tokens)
    features = pattern_features(A, tokens, segments_from_tokens(tokens))
    label = str(pattern_labels(features)[0, 0])
    shares = {k: float(v[0, 0]) for k, v in to_token_shares(A, tokens).items()}
    within = float(features["within_segment"][0, 0])
    which = "mean of the heads" if head is None else f"head {head}"
    cells = "".join(
        f"<td style='padding:0 8px'>{html.escape(k)}<br><b>{v:.2f}</b></td>"
        for k, v in shares.items()
    )
    within_text = ("n/a (no far attention, or one sentence)" if np.isnan(within)
                   else f"{within:.2f}")
    return (
        "<div style='font-family:sans-serif;font-size:13px'>"
        f"<div>layer {int(layer)}, {which}: pattern <b>{html.escape(label)}</b> "
        f"(vertical {features['vertical'][0, 0]:.2f}, diagonal {features['diagonal'][0, 0]:.2f}, "
        f"within its sentence {within_text}) · entropy "
        f"{attention_entropy(A)[0, 0]:.2f} of at most log n = {np.log(n):.2f} · mean distance "
        f"{attention_distance(A)[0, 0]:.1f} tokens</div>"
        f"<table><tr><td>share of attention to:</td>{cells}</tr></table></div>"
    )
