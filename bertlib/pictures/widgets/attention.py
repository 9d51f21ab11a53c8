"""Notebook 01's explorer: one query word of the toy sentence and its attention weights.

Pick a query word of "The cat sat on the mat" and how its scores are scaled before the softmax;
a bar chart of that word's weights over the six keys redraws. Every scaling is a division of the
scores by a number τ:

- ``"sqrt_dk"``: τ = √d_k, the width of one head (what BERT does);
- ``"sqrt_d"``: τ = √d, the model width (a common mistake in write-ups);
- ``"none"``: τ = 1;
- ``"temperature"``: τ = T, a T you choose in ``TEMPERATURE_RANGE``, 1e-300 … 1e300 (small T
  sharpens, large T flattens).
"""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np

from bertlib.checks import kind, number, one_of
from bertlib.paper import toy
from bertlib.paper.attention import attention_scale, scaled_dot_product_attention
from bertlib.pictures.viz import weight_bars
from bertlib.pictures.widgets import Drawn, live_box, query_index, render_safely

__all__ = ["SCALINGS", "TEMPERATURE_RANGE", "score_divisor", "toy_query_weights",
           "ToyAttentionExplorer"]

#: Scaling name -> label shown in the widget.
SCALINGS: dict[str, str] = {
    "sqrt_dk": "÷ √d_k (BERT, per head)",
    "sqrt_d": "÷ √d (model width: a mistake)",
    "none": "no scaling",
    "temperature": "÷ temperature T",
}

#: The temperatures T accepted, both ends included. T <= 0 is no temperature (T = 0 divides by
#: zero, T < 0 turns the preference around); below 1e-300, 1/T or the scores ÷ T overflow float64
#: (1/T is inf from about 5.6e-309, and the toy's scores reach 4); above 1e300, 1/T sinks
#: towards float64's smallest numbers, where it loses digits (the row is uniform long before).
TEMPERATURE_RANGE = (1e-300, 1e300)
_WHY_T = ("(T = 0 divides by zero, T < 0 turns the preference around; beyond these ends 1/T or the "
          "scores ÷ T overflow or lose their digits)")

#: Scaling name -> the divisor's symbol, named in the chart title (a still picture has no controls).
_SYMBOLS = {"sqrt_dk": "√d_k", "sqrt_d": "√d", "none": "1 (no scaling)", "temperature": "T"}


def score_divisor(scaling: str, temperature: float = 1.0, d_k: int = 2, d: int = 4) -> float:
    """τ in softmax(q Kᵀ / τ): √d_k, √d, 1 or ``temperature`` for the four ``SCALINGS``.

    ``temperature`` is read only when ``scaling == "temperature"``; it must then be a number in
    ``TEMPERATURE_RANGE`` (T = 0 would divide by zero, T < 0 would turn the preference around, a T
    of 1e-320 would make 1/T overflow): else a ValueError (a TypeError for a non-number, e.g. a
    string) naming that range. d_k: width of one head (toy: 2). d: model width (toy: 4).
    """
    one_of(scaling, "scaling", SCALINGS)
    if scaling in ("sqrt_dk", "sqrt_d"):  # the divisor of attention_scale: √d_k, or √d
        return 1 / attention_scale(d_k if scaling == "sqrt_dk" else d)
    if scaling == "none":
        return 1.0
    return number(temperature, "temperature", *TEMPERATURE_RANGE, why=_WHY_T)


def toy_query_weights(query: int | str, scaling: str = "sqrt_dk",
                      temperature: float = 1.0) -> np.ndarray:
    """Attention weights softmax(q_i Kᵀ / τ) of one toy query over the six keys: shape (6,).

    q_i: (d_k,) = row ``query`` of Q = X W_Q; K = X W_K: (6, d_k); τ from :func:`score_divisor`
    with the toy's d_k = 2 and d = 4. The weights are non-negative and sum to 1.
    """
    i = query_index(query, toy.TOKENS)
    X = toy.embeddings()
    W_Q, W_K, W_V = toy.projections()
    tau = score_divisor(scaling, temperature, d_k=W_Q.shape[1], d=X.shape[1])
    _, weights = scaled_dot_product_attention(X[i:i + 1] @ W_Q, X @ W_K, X @ W_V,
                                              scale=1.0 / tau)
    return weights[0]


def _divisor_text(scaling: str, tau: float) -> str:
    """The divisor as the title names it: "√d_k = 1.41", "√d = 2", "T = 0.5" or "1 (no scaling)"."""
    symbol = _SYMBOLS[scaling]
    return symbol if scaling == "none" else f"{symbol} = {tau:.3g}"


class ToyAttentionExplorer:
    """Controls (query word, scaling, temperature) on top, the bar chart of weights below.

    ``widget`` is the VBox to display. A temperature outside ``TEMPERATURE_RANGE`` (≤ 0, NaN, inf,
    1e-320, 1e308) shows a message naming the range in place of the chart; ``ok`` tells whether
    the last redraw succeeded. A ``temperature`` that is no number at all raises TypeError here.
    """

    def __init__(self, query: int | str = "cat", scaling: str = "sqrt_dk",
                 temperature: float = 1.0) -> None:
        one_of(scaling, "scaling", SCALINGS)
        kind(temperature, "temperature", (int, float, np.integer, np.floating),
             f"a number in [{TEMPERATURE_RANGE[0]:g}, {TEMPERATURE_RANGE[1]:g}]")
        self.query = widgets.Dropdown(
            options=[(f"{i}: {t}", i) for i, t in enumerate(toy.TOKENS)],
            value=query_index(query, toy.TOKENS), description="query")
        self.scaling = widgets.Dropdown(options=[(label, key) for key, label in SCALINGS.items()],
                                  value=scaling, description="scores")
        self.temperature = widgets.FloatText(value=temperature, description="T",
                                             continuous_update=False,
                                             layout=widgets.Layout(width="150px"))
        self.output = widgets.Output()
        self.drawn = Drawn(message="not drawn yet")
        controls = widgets.HBox([self.query, self.scaling, self.temperature])
        self.widget = live_box([controls, self.output], self._static, "attention explorer")
        self.ok = False
        for control in (self.query, self.scaling, self.temperature):
            control.observe(self._redraw, names="value")
        self._redraw()

    def _draw(self) -> None:
        i, scaling = self.query.value, self.scaling.value
        weights = toy_query_weights(i, scaling, self.temperature.value)
        tau = score_divisor(scaling, self.temperature.value)
        title = f"query {toy.TOKENS[i]!r} (position {i}): scores ÷ {_divisor_text(scaling, tau)}"
        _, ax = plt.subplots(figsize=(6, 2.8))
        weight_bars(weights, toy.TOKENS, ax=ax, highlight=int(weights.argmax()), title=title)
        ax.set_xlabel("key")

    def _redraw(self, change=None) -> None:
        self.temperature.disabled = self.scaling.value != "temperature"
        self.drawn = render_safely(self.output, self._draw)
        self.ok = bool(self.drawn)

    def _static(self) -> dict:
        """The static picture of the current view (or its message), for viewers without a kernel."""
        word = toy.TOKENS[self.query.value]
        return self.drawn.bundle(f"attention weights of the query {word!r} over the six keys")
