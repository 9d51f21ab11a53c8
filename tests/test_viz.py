"""bertlib.pictures.viz: heatmaps, bars and lines draw with labels and check their input."""

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402
from PIL import Image  # noqa: E402

from bertlib.pictures import viz  # noqa: E402
from bertlib.pictures.viz import attention_heatmap, line_view, weight_bars  # noqa: E402

TOKENS = ["[CLS]", "the", "cat", "sat", "[SEP]"]



def test_heatmap_has_token_labels_and_shape_errors():
    ax = attention_heatmap(np.eye(5), TOKENS, title="t")
    assert [t.get_text() for t in ax.get_xticklabels()] == TOKENS
    with pytest.raises(ValueError, match=r"must have 2 dimensions \(n_q, n_k\)"):
        attention_heatmap(np.ones(5), TOKENS)
    with pytest.raises(ValueError, match=r"5 row labels for a matrix of shape \(4, 4\): give "
                                         "a list of word pieces, one per row"):
        attention_heatmap(np.eye(4), TOKENS)  # checks.labels, the one rule
    with pytest.raises(ValueError, match="4 column labels .* one per column"):
        attention_heatmap(np.ones((5, 5)), TOKENS, TOKENS[:4])


def test_heatmap_colour_bar_is_labelled_and_the_toy_prints_three_decimals():
    w = np.array([[0.625, 0.375], [0.5, 0.5]])
    ax = attention_heatmap(w, ["cat", "sat"])
    cbar = ax.figure.axes[-1]
    assert cbar.get_ylabel() == "attention weight"  # softmax rows: labelled by default
    assert "0.625" in [t.get_text() for t in ax.texts]  # as the toy's tables print it
    scores = attention_heatmap(np.array([[2.0, -1.0], [0.0, 3.0]]), ["a", "b"], vmin=-3, vmax=3)
    assert scores.figure.axes[-1].get_ylabel() == ""  # not softmax rows: no "attention weight"
    # the one rule's 1e-3 (checks.are_attention_weights): weights rounded for display still
    # read as weights, where numpy's allclose (1e-5) once dropped the label
    rounded = attention_heatmap(np.array([[0.3334, 0.6670], [0.5, 0.5]]), ["a", "b"])
    assert rounded.figure.axes[-1].get_ylabel() == "attention weight"
    named = attention_heatmap(w, ["cat", "sat"], cbar_label="prior")
    assert named.figure.axes[-1].get_ylabel() == "prior"
    assert viz.shown_decimals(6) == 3 and viz.shown_decimals(9) == 2
    with pytest.raises(ValueError, match="n must be"):
        viz.shown_decimals(-1)
    bars = weight_bars(np.array([0.625, 0.375]), ["sat", "mat"])
    assert "0.625" in [t.get_text() for t in bars.texts]


def test_weight_bars_checks_lengths():
    weight_bars(np.full(5, 0.2), TOKENS, highlight=2)
    with pytest.raises(ValueError, match="one weight per token"):
        weight_bars(np.ones(3), TOKENS)


def test_line_view_draws_one_line_per_pair_with_alpha_equal_to_weight(attentions):
    W = attentions[0, 0]
    ax = line_view(W, TOKENS, title="lines")
    (lines,) = ax.collections
    assert len(lines.get_segments()) == 25
    assert np.allclose(lines.get_colors()[:, 3], W.ravel())
    labels = [t.get_text() for t in ax.texts]
    assert labels.count("cat") == 2  # once per column
    assert ax.get_title() == "lines"


def test_line_view_single_query(attentions):
    ax = line_view(attentions[0, 0], TOKENS, query=2)
    (lines,) = ax.collections
    assert len(lines.get_segments()) == 5
    assert all(seg[0][1] == 2 for seg in lines.get_segments())


@pytest.mark.parametrize("kwargs, match", [
    ({"weights": np.ones((4, 4)) / 4}, r"shape \(n, n\) = \(5, 5\)"),
    ({"weights": np.full((5, 5), np.nan)}, "finite"),
    ({"weights": np.full((5, 5), 2.0)}, r"weights must be attention weights in \[0, 1\] \(within 0.001\); entries run from 2 to 2"),
    ({"weights": np.eye(5), "query": 5}, r"query must be a whole number in 0\.\.4 \(a token index"),
])
def test_line_view_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        line_view(tokens=TOKENS, **kwargs)


def test_line_segments_skip_faint_lines_and_keep_alpha():
    W = np.array([[0.5, 0.005, 0.495], [0.2, 0.3, 0.5], [1.0, 0.0, 0.0]])
    segments, colors = viz.line_segments(W, min_weight=0.01)
    assert segments.shape == (6, 2, 2) and colors.shape == (6, 4)
    assert np.allclose(colors[:, 3], [0.5, 0.495, 0.2, 0.3, 0.5, 1.0])
    assert np.allclose(segments[0], [[0, 0], [1, 0]]) and np.allclose(segments[1], [[0, 0], [1, 2]])
    only_second, _ = viz.line_segments(W, query=1)
    assert (only_second[:, 0, 1] == 1).all() and len(only_second) == 3


def test_line_view_labels_every_kth_token_when_long():
    n = 100
    ax = line_view(np.full((n, n), 1 / n), [f"t{i}" for i in range(n)], max_labels=25,
                   min_weight=0.02)
    assert len(ax.texts) == 2 * 25
    assert len(ax.collections[0].get_segments()) == 0  # every weight is below min_weight


