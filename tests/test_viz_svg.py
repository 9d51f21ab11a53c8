"""bertlib.pictures.viz's browser-drawn attention views: heatmap_png, attention_svg, lines_svg."""

import io
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from matplotlib import colormaps
from PIL import Image

from bertlib.pictures.widgets.render import attention_svg, heatmap_png, lines_svg

SVG = "{http://www.w3.org/2000/svg}"


def random_attention(n, seed=0):
    scores = np.random.default_rng(seed).normal(size=(n, n)) * 3
    e = np.exp(scores - scores.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def texts(svg):
    return [t.text for t in ET.fromstring(svg).iter(f"{SVG}text")]


def test_heatmap_png_pixels_are_the_colormap_of_the_weights():
    W = random_attention(5)[:3]  # 3 queries x 5 keys
    pixels = np.asarray(Image.open(io.BytesIO(heatmap_png(W))).convert("RGB"))
    assert pixels.shape == (3, 5, 3)
    expected = colormaps["Blues"](W)[..., :3] * 255  # matplotlib's own mapping, no table
    assert np.abs(pixels - expected).max() <= 3  # 256 levels: at most a level's step apart


def test_heatmap_png_rejects_bad_input():
    with pytest.raises(ValueError, match="finite"):
        heatmap_png(np.array([[np.nan, 1.0]]))
    with pytest.raises(ValueError, match="must have 2 dimensions"):
        heatmap_png(np.ones(3))
    with pytest.raises(ValueError, match=r"vmax must be a number > 1.0 \(greater than vmin\)"):
        heatmap_png(np.ones((2, 2)), vmin=1.0, vmax=1.0)


def test_attention_svg_is_valid_svg_with_title_labels_and_legend():
    tokens = ["[CLS]", "a", "<b>", "&", "[SEP]"]
    svg = attention_svg(random_attention(5), tokens, title="layer 1, head 2")
    words = texts(svg)  # parsing also proves the labels are escaped
    assert words[0] == "layer 1, head 2"
    for token in tokens:
        assert words.count(token) == 2  # a row label and a column label
    assert {"query (attending)", "key (attended to)", "0", "0.5", "1"} <= set(words)
    images = list(ET.fromstring(svg).iter(f"{SVG}image"))
    assert len(images) == 1 and images[0].get("href").startswith("data:image/png;base64,")


def test_attention_svg_thins_labels_of_long_inputs():
    tokens = [f"t{i}" for i in range(100)]
    words = texts(attention_svg(random_attention(100), tokens, max_labels=48))
    shown = [w for w in words if w and w.startswith("t")]
    assert shown == [t for t in tokens[::3] for _ in range(2)]  # every 3rd: ceil(100 / 48)


def test_lines_svg_draws_one_line_per_weight_above_the_minimum_with_its_opacity():
    W = random_attention(6)
    svg = lines_svg(W, [f"w{i}" for i in range(6)], min_weight=0.05)
    lines = list(ET.fromstring(svg).iter(f"{SVG}line"))
    assert len(lines) == (W >= 0.05).sum()
    opacities = sorted(float(line.get("stroke-opacity")) for line in lines)
    assert np.allclose(opacities, np.sort(W[W >= 0.05]), atol=5e-4)
    assert texts(svg).count("w3") == 2  # query and key column


def test_lines_svg_keeps_each_querys_top_k_keys():
    W = random_attention(10, seed=1)
    svg = lines_svg(W, [str(i) for i in range(10)], top_k=2)
    lines = list(ET.fromstring(svg).iter(f"{SVG}line"))
    assert len(lines) == 20
    opacities = sorted(float(line.get("stroke-opacity")) for line in lines)
    assert np.allclose(opacities, np.sort(np.sort(W, axis=1)[:, -2:].ravel()), atol=5e-4)


@pytest.mark.parametrize("draw", [attention_svg, lines_svg])
def test_svg_views_reject_bad_weights(draw):
    with pytest.raises(ValueError, match=r"must have shape \(n, n\) = \(3, 3\) for 3 tokens"):
        draw(np.eye(2), ["a", "b", "c"])
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        draw(np.full((2, 2), 2.0), ["a", "b"])
    with pytest.raises(ValueError, match="finite"):
        draw(np.full((2, 2), np.nan), ["a", "b"])


def test_lines_svg_rejects_a_bad_top_k():
    with pytest.raises(ValueError, match="top_k must be a whole number >= 1"):
        lines_svg(np.eye(2), ["a", "b"], top_k=0)
