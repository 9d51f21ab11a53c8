"""bertlib.pictures.widgets.heads_overlay: the head summary shown under the attention explorer."""

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from bertlib.pictures.widgets.explorer import BertAttentionExplorer  # noqa: E402
from bertlib.pictures.widgets.heads_overlay import heads_overlay, segments_from_tokens  # noqa: E402

TOKENS = ["[CLS]"] + [f"w{i}" for i in range(10)] + ["[SEP]"]


def stack(*maps):
    return np.stack(maps)[None]  # (1, heads, n, n)


def test_overlay_labels_a_previous_token_head_diagonal_with_share_one():
    n = len(TOKENS)
    prev = np.zeros((n, n))
    prev[0, 0] = 1.0
    prev[np.arange(1, n), np.arange(n - 1)] = 1.0
    cls = np.zeros((n, n))
    cls[:, 0] = 1.0
    A = stack(prev, cls)
    out = heads_overlay(TOKENS, A, 0, 0)
    assert "pattern <b>diagonal</b>" in out and "previous<br><b>1.00</b>" in out
    out = heads_overlay(TOKENS, A, 0, 1)
    assert "pattern <b>vertical</b>" in out and "[CLS]<br><b>1.00</b>" in out
    assert "mean of the heads" in heads_overlay(TOKENS, A, 0, None)
    assert "within its sentence n/a (no far attention, or one sentence)" in out  # one sentence


def test_overlay_rejects_a_bad_head_with_the_valid_range():
    A = stack(np.full((12, 12), 1 / 12))
    with pytest.raises(ValueError, match="head must be a whole number in 0..0"):
        heads_overlay(TOKENS, A, 0, 3)


def test_segments_from_tokens():
    assert segments_from_tokens(["[CLS]", "a", "[SEP]"]) is None
    assert segments_from_tokens(["[CLS]", "a", "[SEP]", "b", "[SEP]"]).tolist() == [0, 0, 0, 1, 1]


def test_overlay_in_the_explorer_follows_the_selected_head():
    ex = BertAttentionExplorer("The cat sat on the mat.", overlay=heads_overlay)
    assert ex.set_layer(0) and ex.set_head(2)
    assert "layer 0, head 2: pattern <b>diagonal</b>" in ex.overlay_html.value
    assert ex.set_text("The cat sat.", "It was happy.")
    assert "within its sentence 0." in ex.overlay_html.value or "within its sentence 1." in ex.overlay_html.value
