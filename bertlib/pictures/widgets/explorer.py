"""The attention explorer: type a sentence (and an optional second one), pick a layer and a head
(or the mean of the heads), and see the real BERT's attention as a heatmap and as token-to-token
lines. Reused by later notebooks, which can add an ``overlay`` (HTML under the view).

    from bertlib.pictures.widgets.explorer import BertAttentionExplorer
    BertAttentionExplorer("The cat sat on the mat")       # the last line of a cell shows it

Its latency benchmark: ``python benchmarks/explorer_latency.py``.
"""

from __future__ import annotations

import contextlib
import html
import re
from collections.abc import Callable

import IPython.display
import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np

from bertlib.checks import kind
from bertlib.hf.loading import load_bert
from bertlib.hf.models import check_layer_head, run_bert
from bertlib.pictures.viz import attention_heatmap, line_view
from bertlib.pictures.widgets import (
    attempt,
    figure_png,
    live_box,
    message_html,
    static_bundle,
)
from bertlib.pictures.widgets.render import attention_svg, lines_svg

__all__ = ["BertAttentionExplorer", "selected_weights", "view_html", "view_figure"]

MEAN = "mean"
_LABELLED_TICKS = 48  # above this many tokens, label only every k-th tick
MIN_LINE_WEIGHT = 0.01  # lines fainter than this are not drawn
TOP_KEYS = 4  # above _LABELLED_TICKS tokens, lines only to each query's strongest keys


def selected_weights(attentions: np.ndarray, layer: int, head: int | None) -> np.ndarray:
    """The (n, n) map to show: attentions[layer, head], or the mean over heads if head is None.

    attentions: (layers, heads, n, n). The mean of row-stochastic maps is row-stochastic too.
    Raises ValueError/TypeError naming the valid range for a bad layer or head.
    """
    layer, head = check_layer_head(attentions, layer, head)
    if head is None:
        return attentions[layer].mean(axis=0)
    return attentions[layer, head]


def _describe(attentions: np.ndarray, layer: int, head: int | None) -> str:
    which = f"mean of {attentions.shape[1]} heads" if head is None else f"head {head}"
    return f"layer {layer}, {which}"


def view_html(tokens: list[str], attentions: np.ndarray, layer: int, head: int | None) -> str:
    """The explorer's view as HTML for the browser to draw: heatmap (left) and token-to-token
    lines (right) of one head, or the mean of the heads, inside ``<div class="explorer-view">``.

    tokens: n labels; attentions: (layers, heads, n, n). Lines under MIN_LINE_WEIGHT are left out
    (invisible anyway); above _LABELLED_TICKS tokens only each query's TOP_KEYS strongest keys get
    a line and only every k-th token a label. No matplotlib figure: a string, built in ms.
    """
    A = selected_weights(attentions, layer, head)
    long = len(tokens) > _LABELLED_TICKS
    heatmap = attention_svg(A, tokens, title=_describe(attentions, layer, head),
                            max_labels=_LABELLED_TICKS)
    lines = lines_svg(A, tokens, title="each line: query → key, opacity = weight",
                      min_weight=MIN_LINE_WEIGHT, top_k=TOP_KEYS if long else None,
                      max_labels=_LABELLED_TICKS)
    note = (f'<div style="font-size:11px;color:#555">{len(tokens)} tokens: one label in '
            f"{int(np.ceil(len(tokens) / _LABELLED_TICKS))} shown; lines for each "
            f"query's {TOP_KEYS} strongest keys</div>" if long else "")
    return ('<div class="explorer-view" style="display:flex;flex-wrap:wrap;gap:12px;'
            f'align-items:flex-start">{heatmap}{lines}</div>{note}')


def _html_text(source: str) -> str:
    """Readable lines of a small HTML snippet (an overlay): tags dropped, one line per block."""
    text = re.sub(r"<br\s*/?>|</td>", " ", source)
    text = re.sub(r"</(div|tr|table|p)>", "\n", text)
    lines = (" ".join(html.unescape(re.sub(r"<[^>]+>", " ", line)).split())
             for line in text.splitlines())
    return "\n".join(line for line in lines if line)


