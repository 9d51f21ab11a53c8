"""The fill-mask explorer of notebook 09: type a sentence of the generated language with one
[MASK]; see the tiny BERT's top words for it and where one head looks from the [MASK].

    FillMaskExplorer(model, tokenizer, "the key near the cabinets [MASK] the dog", layer, head)

Like every explorer (see :mod:`bertlib.pictures.widgets`), it shows a static picture of its
first view before the live widget, and a bad sentence (no [MASK], a word outside the language)
as a message.
"""

from __future__ import annotations

import base64

import IPython.display
import ipywidgets as w
import matplotlib.pyplot as plt

from bertlib.pictures.viz import figure_png, small_png
from bertlib.pictures.widgets import attempt, live_box, message_html, static_bundle
from bertlib.tiny import pretrain

__all__ = ["fill_mask_figure", "FillMaskExplorer"]


def fill_mask_figure(model, tokenizer, text: str, layer: int, head: int, k: int = 5):
    """The fill-mask view as a matplotlib Figure: the top-k words for the [MASK] (title) and,
    under each of the n tokens, head (layer, head)'s weight from the [MASK] to it (a 1 × n strip,
    0 to 1). Errors as :func:`bertlib.tiny.pretrain.tiny_fill_mask`."""
    top, tokens, maps, where = pretrain.tiny_fill_mask(model, tokenizer, text, k)
    row = maps[layer, head, where]  # (n,)
    fig, ax = plt.subplots(figsize=(max(4.0, 0.75 * len(tokens)), 1.9), layout="constrained")
    ax.imshow(row[None, :], cmap="Reds", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(tokens)), tokens, rotation=45, ha="right", fontsize=9)
    ax.set_yticks([])
    for j, weight in enumerate(row):
        ax.text(j, 0, f"{weight:.2f}", ha="center", va="center", fontsize=8,
                color="white" if weight > 0.6 else "black")
    guesses = ", ".join(f"{word} {p:.2f}" for word, p in top)
    ax.set_title(f"[MASK] → {guesses}\nlayer {layer} head {head}: attention from [MASK]",
                 fontsize=9)
    return fig


class FillMaskExplorer:
    """Widget: a sentence box on top, the top words and one head's attention below.

    model, tokenizer: the tiny BERT of notebook 09 and its word-level tokenizer; text: the first
    sentence; layer, head: the head whose attention from the [MASK] is shown. Show it as the last
    line of a cell (or ``display(explorer)``).
    """

    def __init__(self, model, tokenizer, text: str, layer: int, head: int, k: int = 5):
        self.model, self.tokenizer, self.layer, self.head, self.k = (
            model, tokenizer, layer, head, k)
        self.text = w.Text(value=text, description="sentence", continuous_update=False,
                           layout=w.Layout(width="600px"))
        self.page = w.HTML(self._html(text))
        self.text.observe(lambda change: setattr(self.page, "value", self._html(change["new"])),
                          names="value")
        self.widget = live_box([self.text, self.page], self._static, "fill-mask explorer")

    def _view(self, text: str) -> tuple[bytes | None, str]:
        """(PNG of the view, "") or (None, the message for a bad sentence)."""
        fig, problem = attempt(fill_mask_figure, self.model, self.tokenizer, text, self.layer,
                               self.head, self.k)
        if problem:
            return None, problem
        png = figure_png(fig)
        plt.close(fig)
        return png, ""

    def _html(self, text: str) -> str:
        png, message = self._view(text)
        if message:
            return message_html(message)
        data = base64.b64encode(small_png(png)).decode("ascii")
        return f'<img src="data:image/png;base64,{data}" alt="fill-mask view">'

    def _static(self) -> dict:
        png, message = self._view(self.text.value)
        return static_bundle(png, message, alt=f"fill-mask view of {self.text.value!r}")

    def _ipython_display_(self) -> None:
        IPython.display.display(self.widget)
