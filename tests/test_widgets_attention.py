"""bertlib.pictures.widgets.attention: the weights it draws, its input checks, and the widget itself."""

import html
import math

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

import IPython.display  # noqa: E402

import bertlib.pictures.widgets  # noqa: E402
from bertlib.paper import toy  # noqa: E402
from bertlib.paper.attention import softmax  # noqa: E402
from bertlib.pictures.widgets import query_index  # noqa: E402
from bertlib.pictures.widgets.attention import (  # noqa: E402
    SCALINGS,
    TEMPERATURE_RANGE,
    ToyAttentionExplorer,
    score_divisor,
    toy_query_weights,
)

X = toy.embeddings()
W_Q, W_K, _ = toy.projections()
SCORES_CAT = (X @ W_Q)[1] @ (X @ W_K).T  # [0, 1, 4, 1, 0, 2]


@pytest.mark.parametrize("scaling, tau", [("sqrt_dk", math.sqrt(2)), ("sqrt_d", 2.0),
                                          ("none", 1.0)])
def test_weights_match_softmax_of_scaled_scores(scaling, tau):
    np.testing.assert_allclose(toy_query_weights("cat", scaling), softmax(SCORES_CAT / tau),
                               rtol=1e-12)


def test_temperature_divides_the_scores():
    np.testing.assert_allclose(toy_query_weights(1, "temperature", 0.5),
                               softmax(SCORES_CAT / 0.5), rtol=1e-12)


def test_larger_divisor_gives_flatter_weights():
    peaks = [toy_query_weights("cat", s).max() for s in ("none", "sqrt_dk", "sqrt_d")]
    assert peaks[0] > peaks[1] > peaks[2]
    np.testing.assert_allclose(toy_query_weights("cat", "temperature", 1e6), 1 / 6, atol=1e-5)


def test_temperature_ignored_unless_selected():
    np.testing.assert_array_equal(toy_query_weights("cat", "sqrt_dk", -1.0),
                                  toy_query_weights("cat", "sqrt_dk"))


RANGE_SAID = r"temperature must be a number in \[1e-300, 1e\+300\] \(T = 0 divides by zero"


#: 1e-320 and 5e-324: 1/T overflows to inf (the learner once saw "scale ... inf"); 1e-308: 1/T is
#: finite but the scores ÷ T overflow (the weights came out NaN, silently); 1e308: beyond the top.
@pytest.mark.parametrize("T", [0.0, -0.0, -1.0, float("nan"), float("inf"), float("-inf"),
                               1e-320, 5e-324, 1e-308, 1e-301, 1e308, 1.01e300])
def test_impossible_temperature_is_refused_naming_the_range(T):
    for call in (lambda: score_divisor("temperature", T),
                 lambda: toy_query_weights("cat", "temperature", T)):
        with pytest.raises(ValueError, match=RANGE_SAID) as err:
            call()
        assert "scale" not in str(err.value) and f"got {float(T)!r}" in str(err.value)


@pytest.mark.parametrize("T", ["2", "abc", None, True, [1.0]])
def test_temperature_must_be_a_number(T):
    with pytest.raises(TypeError, match=RANGE_SAID):
        score_divisor("temperature", T)


def test_the_temperature_range_is_what_float64_allows_on_the_toy():
    low, high = TEMPERATURE_RANGE
    assert (low, high) == (1e-300, 1e300)
    scores = (X @ W_Q) @ (X @ W_K).T
    assert np.abs(scores).max() == 4  # the comment's "the toy's scores reach 4"
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # at both ends, every query
        for T in (low, high, np.float32(1e-40)):
            for i in range(len(toy.TOKENS)):
                w = toy_query_weights(i, "temperature", T)
                assert np.isfinite(w).all() and abs(w.sum() - 1) < 1e-12
    np.testing.assert_allclose(toy_query_weights("cat", "temperature", high), 1 / 6, rtol=1e-12)
    assert toy_query_weights("cat", "temperature", low).argmax() == toy.TOKENS.index("sat")
    with np.errstate(over="ignore"):  # the comment's "1/T is inf from about 5.6e-309"
        assert np.isinf(np.float64(1) / 5.5e-309) and np.isfinite(np.float64(1) / 5.6e-309)


def test_unknown_scaling_lists_the_options():
    with pytest.raises(ValueError, match="scaling must be one of"):
        score_divisor("sqrt_n")