def view_figure(tokens: list[str], attentions: np.ndarray, layer: int, head: int | None,
                caption: str = "", title: str = ""):
    """The explorer's view drawn by matplotlib (its static picture): heatmap (left) and
    token-to-token lines (right) of one head or the mean of the heads, ``caption`` under them,
    ``title`` (e.g. the sentence) above them.

    tokens: n labels; attentions: (layers, heads, n, n). Returns the Figure (the caller closes
    it). Raises ValueError/TypeError for a bad layer or head, like :func:`view_html`.
    """
    A = selected_weights(attentions, layer, head)
    n = len(tokens)
    long = n > _LABELLED_TICKS
    side = float(np.clip(0.3 * n + 1.5, 3.5, 6.0))
    fig, (ax_map, ax_lines) = plt.subplots(1, 2, figsize=(2 * side + 2.5, side + 0.6),
                                           gridspec_kw={"width_ratios": [1.25, 1]}, dpi=96)
    try:
        attention_heatmap(A, tokens, ax=ax_map, title=_describe(attentions, layer, head),
                          annotate=False)
        if long:  # tick labels as in the live view: every k-th token
            step = int(np.ceil(n / _LABELLED_TICKS))
            ax_map.set_xticks(range(0, n, step), tokens[::step], rotation=90, fontsize=6)
            ax_map.set_yticks(range(0, n, step), tokens[::step], fontsize=6)
        line_view(A, tokens, ax=ax_lines, title="each line: query → key, opacity = weight",
                  min_weight=MIN_LINE_WEIGHT, max_labels=_LABELLED_TICKS)
    except BaseException:
        plt.close(fig)
        raise
    if caption:
        fig.text(0.01, -0.06, caption, va="top", ha="left", fontsize=9)
    if title:
        fig.suptitle(title)
    return fig


def _widget_advice(message: str) -> str:
    """``message`` with advice a widget user can follow: a too-long input is shortened in the
    text boxes (there is no ``truncate=True`` to pass inside the widget)."""
    if "truncate=True" not in message:
        return message
    cut = message.find("; shorten")
    cut = cut if cut >= 0 else message.find("truncate=True")
    return message[:cut].rstrip(" ,;(") + "; shorten the text in the sentence boxes above"


