"""Plots shared by the notebooks: attention heatmaps, weight bars, token-to-token lines, and
bertviz's interactive head and model views made to render with no internet."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np

__all__ = [
    "attention_heatmap",
    "weight_bars",
    "line_view",
    "line_segments",
    "offline_bertviz_html",
    "head_view",
    "model_view",
    "head_view_figure",
    "model_view_figure",
    "with_static_snapshot",
    "figure_png",
    "small_png",
]


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


def line_segments(weights, query: int | None = None, min_weight: float = 0.0,
                  color: str = "tab:blue") -> tuple[np.ndarray, np.ndarray]:
    """The lines of :func:`line_view`: (segments (m, 2, 2), RGBA colours (m, 4)).

    weights: (n, n), rows = queries. Line (i → j) runs from (0, i) to (1, j) with alpha = W[i, j];
    only query ``query``'s row if given, and only weights >= ``min_weight`` (m lines in all).
    """
    from matplotlib.colors import to_rgba

    W = np.asarray(weights, dtype=float)
    keep = W >= min_weight
    if query is not None:
        keep &= (np.arange(W.shape[0]) == query)[:, None]
    i, j = np.nonzero(keep)
    segments = np.stack([np.stack([np.zeros(len(i)), i], -1),
                         np.stack([np.ones(len(j)), j], -1)], axis=1)
    colors = np.tile(np.array(to_rgba(color)), (len(i), 1))
    colors[:, 3] = np.clip(W[i, j], 0, 1)
    return segments, colors


def line_view(weights, tokens, ax=None, title: str = "", query: int | None = None,
              color: str = "tab:blue", min_weight: float = 0.0, max_labels: int = 48):
    """Token-to-token lines: queries in a left column, keys in a right column, one line per pair
    with opacity (alpha) equal to its attention weight; returns the matplotlib Axes.

    weights: (n, n) with rows = queries, columns = keys, entries in [0, 1]; tokens: n labels.
    query: draw only that query's row (an index 0..n−1, its label in bold); None = every row.
    min_weight: leave out lines below this weight (they are nearly invisible; faster for long
    inputs). max_labels: above this many tokens, label only every k-th one.
    """
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection

    W = np.asarray(weights, dtype=float)
    n = len(tokens)
    if W.ndim != 2 or W.shape != (n, n):
        raise ValueError(f"weights must be ({n}, {n}) for {n} tokens, got shape {W.shape}")
    if not np.isfinite(W).all() or W.min() < 0 or W.max() > 1 + 1e-6:
        raise ValueError("weights must be finite and in [0, 1] (attention weights)")
    if query is not None and (isinstance(query, bool) or not isinstance(query, int | np.integer)
                              or not 0 <= query < n):
        raise ValueError(f"query must be a token index in 0..{n - 1} or None, got {query!r}")
    if ax is None:
        _, ax = plt.subplots(figsize=(4.2, max(2.5, 0.28 * n + 0.8)))
    segments, colors = line_segments(W, query, min_weight, color)
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
    import importlib.util

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


def _bertviz_input(tokens, attentions, decimals: int):
    import torch

    A = np.asarray(attentions, dtype=np.float64)
    if A.ndim != 4 or A.shape[2] != A.shape[3]:
        raise ValueError(f"attentions must have shape (layers, heads, n, n), got {A.shape}")
    if len(tokens) != A.shape[2]:
        raise ValueError(f"{len(tokens)} tokens for attention over n = {A.shape[2]} positions")
    if not np.isfinite(A).all():
        raise ValueError("attentions contain NaN or inf")
    A = np.round(A, decimals)  # smaller HTML; the view cannot show more digits anyway
    return [torch.from_numpy(A[l][None]) for l in range(A.shape[0])], list(tokens)


def _sentence_b_start(tokens, sentence_b_start):
    if sentence_b_start is None:
        return None
    if not 0 < sentence_b_start < len(tokens):
        raise ValueError(f"sentence_b_start must be in 1..{len(tokens) - 1}, "
                         f"got {sentence_b_start}")
    return int(sentence_b_start)


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


#: Colours kept in a static picture's PNG palette (an adaptive palette: small files, clean text).
PNG_COLOURS = 128


def figure_png(fig, dpi: float | None = None) -> bytes:
    """PNG bytes of a matplotlib figure (tight bounding box, white background)."""
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi or fig.dpi, bbox_inches="tight",
                facecolor="white")
    return buffer.getvalue()


def small_png(png: bytes, colours: int = PNG_COLOURS) -> bytes:
    """The PNG re-encoded with an adaptive palette of ``colours`` colours (no dithering, so the
    same input always gives the same bytes) and maximal zlib compression."""
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    palette = image.quantize(colors=colours, method=Image.Quantize.MEDIANCUT,
                             dither=Image.Dither.NONE)
    buffer = io.BytesIO()
    palette.save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


def _figure_png(fig) -> bytes:
    return small_png(figure_png(fig))


def with_static_snapshot(html: str, png: bytes, alt: str) -> str:
    """bertviz's HTML with ``png`` shown inside its view until bertviz has drawn.

    The PNG goes in an ``<img class="bertlib-static">`` after the view's drawing area, bertviz's
    (still empty) controls are hidden, and a script appended at the end removes the image and
    shows the controls once the view holds an SVG. Raises RuntimeError if bertviz's HTML no
    longer has the expected shape.
    """
    import base64
    import html as html_lib

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


def _head_colours(h: int) -> list:
    import matplotlib.pyplot as plt

    cmap = plt.get_cmap("tab10" if h <= 10 else "tab20")
    return [cmap(k % cmap.N) for k in range(h)]


def head_view_figure(tokens, attentions, layer: int = 0, heads=None, min_weight: float = 0.05):
    """bertviz's head view drawn by matplotlib: one layer, every selected head's
    token-to-token lines in its own colour (opacity = weight), queries left, keys right.

    tokens: n labels; attentions: (layers, heads, n, n); heads: indices (None = all). Lines
    under ``min_weight`` are left out. Returns the Figure (the caller closes it).
    """
    import matplotlib.pyplot as plt

    A = np.asarray(attentions, dtype=float)
    h, n = A.shape[1], A.shape[2]
    chosen = list(range(h)) if heads is None else [int(k) for k in heads]
    colours = _head_colours(h)
    from matplotlib.collections import LineCollection

    fig, ax = plt.subplots(figsize=(4.6, max(2.5, 0.28 * n + 1.2)), dpi=80)
    line_view(A[layer, chosen[0]], tokens, ax=ax, color=colours[chosen[0]],
              min_weight=min_weight)  # the labels, axes and the first head's lines
    for k in chosen[1:]:
        segments, rgba = line_segments(A[layer, k], None, min_weight, colours[k])
        ax.add_collection(LineCollection(segments, colors=rgba, linewidths=2.0))
    ax.set_title(f"layer {layer}: {len(chosen)} heads, one colour each", fontsize=10)
    handles = [plt.Line2D([], [], color=colours[k], lw=3) for k in chosen]
    ax.legend(handles, [str(k) for k in chosen], title="head", fontsize=7, title_fontsize=8,
              ncols=min(len(chosen), 6), loc="upper center", bbox_to_anchor=(0.5, -0.08),
              frameon=False)
    return fig


def model_view_figure(tokens, attentions):
    """bertviz's model view drawn by matplotlib: a grid of every layer x head attention map
    (rows = layers, columns = heads), one colour scale 0..1.

    tokens: n labels (the count is checked); attentions: (layers, heads, n, n). Returns the
    Figure (the caller closes it).
    """
    import matplotlib.pyplot as plt

    A = np.asarray(attentions, dtype=float)
    L, h, n = A.shape[:3]
    if len(tokens) != n:
        raise ValueError(f"{len(tokens)} tokens for attention over n = {n} positions")
    gap = max(1, n // 6)
    step = n + gap
    mosaic = np.full((L * step - gap, h * step - gap), np.nan)
    for layer in range(L):
        for k in range(h):
            mosaic[layer * step:layer * step + n, k * step:k * step + n] = A[layer, k]
    cmap = plt.get_cmap("Blues").copy()
    cmap.set_bad("white")
    fig, ax = plt.subplots(figsize=(min(1.0 + 0.75 * h, 12), min(0.8 + 0.75 * L, 12)), dpi=72)
    ax.imshow(mosaic, cmap=cmap, vmin=0, vmax=1, interpolation="nearest")
    ax.set_xticks(np.arange(h) * step + (n - 1) / 2, [str(k) for k in range(h)], fontsize=8)
    ax.set_yticks(np.arange(L) * step + (n - 1) / 2, [str(k) for k in range(L)], fontsize=8)
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_title(f"every layer and head ({n} tokens; rows = queries)", fontsize=10)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.tick_params(length=0)
    return fig


def _snapshot(draw, *args, **kwargs) -> bytes:
    import matplotlib.pyplot as plt

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
    Returns an ``IPython.display.HTML``; the last line of a cell displays it. The view carries
    a static snapshot (:func:`head_view_figure` of the layer shown first, as a PNG) that bertviz's
    drawing replaces (:func:`with_static_snapshot`), for viewers that run no scripts.
    """
    from bertviz import head_view as _head_view
    from IPython.display import HTML

    attention, tokens = _bertviz_input(tokens, attentions, decimals)
    if layer is not None:
        from bertlib.models import check_layer_head

        layer, _ = check_layer_head(np.asarray(attentions), layer)
    out = _head_view(attention, tokens, sentence_b_start=_sentence_b_start(tokens,
                     sentence_b_start), layer=layer, heads=heads, html_action="return")
    shown = 0 if layer is None else layer
    png = _snapshot(head_view_figure, tokens, np.round(np.asarray(attentions, dtype=float),
                    decimals), shown, heads)
    alt = f"head view of layer {shown}: attention lines of each head"
    return HTML(offline_bertviz_html(with_static_snapshot(out.data, png, alt)))