def test_attention_weights_is_the_one_check_of_an_n_by_n_map():
    W = viz.check_attention_weights(np.eye(5), TOKENS)
    assert W.dtype == np.float64 and W.shape == (5, 5)
    for bad, match in [(np.eye(4), r"must have shape \(n, n\) = \(5, 5\) for 5 tokens"),
                       (np.full((5, 5), 1.5), r"in \[0, 1\].*from 1.5 to 1.5"),
                       (np.full((5, 5), np.inf), "finite")]:
        with pytest.raises(ValueError, match=match):
            viz.check_attention_weights(bad, TOKENS)
    with pytest.raises(ValueError, match="the number of tokens n must be a whole number >= 1, got 0"):
        viz.check_attention_weights(np.zeros((0, 0)), [])
    with pytest.raises(TypeError, match="array of numbers"):
        viz.check_attention_weights("weights", TOKENS)


def test_route_arcs_draws_one_labelled_arc_per_link_and_names_bad_positions():
    tokens = ["[CLS]", "the", "key", "near", "the", "cabinets", "[MASK]", "[SEP]"]
    ax = viz.route_arcs(tokens, [(3, 2, 0.9, "L0H1"), (6, 3, 0.4, "L1H0")], title="one")
    labels = [t.get_text() for t in ax.texts]
    assert tokens == labels[:len(tokens)] and "L0H1 0.90" in labels and "L1H0 0.40" in labels
    widths = [line.get_linewidth() for line in ax.lines]
    assert len(widths) == 2 and widths[0] > widths[1]  # the stronger link is drawn thicker
    with pytest.raises(ValueError, match=r"key must be a whole number in 0..7"):
        viz.route_arcs(tokens, [(3, 9, 0.5, "L0H1")])
    with pytest.raises(ValueError, match=r"weight must be a number in \[0, 1\]"):
        viz.route_arcs(tokens, [(3, 2, 1.5, "L0H1")])
    ax = viz.route_arcs(tokens, [(3, 2, 0.9, "L0H1")], costs=[0.3], min_cost=0.5, measure="flips")
    assert any("L0H1 (flips 0.30 < 0.5)" in t.get_text() for t in ax.texts)  # named, not drawn


def test_route_arcs_colours_by_layer_and_says_where_each_layer_is_drawn():
    tokens = ["[CLS]", "the", "key", "near", "the", "cabinets", "[MASK]", "[SEP]"]
    one = viz.route_arcs(tokens, [(6, 3, 0.4, "L1H0"), (3, 2, 0.9, "L0H1 0.7 / L0H2")], title="a")
    two = viz.route_arcs(tokens, [(6, 2, 0.8, "L0H3")])  # another panel: layer 0 alone
    colour = {line.get_linewidth(): to_rgba(line.get_color()) for line in one.lines}
    assert colour[0.8 + 5 * 0.9] == to_rgba(two.lines[0].get_color()) == to_rgba("tab:blue")
    assert colour[0.8 + 5 * 0.4] == to_rgba("tab:orange")
    assert one.get_title() == ("a\narcs of layer 0: above the words (blue); layer 1: below the "
                               "words (orange)")
    assert two.get_title() == "arcs of layer 0: above the words (blue)"
    above = [line for line in one.lines if to_rgba(line.get_color()) == to_rgba("tab:blue")]
    assert min(above[0].get_ydata()) >= 0 > max(one.lines[0].get_ydata())  # layer 1 below
    bottom, top = one.get_ylim()  # room for the labels above the highest arc, below the lowest
    labels = [t for t in one.texts if t.get_text().startswith("L")]
    assert all(bottom + 0.3 < t.get_position()[1] < top - 0.3 for t in labels)


def test_route_arcs_leaves_out_an_arc_whose_head_costs_too_little():
    tokens = ["[CLS]", "the", "key", "near", "the", "cabinets", "[MASK]", "[SEP]"]
    ax = viz.route_arcs(tokens, [(3, 2, 0.9, "L0H1"), (6, 3, 0.4, "L1H0")], costs=[0.05, 0.4],
                        min_cost=0.2)
    labels = [t.get_text() for t in ax.texts]
    assert len(ax.lines) == 1 and "L1H0 0.40" in labels and "L0H1 0.90" not in labels
    assert "not drawn: L0H1 (costs 0.05 < 0.2)" in labels
    with pytest.raises(ValueError, match="number of costs"):
        viz.route_arcs(tokens, [(3, 2, 0.9, "L0H1")], costs=[0.1, 0.2])


def test_figure_png_crops_to_what_is_drawn_unless_the_figure_is_laid_out_to_fit():
    fig, ax = plt.subplots(figsize=(4, 3), dpi=50)
    ax.set_position([0.4, 0.4, 0.2, 0.2])  # a small axes in the middle: white all around it
    whole = Image.open(io.BytesIO(viz.figure_png(fig, crop=False))).size
    cropped = Image.open(io.BytesIO(viz.figure_png(fig))).size
    assert whole == (200, 150)  # figsize × dpi: the whole figure
    assert cropped[0] < 150 and cropped[1] < 110  # the axes, its ticks and a small margin
