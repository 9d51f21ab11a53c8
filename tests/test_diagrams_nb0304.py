"""bertlib.pictures.diagrams, notebook 03's picture: one encoder layer, labelled with the shapes."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from bertlib.pictures.diagrams import embeddings_and_stack_picture, encoder_layer_picture  # noqa: E402


def texts(fig):
    return " ".join(t.get_text() for t in fig.axes[0].texts)


def test_encoder_layer_draws_every_step_with_its_shapes():
    fig = encoder_layer_picture(n=8, d=384, h=12, d_ff=1536)
    words = texts(fig)
    for label in ("X\n(8, 384)", "12 heads,\nd_k = 32", "LayerNorm", "(8, 1536)", "residual: X",
                  "residual: X₁", "X₁\n(8, 384)", "X₂ (8, 384)"):
        assert label in words
    assert words.count("LayerNorm") == 2 and words.count("+") >= 2
    plt.close(fig)


def test_encoder_layer_labels_are_readable_when_scaled_down():
    fig = encoder_layer_picture(n=8, d=384, h=12, d_ff=1536)
    sizes = {t.get_text(): t.get_fontsize() for t in fig.axes[0].texts}
    assert min(sizes.values()) >= 10, sizes  # the edge shapes were 7 pt, hard to read on a page
    plt.close(fig)


def test_encoder_layer_follows_another_shape():
    fig = encoder_layer_picture(n=5, d=256, h=8, d_ff=512)
    assert "8 heads,\nd_k = 32" in texts(fig) and "(5, 512)" in texts(fig)
    plt.close(fig)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"n": 0, "d": 384, "h": 12, "d_ff": 1536}, ValueError, "n must be a whole number >= 1"),
    ({"n": 8, "d": 384, "h": 5, "d_ff": 1536}, ValueError, "divisible"),
    ({"n": 8, "d": 384.0, "h": 12, "d_ff": 1536}, TypeError, "d must be a whole number >= 1"),
])
def test_encoder_layer_rejects_bad_sizes(kwargs, error, message):
    with pytest.raises(error, match=message):
        encoder_layer_picture(**kwargs)


def test_embeddings_and_stack_names_the_three_tables_and_every_layer_shown():
    fig = embeddings_and_stack_picture(n=8, d=384, n_layers=6, vocab=30522, positions=512)
    words = texts(fig)
    for label in ("W_word (30522, 384)", "W_pos (512, 384)", "W_type (2, 384)", "LayerNorm",
                  "its output E:\nhidden_states[0]", "layer 0", "layer 1", "layer 5", "its output:\nhidden_states[6]", "…",
                  "(8, 384)"):
        assert label in words
    plt.close(fig)
    small = texts(embeddings_and_stack_picture(n=5, d=256, n_layers=2, vocab=100, positions=64))
    assert "layer 1" in small and "layer 2" not in small and "hidden_states[2]" in small
    assert small.count("…") == 1  # only "rows 0 … 4": two layers need no "…" between them
    plt.close("all")
    with pytest.raises(ValueError, match="n_layers"):
        embeddings_and_stack_picture(n=5, d=256, n_layers=0, vocab=100, positions=64)


def test_embeddings_and_stack_labels_under_the_boxes_touch_no_box():
    from matplotlib.patches import FancyBboxPatch

    fig = embeddings_and_stack_picture(n=8, d=384, n_layers=6, vocab=30522, positions=512)
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    boxes = [p.get_window_extent(renderer) for p in ax.patches if isinstance(p, FancyBboxPatch)]
    assert len(boxes) >= 8
    for text in ax.texts:
        if "hidden_states" in text.get_text():  # the outputs' labels, hidden_states[0] included
            extent = text.get_window_extent(renderer)
            assert not any(extent.overlaps(b) for b in boxes), text.get_text()
    plt.close(fig)