def model_view(tokens, attentions, sentence_b_start: int | None = None, decimals: int = 3):
    """bertviz's model view (a grid of every layer x head thumbnail), rendering offline.

    tokens: n labels; attentions: (layers, heads, n, n). Returns an ``IPython.display.HTML``,
    with a static snapshot (:func:`model_view_figure`) until bertviz has drawn.
    """
    from bertviz import model_view as _model_view
    from IPython.display import HTML

    attention, tokens = _bertviz_input(tokens, attentions, decimals)
    out = _model_view(attention, tokens, sentence_b_start=_sentence_b_start(tokens,
                      sentence_b_start), html_action="return")
    png = _snapshot(model_view_figure, tokens, np.round(np.asarray(attentions, dtype=float),
                    decimals))
    alt = "model view: the attention map of every layer and head"
    return HTML(offline_bertviz_html(with_static_snapshot(out.data, png, alt)))


# --- attention drawn by the browser: SVG strings, no matplotlib figure -------------------------
# Building a string is far cheaper than rendering a figure to PNG, so a widget can redraw in a
# few milliseconds. Token labels are real (escaped) text in the page.
_SVG_TOP, _SVG_GAP = 26, 4  # room for the title; gap between labels and the drawing


def _svg_weights(weights, tokens) -> np.ndarray:
    """weights as a float (n, n) array, checked against the n tokens (finite, in [0, 1])."""
    W = np.asarray(weights, dtype=float)
    n = len(tokens)
    if W.ndim != 2 or W.shape != (n, n):
        raise ValueError(f"weights must be ({n}, {n}) for {n} tokens, got shape {W.shape}")
    if n == 0:
        raise ValueError("weights must have at least one token, got 0")
    if not np.isfinite(W).all() or W.min() < 0 or W.max() > 1 + 1e-6:
        raise ValueError("weights must be finite and in [0, 1] (attention weights)")
    return W


