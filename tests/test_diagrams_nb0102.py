"""bertlib.pictures.diagrams, notebooks 01 and 02: the pictures draw and carry their labels and shapes."""

import inspect

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from bertlib.pictures import diagrams  # noqa: E402


def texts(fig):
    return " ".join(t.get_text() for ax in fig.axes for t in ax.texts)


def test_all_lists_every_public_picture_and_helper():
    """__all__ is the module's whole public face: every public function defined here (the
    pictures and the drawing helpers) and COLOURS, nothing imported from elsewhere."""
    defined = {name for name, obj in vars(diagrams).items()
               if inspect.isfunction(obj) and obj.__module__ == diagrams.__name__
               and not name.startswith("_")}
    assert set(diagrams.__all__) == defined | {"COLOURS"}, (
        f"add {sorted(defined - set(diagrams.__all__))}, "
        f"remove {sorted(set(diagrams.__all__) - defined - {'COLOURS'})}")
    assert len(diagrams.__all__) == len(set(diagrams.__all__))
    assert {"encoder_layer_picture", "multi_head_flow", "rnn_vs_attention"} <= defined


def test_rnn_vs_attention_labels_words_states_and_step_counts():
    fig = diagrams.rnn_vs_attention(["the", "river", "bank"], target=2)
    words = texts(fig)
    assert all(w in words for w in ("river", "s0", "s2", "2 steps", "1 step", "new bank"))
    plt.close(fig)
    with pytest.raises(ValueError, match="target"):
        diagrams.rnn_vs_attention(["a", "b"], target=5)


def test_qkv_scores_flow_shows_every_shape():
    fig = diagrams.qkv_scores_flow(6, 4, 2)
    words = texts(fig)
    for label in ("X\n(6, 4)", "Q = X W_Q\n(6, 2)", "W_K (4, 2)", "S = Q Kᵀ\n(6, 6)",
                  "softmax(S / √d_k)", "Z = A V\n(6, 2)"):
        assert label in words
    plt.close(fig)
    with pytest.raises(ValueError, match="d_k"):
        diagrams.qkv_scores_flow(6, 4, 0)


def test_hatch_masked_covers_exactly_the_masked_cells():
    fig, ax = plt.subplots()
    ax.imshow(np.ones((3, 3)))
    assert diagrams.hatch_masked(ax, np.tril(np.ones((3, 3), bool))) == 3
    assert sum(p.get_hatch() == "///" for p in ax.patches) == 3
    plt.close(fig)
    with pytest.raises(TypeError, match="mask must be boolean"):  # checks.bool_mask
        diagrams.hatch_masked(ax, np.ones((3, 3)))
    with pytest.raises(ValueError, match=r"mask must have shape \(n_q, n_k\)"):
        diagrams.hatch_masked(ax, np.ones(3, bool))


def test_hatch_masked_legend_sits_right_above_the_cells():
    fig, ax = plt.subplots()
    ax.imshow(np.ones((3, 3)))
    diagrams.hatch_masked(ax, np.tril(np.ones((3, 3), bool)))
    anchor = ax.get_legend().get_bbox_to_anchor().transformed(ax.transAxes.inverted())
    assert anchor.y0 >= 1.0 - 1e-9  # above the plot, under the title; not below the tick labels
    plt.close(fig)


def test_one_query_flow_works_every_number_through():
    from bertlib.paper import toy

    X = toy.embeddings()
    W_Q, W_K, W_V = toy.projections()
    fig = diagrams.one_query_flow(toy.TOKENS, X @ W_Q, X @ W_K, X @ W_V, query=1)
    words = texts(fig)
    # cat's query [2, 1] against sat's key [2, 0]: score 4, ÷ √2 = 2.83, weight 0.625
    assert "'cat'" in fig.axes[0].get_title()
    for label in ("4.00", "2.83", "0.625", "÷ √d_k = √2", "z = [0.698, 0.851]",
                  "0.075 × [0.00, 1.00]\n= [0.000, 0.075]",
                  "weights sum to 1.000", "+ every row"):
        assert label in words
    # every row's w_j v_j is joined to the sum (one line from each row, not one arrow from the last)
    lines = fig.axes[0].lines
    assert sum(len(set(line.get_ydata())) == 1 for line in lines) == len(toy.TOKENS)
    plt.close(fig)
    with pytest.raises(ValueError, match="query"):
        diagrams.one_query_flow(toy.TOKENS, X @ W_Q, X @ W_K, X @ W_V, query=6)
    with pytest.raises(ValueError, match="for 6 tokens"):
        diagrams.one_query_flow(toy.TOKENS, X @ W_Q, (X @ W_K)[:5], X @ W_V, query=1)


def test_one_query_flow_draws_the_one_attentions_numbers():
    # its raw scores are its own column; the scaled scores, weights and z it draws are
    # scaled_dot_product_attention's
    from bertlib.paper.attention import attention_scale, scaled_dot_product_attention

    rng = np.random.default_rng(0)
    Q, K, V = rng.normal(size=(3, 5, 4))
    z, A = scaled_dot_product_attention(Q, K, V)
    fig = diagrams.one_query_flow(list("abcde"), Q, K, V, query=2)
    words = texts(fig)
    scaled = (Q @ K.T * attention_scale(4))[2]
    for j in range(5):
        assert f"{scaled[j]:.2f}" in words and f"{A[2, j]:.3f} ×" in words
    assert "z = [" + ", ".join(f"{x:.3f}" for x in z[2]) + "]" in words
    plt.close(fig)


def test_multi_head_flow_split_attend_concat_w_o():
    fig = diagrams.multi_head_flow(8, 384, 12)
    words = texts(fig)
    for label in ("(12, 8, 32)", "head 0", "head 11", "…", "concatenate", "W_O\n(384, 384)"):
        assert label in words
    plt.close(fig)
    with pytest.raises(ValueError, match="divisible"):
        diagrams.multi_head_flow(8, 10, 3)


@pytest.mark.parametrize("h, drawn", [(1, 1), (2, 2), (12, 3)])
def test_multi_head_flow_canvas_fits_its_boxes(h, drawn):
    # no band of empty canvas above or below: the boxes reach within 0.4 of both edges
    fig = diagrams.multi_head_flow(6, 48, h)
    ax = fig.axes[0]
    boxes = [p.get_bbox() for p in ax.patches if hasattr(p, "get_boxstyle")]
    assert sum("head " in t.get_text() for t in ax.texts) == drawn
    low, high = min(b.y0 for b in boxes), max(b.y1 for b in boxes)
    bottom, top = ax.get_ylim()
    assert bottom <= low < bottom + 0.4 and top - 0.4 < high <= top, (low, high, ax.get_ylim())
    plt.close(fig)


def test_multi_head_flow_head_labels_fit_their_boxes():
    fig = diagrams.multi_head_flow(8, 384, 12)  # two-digit head numbers: the longest labels
    fig.canvas.draw()
    ax, renderer = fig.axes[0], fig.canvas.get_renderer()
    boxes = [p.get_window_extent(renderer) for p in ax.patches if hasattr(p, "get_boxstyle")]
    for text in (t for t in ax.texts if t.get_text().startswith("head")):
        inner = text.get_window_extent(renderer)
        middle = ((inner.x0 + inner.x1) / 2, (inner.y0 + inner.y1) / 2)
        outer = next(b for b in boxes if b.contains(*middle))
        assert outer.x0 + 10 < inner.x0 and inner.x1 < outer.x1 - 10, text.get_text()  # a margin
    plt.close(fig)
