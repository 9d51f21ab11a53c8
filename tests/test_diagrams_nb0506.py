"""bertlib.pictures.diagrams, notebook 05's picture: the tiled online softmax over key blocks."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from bertlib.pictures.diagrams import tiled_softmax_picture  # noqa: E402


def test_tiled_softmax_picture_labels_every_block_and_the_state():
    fig = tiled_softmax_picture(3)
    texts = " ".join(t.get_text() for t in fig.axes[0].texts)
    for label in ["Q\n(n, d_k)", "K_1, V_1", "K_3, V_3", "S_2 = s·Q K_2ᵀ\n(n, B)",
                  "after block 3", "out = O / ℓ", "m = −∞"]:
        assert label in texts
    assert "K_4" not in texts
    plt.close(fig)


def test_tiled_softmax_picture_defines_every_symbol_it_draws():
    """s (the scale) and m′ (the new running maximum) appear in the boxes and arrows: the
    footnote says what they are, so the picture reads without the prose."""
    fig = tiled_softmax_picture(2)
    texts = " ".join(t.get_text() for t in fig.axes[0].texts)
    for symbol in ["s = 1/√d_k", "m′ = new max", "ℓ = running sum", "B = block size"]:
        assert symbol in texts
    plt.close(fig)


@pytest.mark.parametrize("bad, error", [(1, ValueError), (7, ValueError), (2.5, TypeError),
                                        (True, TypeError)])
def test_tiled_softmax_picture_rejects_bad_block_counts(bad, error):
    with pytest.raises(error, match="n_blocks must be a whole number in 2..6"):
        tiled_softmax_picture(bad)
