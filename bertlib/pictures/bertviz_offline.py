"""bertviz's interactive head and model views, made to render with no internet and to show a
static picture where no script runs.

bertviz's HTML loads require.js, d3 and jQuery from a CDN; :func:`offline_bertviz_html` inlines
copies read from installed packages instead. :func:`with_static_snapshot` puts a matplotlib
picture of the same attention (:func:`head_view_figure`, :func:`model_view_figure`) inside the
view until bertviz has drawn. The views are :class:`BertvizView` objects, which also offer the
picture as a separate ``image/png`` output (and its description as text), for readers that show
no HTML at all."""

from __future__ import annotations

import base64
import functools
import html as html_lib
import importlib.util
import re
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
from bertviz import head_view as _head_view
from bertviz import model_view as _model_view
from IPython.display import HTML

from bertlib.checks import attention_stack, whole
from bertlib.hf.models import check_layer_head
from bertlib.pictures.viz import figure_png, line_view, small_png

__all__ = [
    "offline_bertviz_html",
    "with_static_snapshot",
    "head_view_figure",
    "model_view_figure",
    "BertvizView",
    "head_view",
    "model_view",
]


# --- bertviz, offline -------------------------------------------------------------------------
# bertviz's HTML loads require.js from a CDN and tells require.js to fetch d3 and jQuery from the
# CDN too. With no internet the view stays blank. We remove both and put copies of the three
# libraries, read from installed packages, in front of the view.
_LIBRARIES = {  # (package, file inside it)
    "d3": ("mpld3", "js/d3.v5.min.js"),
    "jquery": ("nbclassic", "static/components/jquery/jquery.min.js"),
    "requirejs": ("nbclassic", "static/components/requirejs/require.js"),
}
_CDN_SCRIPT = re.compile(r'<script src="https://cdnjs\.cloudflare\.com/[^"]*require[^"]*"></script>')
_REQUIRE_CONFIG = re.compile(r"require\.config\(\{.*?\}\);", re.DOTALL)


def _library_source(name: str) -> str:

    package, relative = _LIBRARIES[name]
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise ImportError(f"the offline bertviz views read {name} from the package {package!r}; "
                          "install the pinned requirements (requirements.txt)")
    return (Path(spec.origin).parent / relative).read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def _offline_libraries_script() -> str:
    """One <script>: d3 and jQuery as plain globals (the AMD hooks hidden while they load), then
    require.js unless the page already has it, then d3 and jQuery registered as its modules."""
    d3, jquery, requirejs = (_library_source(k) for k in ("d3", "jquery", "requirejs"))
    return (
        '<script type="text/javascript">\n'
        "(function (define, module, exports) {\n" + d3 + "\n}).call(window);\n"
        "(function (define, module, exports) {\n" + jquery + "\n}).call(window);\n"
        'if (typeof window.requirejs === "undefined") {\n' + requirejs + "\n}\n"
        'define("d3", [], function () { return window.d3; });\n'
        'define("jquery", [], function () { return window.jQuery; });\n'
        "</script>\n"
    )


def offline_bertviz_html(html: str) -> str:
    """Turn bertviz's ``html_action="return"`` HTML into HTML that renders with no internet.

    Removes the CDN <script src=...require.js> tag and the ``require.config`` CDN paths, and puts
    inline copies of d3 v5 (from mpld3), jQuery and require.js (from nbclassic) in front.
    Raises RuntimeError if bertviz's HTML no longer has the expected shape.
    """
    html, n_tags = _CDN_SCRIPT.subn("", html)
    html, n_configs = _REQUIRE_CONFIG.subn("", html)
    if n_tags != 1 or n_configs != 1:
        raise RuntimeError(
            f"unexpected bertviz HTML ({n_tags} CDN require.js tags, {n_configs} require.config "
            "blocks; expected 1 each): has bertviz changed? Pin bertviz==1.4.1"
        )
    return _offline_libraries_script() + html