def _svg_layout(n: int, max_labels: int) -> tuple[float, int, float]:
    """(side of the n x n drawing in px, label every step-th token, font size in px)."""
    side = float(min(480, max(160, 22 * n)))
    step = int(np.ceil(n / max_labels)) if n > max_labels else 1
    font = float(np.clip(0.8 * side / n * step, 7, 12))
    return side, step, font


def _label_width(labels: list[str], font: float) -> float:
    return max((len(t) for t in labels), default=1) * 0.62 * font + _SVG_GAP + 2


@functools.cache
def _colour_table(cmap: str) -> np.ndarray:
    """(256, 3) uint8 RGB lookup table of a matplotlib colormap (no figure is made)."""
    from matplotlib import colormaps

    return np.round(colormaps[cmap](np.linspace(0, 1, 256))[:, :3] * 255).astype(np.uint8)


def heatmap_png(weights, cmap: str = "Blues", vmin: float = 0.0, vmax: float = 1.0) -> bytes:
    """PNG bytes of a matrix (n_q, n_k), one pixel per entry (n_k wide, n_q high).

    Pixel (i, j) = table[round(255 · clip((W[i, j] − vmin) / (vmax − vmin), 0, 1))], the colormap
    sampled at 256 levels; made with numpy and PIL directly (no matplotlib figure).
    """
    import io

    from PIL import Image

    W = np.asarray(weights, dtype=float)
    if W.ndim != 2 or W.size == 0 or not np.isfinite(W).all():
        raise ValueError(f"weights must be a finite, non-empty 2-D matrix, got shape {W.shape}")
    if not vmax > vmin:
        raise ValueError(f"vmax must be greater than vmin, got vmin={vmin}, vmax={vmax}")
    level = np.round(np.clip((W - vmin) / (vmax - vmin), 0, 1) * 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(_colour_table(cmap)[level], "RGB").save(buffer, format="PNG",
                                                             compress_level=1)
    return buffer.getvalue()


def attention_svg(weights, tokens, title: str = "", max_labels: int = 48,
                  cmap: str = "Blues") -> str:
    """An attention heatmap as an SVG string: rows = queries, columns = keys, token labels as
    SVG text (escaped), one colour scale 0..1 with a small legend, and ``title`` on top.

    weights: (n, n), entries in [0, 1]; tokens: n labels. Above ``max_labels`` tokens only every
    k-th label is written (k = ⌈n / max_labels⌉). The cells are a PNG from :func:`heatmap_png`,
    scaled by the browser without smoothing.
    """
    import base64
    import html

    W = _svg_weights(weights, tokens)
    n = len(tokens)
    side, step, font = _svg_layout(n, max_labels)
    cell = side / n
    shown = range(0, n, step)
    margin = _label_width([tokens[i] for i in shown], font)
    left, top = margin + 16, _SVG_TOP
    width, height = left + side + 60, top + side + margin + 18
    png = base64.b64encode(heatmap_png(W, cmap)).decode("ascii")
    table = _colour_table(cmap)
    stops = "".join(f'<stop offset="{k / 10:.1f}" stop-color="rgb{tuple(int(c) for c in rgb)}"/>'
                    for k, rgb in enumerate(table[np.linspace(255, 0, 11).astype(int)]))
    legend_x = left + side + 12
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'style="font-family:sans-serif" role="img">',
        f'<text x="{left + side / 2:.1f}" y="16" text-anchor="middle" font-size="13" '
        f'class="view-title">{html.escape(title)}</text>',
        f'<image x="{left:.1f}" y="{top}" width="{side:.1f}" height="{side:.1f}" '
        f'preserveAspectRatio="none" style="image-rendering:pixelated" '
        f'href="data:image/png;base64,{png}"/>',
        f'<g font-size="{font:.1f}" dominant-baseline="central">',
    ]
    for i in shown:
        label, mid = html.escape(tokens[i]), i * cell + cell / 2
        parts.append(f'<text x="{left - _SVG_GAP:.1f}" y="{top + mid:.1f}" '
                     f'text-anchor="end">{label}</text>')
        parts.append(f'<text transform="translate({left + mid:.1f},{top + side + _SVG_GAP:.1f}) '
                     f'rotate(-90)" text-anchor="end">{label}</text>')
    parts += [
        "</g>",
        f'<text transform="translate(10,{top + side / 2:.1f}) rotate(-90)" text-anchor="middle" '
        f'font-size="11">query (attending)</text>',
        f'<text x="{left + side / 2:.1f}" y="{height - 4:.0f}" text-anchor="middle" '
        f'font-size="11">key (attended to)</text>',
        f'<defs><linearGradient id="attention-scale" x1="0" y1="0" x2="0" y2="1">{stops}'
        "</linearGradient></defs>",
        f'<rect x="{legend_x:.1f}" y="{top}" width="12" height="{min(side, 160):.1f}" '
        'fill="url(#attention-scale)" stroke="#888" stroke-width="0.5"/>',
    ]
    for value, y in ((1, top), (0.5, top + min(side, 160) / 2), (0, top + min(side, 160))):
        parts.append(f'<text x="{legend_x + 16:.1f}" y="{y:.1f}" font-size="10" '
                     f'dominant-baseline="central">{value}</text>')
    parts.append("</svg>")
    return "".join(parts)