class BertAttentionExplorer:
    """Widget: sentence, optional second sentence, layer and head on top; the view below.

    text, text_pair: the input (text_pair None or "" for a single sentence). model: a LoadedBert
    (default :func:`bertlib.hf.loading.load_bert`). overlay: optional callable
    ``overlay(tokens, attentions, layer, head) -> str`` whose HTML is shown under the view
    (attentions (layers, heads, n, n); head an int, or None for the mean of the heads).

    The forward pass is cached per sentence (:func:`bertlib.hf.models.run_bert`), so changing the
    layer or head only redraws: ``view`` (an ipywidgets.HTML) receives :func:`view_html`'s
    string, which the browser draws; ``weights`` is the (n, n) map shown. Bad input (empty
    sentence, more than 512 pieces, a layer or head out of range) shows ``message`` where the
    view would be, followed by the last valid view, whose controls keep working. ``widget`` is
    the ipywidgets box; the object displays itself.
    """

    def __init__(self, text: str = "The cat sat on the mat", text_pair: str | None = None,
                 model=None, overlay: Callable | None = None) -> None:
        kind(overlay, "overlay", (Callable, type(None)), "a callable or None")
        self.model = model if model is not None else load_bert()
        cfg = self.model.model.config
        self.n_layers, self.n_heads = int(cfg.num_hidden_layers), int(cfg.num_attention_heads)
        self.overlay = overlay
        self.message = ""
        self.view_source = ""  # the HTML of the last valid view
        self.weights: np.ndarray | None = None  # the (n, n) map it shows
        self.tokens: list[str] = []
        self.shown_text = ""  # the sentence (and sentence B) whose attention is shown
        self.attentions: np.ndarray | None = None
        self._layer, self._head = self.n_layers - 1, None
        self._muted = False

        wide = widgets.Layout(width="95%")
        self.text_box = widgets.Text(value=text, description="sentence", continuous_update=False,
                               layout=wide)
        self.pair_box = widgets.Text(value=text_pair or "", description="sentence B",
                               placeholder="optional second sentence", continuous_update=False,
                               layout=wide)
        self.layer_box = widgets.IntText(value=self._layer, continuous_update=False,
                                   description=f"layer 0–{self.n_layers - 1}",
                                   layout=widgets.Layout(width="170px"),
                                   style={"description_width": "initial"})
        self.head_box = widgets.Dropdown(
            options=[("mean of heads", MEAN)] + [(f"head {h}", h) for h in range(self.n_heads)],
            value=MEAN, description="head")
        self.view = widgets.HTML()
        self.overlay_html = widgets.HTML()
        self.widget = live_box([self.text_box, self.pair_box,
                                widgets.HBox([self.layer_box, self.head_box]),
                                self.view, self.overlay_html], self._static, "attention explorer")
        self.widget.add_class("bertlib-attention-explorer")
        for name, box in (("text", self.text_box), ("pair", self.pair_box),
                          ("layer", self.layer_box), ("head", self.head_box)):
            box.add_class(f"explorer-{name}")
        self.text_box.observe(self._on_text, names="value")
        self.pair_box.observe(self._on_text, names="value")
        self.layer_box.observe(self._on_layer, names="value")
        self.head_box.observe(self._on_head, names="value")
        self._on_text()

    # programmatic control (tests, later notebooks) -------------------------------------------
    def set_text(self, text: str, text_pair: str | None = None) -> bool:
        """Show a new sentence (and optional second one); True if it could be drawn."""
        with self._quiet():
            self.pair_box.value = text_pair or ""
            self.text_box.value = text
        return self._on_text()

    def set_layer(self, layer: int) -> bool:
        """Show layer ``layer`` (0-based); a bad value shows a message; True if drawn."""
        checked, problem = attempt(check_layer_head, self.model, layer)
        if problem:
            return self._show_problem(problem)
        with self._quiet():
            self.layer_box.value = checked[0]
        return self._on_layer()

    def set_head(self, head: int | str | None) -> bool:
        """Show head ``head`` (0-based), or the mean of the heads for None or "mean" (as the
        dropdown offers it); True if drawn."""
        if isinstance(head, str) and head.strip().lower() in (MEAN, "mean of heads"):
            head = None
        checked, problem = attempt(check_layer_head, self.model, 0, head)
        if problem:
            return self._show_problem(problem)
        with self._quiet():
            self.head_box.value = MEAN if checked[1] is None else checked[1]
        return self._on_head()

    @contextlib.contextmanager
    def _quiet(self):
        """Change controls without their observers redrawing (the caller redraws once)."""
        self._muted = True
        try:
            yield
        finally:
            self._muted = False

    def _ipython_display_(self) -> None:
        IPython.display.display(self.widget)

    # reactions to the controls ---------------------------------------------------------------
    def _on_text(self, change=None) -> bool:
        if self._muted:
            return False
        text, pair = self.text_box.value, self.pair_box.value
        run, problem = attempt(run_bert, text, pair if pair.strip() else None, self.model)
        if problem:
            return self._show_problem(_widget_advice(problem))
        self.tokens, self.attentions = run.tokens, run.attentions
        self.shown_text = " / ".join(repr(t) for t in (text, pair) if t.strip())  # static title
        return self._redraw()

    def _on_layer(self, change=None) -> bool:
        if self._muted:
            return False
        checked, problem = attempt(check_layer_head, self.model, self.layer_box.value, None)
        if problem:
            return self._show_problem(problem)
        self._layer = checked[0]
        return self._redraw()

    def _on_head(self, change=None) -> bool:
        if self._muted:
            return False
        value = self.head_box.value
        self._head = None if value == MEAN else int(value)
        return self._redraw()

    def _redraw(self) -> bool:
        if self.attentions is None:
            return False
        source, problem = attempt(view_html, self.tokens, self.attentions, self._layer,
                                  self._head)
        if problem:
            return self._show_problem(problem)
        self.message = ""
        self.weights = selected_weights(self.attentions, self._layer, self._head)
        self.view_source = self.view.value = source
        return self._draw_overlay()

    def _draw_overlay(self) -> bool:
        if self.overlay is None:
            return True
        shown, problem = attempt(self.overlay, self.tokens, self.attentions, self._layer,
                                 self._head)
        if problem:
            self.message = problem
            self.overlay_html.value = message_html(problem)
            return False
        self.overlay_html.value = str(shown)
        return True

    def _static(self) -> dict:
        """The static picture of the current view, for viewers without a kernel: the view drawn
        by :func:`view_figure` (overlay as text under it), or the message the live view shows
        (above the last valid view, as there)."""
        if not self.view_source:
            return static_bundle(None, self.message)
        caption = _html_text(self.overlay_html.value) if self.overlay is not None else ""
        fig, problem = attempt(view_figure, self.tokens, self.attentions, self._layer,
                               self._head, caption, self.shown_text)
        if problem:
            return static_bundle(None, problem)
        try:
            png = figure_png(fig)
        finally:
            plt.close(fig)
        shown = self.shown_text or " ".join(self.tokens)  # the sentence as typed, as in the title
        alt = f"attention of {shown}: {_describe(self.attentions, self._layer, self._head)}"
        return static_bundle(png, self.message, alt)

    def _show_problem(self, message: str) -> bool:
        """The message where the view would be, then the last valid view (still usable).
        Returns False (nothing new was drawn)."""
        self.message = message
        if not self.view_source:
            self.view.value = message_html(message)
            return False
        previous = " ".join(self.tokens[1:4]) + " …"
        note = f"{message} — still showing the last valid view ({previous})"
        self.view.value = message_html(note) + self.view_source
        return False
