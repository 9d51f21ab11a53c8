"""The explorers' drawings made without a matplotlib figure: an attention heatmap and
token-to-token lines as SVG strings, a matrix as a PNG with one pixel per entry.

Building a string is far cheaper than rendering a figure to PNG, so a widget can redraw in a few
milliseconds. Token labels are real (escaped) text in the page."""

from __future__ import annotations

import base64
import functools
import html
import io

import numpy as np
from matplotlib import colormaps
from PIL import Image

from bertlib.checks import as_array, number, whole
from bertlib.pictures.viz import check_attention_weights

__all__ = ["heatmap_png", "attention_svg", "lines_svg"]

_SVG_TOP, _SVG_GAP = 26, 4  # room for the title; gap between labels and the drawing


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

    return np.round(colormaps[cmap](np.linspace(0, 1, 256))[:, :3] * 255).astype(np.uint8)


def heatmap_png(weights, cmap: str = "Blues", vmin: float = 0.0, vmax: float = 1.0) -> bytes:
    """PNG bytes of a matrix (n_q, n_k), one pixel per entry (n_k wide, n_q high).

    Pixel (i, j) = table[round(255 · clip((A[i, j] − vmin) / (vmax − vmin), 0, 1))], the colormap
    sampled at 256 levels; made with numpy and PIL directly (no matplotlib figure).
    """
    A = as_array(weights, "weights", ndim=2, layout="(n_q, n_k)")
    number(vmax, "vmax", vmin, open_low=True, why="(greater than vmin)")
    level = np.round(np.clip((A - vmin) / (vmax - vmin), 0, 1) * 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(_colour_table(cmap)[level], "RGB").save(buffer, format="PNG",
                                                             compress_level=1)
    return buffer.getvalue()


def attention_svg(weights, tokens, title: str = "", max_labels: int = 48,
                  cmap: str = "Blues") -> str:
    """An attention heatmap as an SVG string: rows = queries, columns = keys, token labels as
    SVG text (escaped), one colour scale 0..1 with a small legend, and ``title`` on top.

    weights: (n, n) attention weights, entries in [0, 1]; tokens: n labels. Above ``max_labels``
    tokens only every k-th label is written (k = ⌈n / max_labels⌉). The cells are a PNG from
    :func:`heatmap_png`, scaled by the browser without smoothing.
    """
    A = check_attention_weights(weights, tokens)
    n = len(tokens)
    side, step, font = _svg_layout(n, max_labels)
    cell = side / n
    shown = range(0, n, step)
    margin = _label_width([tokens[i] for i in shown], font)
    left, top = margin + 16, _SVG_TOP
    width, height = left + side + 60, top + side + margin + 18
    png = base64.b64encode(heatmap_png(A, cmap)).decode("ascii")
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
    one line per pair (i → j) with opacity A[i, j]; labels as SVG text (escaped).

    weights: (n, n), rows = queries, attention weights; tokens: n labels. Lines below
    ``min_weight`` are left out; with ``top_k`` only each query's top_k largest weights are drawn
    (so a long input stays a small page). Above ``max_labels`` tokens only every k-th label.
    """
    A = check_attention_weights(weights, tokens)
    n = len(tokens)
    if top_k is not None:
        whole(top_k, "top_k", low=1, why="(or None)")
    side, step, font = _svg_layout(n, max_labels)
    row = side / n
    drawn = A >= min_weight
    if top_k is not None and top_k < n:
        top = np.zeros_like(drawn)
        np.put_along_axis(top, np.argpartition(-A, top_k - 1, axis=1)[:, :top_k], True, axis=1)
        drawn &= top
    i, j = np.nonzero(drawn)
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
              f'stroke-opacity="{weight:.3f}"/>'
              for a, b, weight in zip(i.tolist(), j.tolist(), A[i, j].tolist(), strict=True)]
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
