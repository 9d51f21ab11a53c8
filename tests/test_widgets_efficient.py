"""bertlib.pictures.widgets.efficient: what it compares, its checks, and the widget with good and bad knobs."""

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

import IPython.display  # noqa: E402

from bertlib.hf.params import bert_qkv  # noqa: E402
from bertlib.paper.attention import scaled_dot_product_attention  # noqa: E402
from bertlib.paper.variants import sliding_window_attention  # noqa: E402
from bertlib.pictures.widgets.efficient import (  # noqa: E402
    DEFAULT_TEXT,
    VARIANTS,
    EfficientExplorer,
    variant_vs_full,
)


def qkv(n=16, d=8):
    rng = np.random.default_rng(0)
    return tuple(rng.standard_normal((n, d)) for _ in range(3))


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_each_variant_gives_full_and_implied_weights_and_an_error(variant):
    Q, K, V = qkv()
    full_A, variant_A, err = variant_vs_full(variant, VARIANTS[variant][2], Q, K, V)
    np.testing.assert_allclose(full_A, scaled_dot_product_attention(Q, K, V)[1])
    assert variant_A.shape == (16, 16) and np.isfinite(err) and err > 0


def test_error_is_the_relative_output_error():
    Q, K, V = qkv()
    full_out, _ = scaled_dot_product_attention(Q, K, V)
    out = sliding_window_attention(Q, K, V, 4)
    _, _, err = variant_vs_full("sliding", 4, Q, K, V)
    assert err == pytest.approx(np.linalg.norm(out - full_out) / np.linalg.norm(full_out))
    assert variant_vs_full("sliding", 30, Q, K, V)[2] == pytest.approx(0, abs=1e-12)


def test_unknown_variant_and_bad_knobs_are_named():
    Q, K, V = qkv()
    with pytest.raises(ValueError, match="variant must be one of"):
        variant_vs_full("flash", 4, Q, K, V)
    with pytest.raises(ValueError, match="w must be even"):
        variant_vs_full("sliding", 3, Q, K, V)
    with pytest.raises(ValueError, match=r"k must be a whole number in 1\.\.16"):
        variant_vs_full("linformer", 17, Q, K, V)


#: The explorers that move controls read this 10-piece text (each draw labels n tokens on four
#: axes, so a short text draws faster); the default text, 16 pieces, is built once below.
SHORT_TEXT = "the cat sat on the soft red mat"  # block-sparse needs 5 blocks of 2


@pytest.fixture
def shown(monkeypatch):
    """Record what the widget displays (outside a kernel, an Output widget does not capture)."""
    seen = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **kw: seen.extend(
        o for o in objs if isinstance(o, IPython.display.HTML)))
    return seen


def test_explorer_builds_with_controls_above_view(shown):
    ex = EfficientExplorer()
    assert ex.ok and ex.error is not None
    controls, view, _style = ex.widget.children
    assert view is ex.output
    assert [c.description for c in controls.children] == ["variant", "window w", "layer", "head"]
    assert ex.knob.continuous_update is False
    assert len(ex.run.tokens) == 16 and DEFAULT_TEXT


def test_explorer_switches_variant_and_knob(shown):
    ex = EfficientExplorer(SHORT_TEXT)
    ex.variant.value = "performer"
    assert ex.knob.description == "m" and ex.knob.value == 16 and ex.ok
    first = ex.error
    ex.knob.value = 1024
    assert ex.ok and ex.error != first
    ex.layer.value = 5
    assert ex.ok


#: (variant, a knob it cannot use, words of the message shown)
BAD_KNOBS = [
    ("linformer", 40, r"k must be a whole number in 1..10"),
    ("sliding", 5, "w must be even"),
    ("sliding", 0, "must be a whole number &gt;= 1, got 0"),
    ("block_sparse", 4, "n=10 is not a multiple of block=4"),
    ("lsh", 3, "n_buckets must be 1 or even"),
    ("performer", -2, "must be a whole number &gt;= 1, got -2"),
]


def test_explorer_shows_a_message_for_each_bad_knob_and_stays_usable(shown):
    # One explorer walks through every bad knob (one draw per variant, not two per case): after
    # each message, the next control change (another variant, or the knob back) draws again.
    ex = EfficientExplorer(SHORT_TEXT, variant=BAD_KNOBS[0][0])
    for variant, knob, words in BAD_KNOBS:
        if ex.variant.value != variant:
            ex.variant.value = variant  # from the message's state: the controls stay usable
            assert ex.ok and ex.knob.value == VARIANTS[variant][2], variant
        ex.knob.value = knob
        assert not ex.ok and ex.error is None, (variant, knob)
        assert words in shown[-1].data, (variant, knob, shown[-1].data)
    ex.knob.value = VARIANTS[variant][2]
    assert ex.ok and ex.error is not None


def test_explorer_refuses_a_bad_layer_or_variant():
    with pytest.raises(ValueError, match=r"layer must be a whole number in 0..5"):
        EfficientExplorer(layer=6)
    with pytest.raises(ValueError, match="variant must be one of"):
        EfficientExplorer(variant="dense")


def test_explorer_can_start_at_a_chosen_knob(shown):
    ex = EfficientExplorer(SHORT_TEXT, knob=6)
    _, _, err = variant_vs_full("sliding", 6, *(m[ex.head.value] for m in ex_qkv(ex)))
    assert ex.knob.value == 6 and ex.ok and ex.error == pytest.approx(err)
    with pytest.raises(TypeError, match="knob must be a whole number"):
        EfficientExplorer(knob="6")


def ex_qkv(ex):
    return bert_qkv(ex.run.hidden_states[ex.layer.value], ex.layer.value)