def _check_attentions(tokens, attentions) -> np.ndarray:
    """attentions as a finite float64 (layers, heads, n, n) array, n = len(tokens)."""
    n = len(tokens)
    return attention_stack(attentions, "attentions", n, "(layers, heads, n, n)", f"for {n} tokens",
                           ndim=4).astype(np.float64)


def _bertviz_input(tokens, attentions, decimals: int):
    # rounded: smaller HTML, and the view cannot show more digits anyway
    A = np.round(_check_attentions(tokens, attentions), decimals)
    return [torch.from_numpy(A[l][None]) for l in range(A.shape[0])], list(tokens)


def _check_sentence_b_start(tokens, sentence_b_start):
    if sentence_b_start is None:
        return None
    return whole(sentence_b_start, "sentence_b_start", 1, len(tokens) - 1,
                 why="(the first token of the second sentence)")


# --- a static snapshot inside each bertviz view -------------------------------------------------
# A viewer that runs no scripts (GitHub, nbconvert's HTML, an untrusted notebook in JupyterLab)
# would show bertviz's view as an empty "Layer:" box. So the view carries a PNG of the same
# attention drawn by matplotlib; a small script removes it (and shows the controls) as soon as
# bertviz has drawn its SVG.
_BERTVIZ_ROOT = re.compile(r'<div id="(bertviz-[0-9a-f]+)"[^>]*>')
_BERTVIZ_CONTROLS = '<span style="user-select:none">'
_BERTVIZ_VIS = "<div id='vis'></div>"
_SNAPSHOT_SCRIPT = """<script type="text/javascript">
(function () {
  var root = document.getElementById("%s");
  var vis = root && root.querySelector("#vis");
  if (!vis) return;
  function drawn() {
    if (!vis.querySelector("svg")) return false;
    root.querySelectorAll(".bertlib-static").forEach(function (e) { e.remove(); });
    root.querySelectorAll(".bertlib-until-run").forEach(function (e) { e.style.display = ""; });
    return true;
  }
  if (!drawn()) {
    new MutationObserver(function (changes, observer) {
      if (drawn()) observer.disconnect();
    }).observe(vis, {childList: true, subtree: true});
  }
})();
</script>
"""



def _figure_png(fig) -> bytes:
    return small_png(figure_png(fig))


def with_static_snapshot(html: str, png: bytes, alt: str) -> str:
    """bertviz's HTML with ``png`` shown inside its view until bertviz has drawn.

    The PNG goes in an ``<img class="bertlib-static">`` after the view's drawing area, bertviz's
    (still empty) controls are hidden, and a script appended at the end removes the image and
    shows the controls once the view holds an SVG. Raises RuntimeError if bertviz's HTML no
    longer has the expected shape.
    """

    root = _BERTVIZ_ROOT.search(html)
    if root is None or html.count(_BERTVIZ_VIS) != 1 or html.count(_BERTVIZ_CONTROLS) != 1:
        raise RuntimeError("unexpected bertviz HTML (no single bertviz-<id> view with a 'vis' "
                           "area and controls): has bertviz changed? Pin bertviz==1.4.1")
    data = base64.b64encode(png).decode("ascii")
    image = (f'<img class="bertlib-static" alt="{html_lib.escape(alt)}" '
             f'src="data:image/png;base64,{data}">')
    html = html.replace(_BERTVIZ_CONTROLS, '<span class="bertlib-until-run" '
                        'style="user-select:none;display:none">')
    html = html.replace(_BERTVIZ_VIS, _BERTVIZ_VIS + image)
    return html + _SNAPSHOT_SCRIPT % root.group(1)


class BertvizView(HTML):
    """A bertviz view as displayed: ``data`` is its HTML (the live view, with the snapshot inside
    until it draws); ``png`` the snapshot's bytes, also offered as ``image/png`` so a reader that
    shows no HTML still shows the picture; ``alt`` a one-line description (its text form)."""

    def __init__(self, html: str, png: bytes, alt: str) -> None:
        super().__init__(html)
        self.png, self.alt = png, alt

    def _repr_png_(self) -> bytes:
        return self.png

    def __repr__(self) -> str:
        return f"[{self.alt}: run the cell to use the interactive view; a picture is stored]"