def lines_svg(weights, tokens, title: str = "", min_weight: float = 0.0,
              top_k: int | None = None, max_labels: int = 48, color: str = "#1f77b4") -> str:
    """Token-to-token lines as an SVG string: queries in a left column, keys in a right column,
    one line per pair (i → j) with opacity W[i, j]; labels as SVG text (escaped).

    weights: (n, n), rows = queries, entries in [0, 1]; tokens: n labels. Lines below
    ``min_weight`` are left out; with ``top_k`` only each query's top_k largest weights are drawn
    (so a long input stays a small page). Above ``max_labels`` tokens only every k-th label.
    """
    import html

    W = _svg_weights(weights, tokens)
    n = len(tokens)
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int | np.integer)
                              or top_k < 1):
        raise ValueError(f"top_k must be a whole number >= 1 or None, got {top_k!r}")
    side, step, font = _svg_layout(n, max_labels)
    row = side / n
    keep = W >= min_weight
    if top_k is not None and top_k < n:
        top = np.zeros_like(keep)
        np.put_along_axis(top, np.argpartition(-W, top_k - 1, axis=1)[:, :top_k], True, axis=1)
        keep &= top
    i, j = np.nonzero(keep)
    labels = [tokens[k] for k in range(0, n, step)]
    x0 = _label_width(labels, font)
    x1 = x0 + 150
    y = _SVG_TOP + (np.arange(n) + 0.5) * row
    stroke = float(np.clip(0.8 * row, 0.6, 2.0))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{x1 + x0:.0f}" '
        f'height="{_SVG_TOP + side + 22:.0f}" style="font-family:sans-serif" role="img">',
        f'<text x="{(x0 + x1) / 2:.1f}" y="16" text-anchor="middle" font-size="13">'
        f"{html.escape(title)}</text>",
        f'<g stroke="{html.escape(color)}" stroke-width="{stroke:.1f}">',
    ]
    ys = [f"{v:.1f}" for v in y]
    parts += [f'<line x1="{x0:.1f}" y1="{ys[a]}" x2="{x1:.1f}" y2="{ys[b]}" '
              f'stroke-opacity="{w:.3f}"/>'
              for a, b, w in zip(i.tolist(), j.tolist(), W[i, j].tolist(), strict=True)]
    parts.append(f'</g><g font-size="{font:.1f}" dominant-baseline="central">')
    for k in range(0, n, step):
        label = html.escape(tokens[k])
        parts.append(f'<text x="{x0 - _SVG_GAP:.1f}" y="{y[k]:.1f}" text-anchor="end">'
                     f"{label}</text>")
        parts.append(f'<text x="{x1 + _SVG_GAP:.1f}" y="{y[k]:.1f}">{label}</text>')
    bottom = _SVG_TOP + side + 16
    parts += ["</g>",
              f'<text x="{x0:.1f}" y="{bottom:.1f}" text-anchor="middle" font-size="11">'
              "query</text>",
              f'<text x="{x1:.1f}" y="{bottom:.1f}" text-anchor="middle" font-size="11">'
              "key</text>",
              "</svg>"]
    return "".join(parts)