def test_query_by_word_or_index():
    """One lookup for every explorer: case-insensitive, first occurrence, errors name the tokens."""
    tokens = toy.TOKENS
    assert query_index("cat", tokens) == 1 and query_index(" Mat ", tokens) == 5
    assert query_index(4, tokens) == 4 and query_index(np.int64(2), tokens) == 2
    assert query_index("THE", tokens) == 0  # "the" occurs twice: the first occurrence
    assert query_index("the", ["The", "cat", "the"]) == 0  # tokens in any case
    with pytest.raises(ValueError, match=r"query must be a whole number in 0..5 \(6 tokens\) or a token, got 6"):
        query_index(6, tokens)
    with pytest.raises(ValueError, match=r"'dog' is not among the tokens \['the', 'cat'"):
        query_index("dog", tokens)
    with pytest.raises(TypeError, match="query must be a whole number in 0..5"):
        query_index(1.5, tokens)
    with pytest.raises(TypeError):
        query_index(True, tokens)


@pytest.fixture
def shown(monkeypatch):
    """Record what the widget shows: displayed objects (messages) and the titles of charts.

    Outside a kernel an Output widget captures nothing, so display (messages kept) and the
    figure's PNG (its title kept) are watched.
    """
    seen = {"displayed": [], "charts": []}
    real_png = bertlib.pictures.widgets.figure_png

    def png(fig, *args, **kwargs):
        seen["charts"].append(fig.axes[0].get_title())
        return real_png(fig, *args, **kwargs)

    monkeypatch.setattr(IPython.display, "display", lambda *objs, **kw: seen["displayed"].extend(
        o for o in objs if isinstance(o, IPython.display.HTML)))
    monkeypatch.setattr(bertlib.pictures.widgets, "figure_png", png)
    return seen


def test_explorer_builds_with_controls_above_view(shown):
    ex = ToyAttentionExplorer()
    assert ex.ok and shown["charts"] == ["query 'cat' (position 1): scores ÷ √d_k = 1.41"]
    controls, view, _style = ex.widget.children
    assert view is ex.output
    assert [c.description for c in controls.children] == ["query", "scores", "T"]
    assert set(ex.scaling.options) == {(label, key) for key, label in SCALINGS.items()}
    assert ex.temperature.disabled and ex.temperature.continuous_update is False


def test_explorer_shows_message_for_bad_temperature(shown):
    # one explorer walks through the bad temperatures (a message each, nothing drawn), then a
    # good one draws again: the controls stay usable
    ex = ToyAttentionExplorer(scaling="temperature")
    assert ex.ok and not ex.temperature.disabled
    bad = (-1.0, 0.0, float("nan"), float("inf"), 1e-320, 1e-308, 1e308)
    for T in bad:
        ex.temperature.value = T
        assert not ex.ok
        said = shown["displayed"][-1].data
        assert "temperature must be a number in [1e-300, 1e+300] (T = 0 divides" in said
        assert f"got {T}" in said and "scale" not in said and html.escape(ex.drawn.message) in said
    assert len(shown["displayed"]) == len(bad) and len(shown["charts"]) == 1
    ex.temperature.value = 2.0
    assert ex.ok and len(shown["charts"]) == 2
    ex.temperature.value = 1e-300  # the ends of the range draw
    assert ex.ok and shown["charts"][-1].endswith("scores ÷ T = 1e-300")


def test_explorer_refuses_a_temperature_that_is_no_number():
    with pytest.raises(TypeError, match=r"temperature must be a number in \[1e-300, 1e\+300\]"):
        ToyAttentionExplorer(scaling="temperature", temperature="0.5")


def test_explorer_redraws_when_query_changes(shown):
    ex = ToyAttentionExplorer()
    ex.query.value = 5
    ex.scaling.value = "sqrt_d"
    assert ex.ok and not shown["displayed"]  # charts, no message
    ex.scaling.value = "none"
    ex.scaling.value = "temperature"
    ex.temperature.value = 0.5
    assert shown["charts"][1:] == ["query 'mat' (position 5): scores ÷ √d_k = 1.41",
                                   "query 'mat' (position 5): scores ÷ √d = 2",
                                   "query 'mat' (position 5): scores ÷ 1 (no scaling)",
                                   "query 'mat' (position 5): scores ÷ T = 1",
                                   "query 'mat' (position 5): scores ÷ T = 0.5"]


def test_explorer_rejects_unknown_scaling():
    with pytest.raises(ValueError, match="scaling must be one of"):
        ToyAttentionExplorer(scaling="sqrt_n")