def _head_colours(chosen: list[int]) -> dict:
    """A colour per chosen head: bertviz's own (d3's category10: head k gets colour k mod 10, the
    same as matplotlib's tab10) when those differ, else ten clearly distinct hues in order."""
    tab10 = plt.get_cmap("tab10")
    if len({k % 10 for k in chosen}) == len(chosen):
        return {k: tab10(k % 10) for k in chosen}
    tab20 = plt.get_cmap("tab20")  # more than ten, or two heads 10 apart: the order decides
    palette = [tab10(i) for i in range(10)] + [tab20(2 * i + 1) for i in range(10)]
    return {k: palette[i % len(palette)] for i, k in enumerate(chosen)}


def head_view_figure(tokens, attentions, layer: int = 0, heads=None, min_weight: float = 0.05):
    """bertviz's head view drawn by matplotlib: one layer, one small panel per selected head
    (at most four per row), each head's token-to-token lines in its own colour (opacity =
    weight), queries left, keys right, with a legend naming each head's colour.

    One panel per head because translucent lines of different heads drawn on one another mix
    into colours no legend names (blue over orange reads as grey or brown).
    tokens: n labels; attentions: (layers, heads, n, n); heads: indices (None = all). Lines
    under ``min_weight`` are left out. Returns the Figure (the caller closes it).
    """

    A = np.asarray(attentions, dtype=float)
    h, n = A.shape[1], A.shape[2]
    chosen = list(range(h)) if heads is None else [int(k) for k in heads]
    colours = _head_colours(chosen)
    cols = min(len(chosen), 4)
    rows = -(-len(chosen) // cols)
    fig, axes = plt.subplots(rows, cols, squeeze=False, dpi=100, layout="constrained",
                             figsize=(2.6 * cols, rows * max(2.2, 0.28 * n + 0.9) + 0.6))
    for ax, k in zip(axes.flat, chosen, strict=False):
        line_view(A[layer, k], tokens, ax=ax, color=colours[k], min_weight=min_weight)
        ax.set_xticks([0, 1], ["query", "key"], fontsize=8)
        ax.set_title(f"head {k}", fontsize=10, color=colours[k], fontweight="bold")
    for ax in axes.flat[len(chosen):]:
        ax.set_visible(False)
    shown = f"{len(chosen)} heads" if len(chosen) == h else f"{len(chosen)} of {h} heads"
    fig.suptitle(f"layer {layer}: {shown}, one panel and colour each\n"
                 f"a line's opacity is its weight (under {min_weight:g}: not drawn)", fontsize=10)
    handles = [plt.Line2D([], [], color=colours[k], lw=4) for k in chosen]
    fig.legend(handles, [f"head {k}" for k in chosen], fontsize=9, ncols=min(len(chosen), 6),
               loc="outside lower center", frameon=False)
    return fig


def _model_view_grid(A, tokens, layers: list[int], heads: list[int]):
    """One labelled thumbnail per (layer, head): layer names the rows, head the columns, the
    tokens label the first column (queries) and the last row (keys); a shared colour bar."""
    n = len(tokens)
    side = 0.17 * n + 0.3  # inches per thumbnail: about 2.2 for 11 tokens, room for size-10 labels
    fig, axes = plt.subplots(len(layers), len(heads), squeeze=False, dpi=100, layout="constrained",
                             figsize=(2.2 + side * len(heads), 1.4 + side * len(layers)))
    for r, layer in enumerate(layers):
        for c, k in enumerate(heads):
            ax = axes[r, c]
            image = ax.imshow(A[layer, k], cmap="Blues", vmin=0, vmax=1, interpolation="nearest")
            ax.set_xticks(range(n), tokens if r == len(layers) - 1 else [], rotation=90,
                          fontsize=10)
            ax.set_yticks(range(n), tokens if c == 0 else [], fontsize=10)
            ax.tick_params(length=0)
            if r == 0:
                ax.set_title(f"head {k}", fontsize=10)
            if c == 0:
                ax.set_ylabel(f"layer {layer}", fontsize=10, fontweight="bold")
    bar = fig.colorbar(image, ax=axes, shrink=0.8)
    bar.set_label("attention weight (row = query, column = key)", fontsize=9)
    return fig


def model_view_figure(tokens, attentions, layers=None, heads=None):
    """bertviz's model view drawn by matplotlib: a grid of attention maps, rows = layers,
    columns = heads, each labelled with its layer, head and tokens, one colour scale 0..1 with
    its colour bar.

    tokens: n labels (the count is checked); attentions: (layers, heads, n, n). layers, heads:
    the indices to draw (None = all; a static picture of a few stays legible). Returns the
    Figure (the caller closes it).
    """
    A = _check_attentions(tokens, attentions)
    L, h = A.shape[:2]
    rows = list(range(L)) if layers is None else [check_layer_head(A, k)[0] for k in layers]
    cols = list(range(h)) if heads is None else [check_layer_head(A, 0, k)[1] for k in heads]
    fig = _model_view_grid(A, list(tokens), rows, cols)
    shown = "every layer and head" if (len(rows), len(cols)) == (L, h) else (
        f"{len(rows)} of {L} layers × {len(cols)} of {h} heads")
    fig.suptitle(f"model view: {shown}", fontsize=11)
    return fig


def _snapshot(draw, *args, **kwargs) -> bytes:

    fig = draw(*args, **kwargs)
    try:
        return _figure_png(fig)
    finally:
        plt.close(fig)


def head_view(tokens, attentions, layer: int | None = None, heads=None,
              sentence_b_start: int | None = None, decimals: int = 3):
    """bertviz's head view (one layer, the heads as coloured lines), rendering offline.

    tokens: n labels; attentions: (layers, heads, n, n), e.g. from ``attention_maps``.
    layer: the layer shown first (0-based); heads: the heads selected first (None = all).
    sentence_b_start: index of the second sentence's first token, for a pair.
    decimals: weights are rounded to this many digits in the page.
    Returns a :class:`BertvizView` (an ``IPython.display.HTML``); the last line of a cell shows
    it. The view carries
    a static snapshot (:func:`head_view_figure` of the layer shown first and the selected heads,
    or the first four when heads is None, as a PNG) that bertviz's
    drawing replaces (:func:`with_static_snapshot`), for viewers that run no scripts.
    """

    attention, tokens = _bertviz_input(tokens, attentions, decimals)
    if layer is not None:

        layer, _ = check_layer_head(np.asarray(attentions), layer)
    out = _head_view(attention, tokens, sentence_b_start=_check_sentence_b_start(tokens,
                     sentence_b_start), layer=layer, heads=heads, html_action="return")
    shown = 0 if layer is None else layer
    A = np.round(np.asarray(attentions, dtype=float), decimals)
    still = range(min(A.shape[1], 4)) if heads is None else heads  # 12 panels: unreadable
    png = _snapshot(head_view_figure, tokens, A, shown, still)
    alt = f"head view of layer {shown}: attention lines of each head"
    return BertvizView(offline_bertviz_html(with_static_snapshot(out.data, png, alt)), png, alt)


def model_view(tokens, attentions, sentence_b_start: int | None = None, decimals: int = 3,
               layers=None, heads=None):
    """bertviz's model view (a grid of every layer x head thumbnail), rendering offline.

    tokens: n labels; attentions: (layers, heads, n, n). layers, heads: the indices the static
    snapshot shows (:func:`model_view_figure`; None = all); the live view always shows every
    layer and head. Returns a :class:`BertvizView`, with the snapshot until bertviz has drawn.
    """

    attention, tokens = _bertviz_input(tokens, attentions, decimals)
    out = _model_view(attention, tokens, sentence_b_start=_check_sentence_b_start(tokens,
                      sentence_b_start), html_action="return")
    png = _snapshot(model_view_figure, tokens, np.round(np.asarray(attentions, dtype=float),
                    decimals), layers, heads)
    shown = "every layer and head" if layers is None and heads is None else "selected heads"
    alt = f"model view: the attention maps of {shown}"
    return BertvizView(offline_bertviz_html(with_static_snapshot(out.data, png, alt)), png, alt)
