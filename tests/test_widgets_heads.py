"""The head explorer: draws the chosen head and query, greys the others, reports bad choices."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from bertlib.paper import toy  # noqa: E402
from bertlib.paper.attention import multi_head_attention  # noqa: E402
from bertlib.pictures.widgets.heads import HeadExplorer, draw_heads  # noqa: E402


@pytest.fixture
def toy_maps():
    _, w = multi_head_attention(toy.embeddings(), *toy.two_head_projections(), h=2)
    return w, toy.TOKENS


def rgba_rows(fig):
    """The (h, n, 4) image of the right-hand panel (axes: left map, right grid, colour bar)."""
    return fig.axes[1].get_images()[0].get_array()


def test_chosen_head_is_coloured_and_others_grey(toy_maps):
    w, tokens = toy_maps
    fig = draw_heads(w, tokens, head=1, query="cat")
    img = np.asarray(rgba_rows(fig))
    assert img.shape == (2, 6, 4)
    grey, blue = img[0, :, :3], img[1, :, :3]
    np.testing.assert_allclose(grey[:, 0], grey[:, 1])  # R = G = B: grey
    np.testing.assert_allclose(grey[:, 1], grey[:, 2])
    assert np.all(blue[:, 2] >= blue[:, 0]) and np.any(blue[:, 2] > blue[:, 0] + 0.1)
    darkest = int(blue.sum(axis=1).argmin())
    assert tokens[darkest] == "mat"  # head 1: cat -> mat


def test_left_panel_is_the_chosen_heads_matrix_with_query_outlined(toy_maps):
    w, tokens = toy_maps
    fig = draw_heads(w, tokens, head=0, query=1)
    left = fig.axes[0]
    np.testing.assert_allclose(left.get_images()[0].get_array(), w[0])
    assert "head 0" in left.get_title()
    outline = left.patches[0]
    assert outline.get_y() == pytest.approx(0.5)  # row of query 1
    assert fig.axes[1].get_title().startswith("query 'cat' (position 1) in all 2 heads\n")
    assert "head 0 in blue (left colour bar)" in fig.axes[1].get_title()
    left_bar = fig.axes[2]  # the left map's colour bar names the head and its row on the right
    assert left_bar.get_ylabel() == "attention weight (head 0: this map and its blue row)"
    cmap = left.get_images()[0].get_cmap()
    np.testing.assert_allclose(rgba_rows(fig)[0], cmap(w[0, 1]))  # the row: the left bar's colours


def test_query_as_text_uses_first_occurrence(toy_maps):
    w, tokens = toy_maps
    fig = draw_heads(w, tokens, head=0, query="the")
    assert fig.axes[0].patches[0].get_y() == pytest.approx(-0.5)


def test_query_word_ignores_case_like_the_toy_explorer(toy_maps):
    w, tokens = toy_maps
    fig = draw_heads(w, tokens, head=0, query=" CAT ")
    assert fig.axes[0].patches[0].get_y() == pytest.approx(0.5)  # row of "cat", position 1


@pytest.mark.parametrize("head, error, text", [
    (2, ValueError, r"head must be a whole number in 0..1 \(2 heads\), got 2"),
    (-1, ValueError, "head must be a whole number in 0..1"),
    (1.5, TypeError, "head must be a whole number in 0..1"),
])
def test_bad_head_index_raises_clear_error(toy_maps, head, error, text):
    w, tokens = toy_maps
    with pytest.raises(error, match=text):
        draw_heads(w, tokens, head=head, query=0)


def test_bad_query_and_bad_shapes(toy_maps):
    w, tokens = toy_maps
    with pytest.raises(ValueError, match=r"query must be a whole number in 0..5 \(6 tokens\) or a token, got 6"):
        draw_heads(w, tokens, head=0, query=6)
    with pytest.raises(TypeError, match=r"query must be a whole number in 0..5 \(6 tokens\) or a token, got 1.0"):
        draw_heads(w, tokens, head=0, query=1.0)
    with pytest.raises(ValueError, match="'dog' is not among the tokens"):
        draw_heads(w, tokens, head=0, query="dog")
    with pytest.raises(ValueError, match=r"\(h, n, n\) = \(h, 5, 5\) \(n = the number of tokens\)"):
        draw_heads(w, tokens[:5], head=0, query=0)


def test_explorer_draws_then_shows_a_message_for_a_bad_head(toy_maps):
    w, tokens = toy_maps
    ex = HeadExplorer(w, tokens, head=0, query=1)
    assert ex.ok
    ex.head.value = 2
    assert ex.ok is False  # render_safely caught the ValueError: a message, no traceback
    with pytest.raises(ValueError, match=r"head must be a whole number in 0..1 \(2 heads\), got 2"):
        ex.draw()
    ex.head.value = 1
    assert ex.ok


def test_explorer_with_layers_checks_the_layer_too():
    maps = np.random.default_rng(0).dirichlet(np.ones(4), size=(3, 2, 4))  # (layers, h, n, n)
    ex = HeadExplorer(maps, ["a", "b", "c", "d"], layer=2, head=1, query=3)
    assert ex.ok and len(ex.widget.children[0].children) == 3
    ex.layer.value = 3
    assert not ex.ok
    with pytest.raises(ValueError, match=r"layer must be a whole number in 0..2 \(3 layers\), got 3"):
        ex.draw()


def test_explorer_rejects_bad_weights_and_a_bad_starting_query(toy_maps):
    with pytest.raises(ValueError, match=r"weights must have 3 dimensions \(h, n, n\) or"):
        HeadExplorer(np.ones((4, 4)), ["a", "b", "c", "d"])
    w, tokens = toy_maps
    with pytest.raises(ValueError, match=r"query must be a whole number in 0..5 \(6 tokens\) or a token, got 9"):
        HeadExplorer(w, tokens, query=9)


def test_explorer_starts_at_a_query_word_and_accepts_numpy_indices(toy_maps):
    w, tokens = toy_maps
    ex = HeadExplorer(w, tokens, head=np.int64(1), query="mat")
    assert ex.ok and ex.query.value == 5
    with pytest.raises(TypeError, match="head must be a whole number in 0..1"):
        draw_heads(w, tokens, head=True, query=0)


def test_grid_numbers_stay_legible_when_the_figure_is_shrunk(toy_maps):
    # a notebook shows the 12-head grid about 30% smaller than drawn: 9 pt prints at about 6 pt
    w, tokens = toy_maps
    fig = draw_heads(w, tokens, head=0, query=1)
    sizes = {t.get_fontsize() for t in fig.axes[1].texts}
    assert len(fig.axes[1].texts) == w.shape[0] * len(tokens) and min(sizes) >= 9


def test_draw_heads_prints_the_left_map_weights_large_enough_for_a_column():
    import matplotlib.pyplot as plt

    from bertlib.pictures.widgets.heads import ANNOTATION_SIZE, draw_heads

    rng = np.random.default_rng(0)
    W = rng.random((4, 8, 8))
    W /= W.sum(-1, keepdims=True)
    fig = draw_heads(W, [f"t{i}" for i in range(8)], head=1, query=2)
    try:
        numbers = fig.axes[0].texts
        assert len(numbers) == 64 and ANNOTATION_SIZE >= 10
        assert all(t.get_fontsize() == ANNOTATION_SIZE for t in numbers)
    finally:
        plt.close(fig)
