"""bertlib.exercises.nb01: each checker accepts the right answer and names each typical mistake."""

import itertools
import math

import numpy as np
import pytest
import torch

from bertlib import toy
from bertlib.attention import causal_mask, scaled_dot_product_attention, softmax
from bertlib.exercises import Feedback
from bertlib.exercises.nb01 import ATOL, check_causal_weights, check_output, check_weights

X = toy.embeddings()
W_Q, W_K, W_V = toy.projections()
Q, K, V = X @ W_Q, X @ W_K, X @ W_V
S = Q @ K.T
D_K, D = Q.shape[1], X.shape[1]
MASK = causal_mask(6)
OUT, W = scaled_dot_product_attention(Q, K, V)  # independent of the checkers' own reference
_, W_CAUSAL = scaled_dot_product_attention(Q, K, V, mask=MASK)


def test_reference_answers_pass():
    assert check_weights(W).ok
    assert check_output(OUT[5], "mat").ok
    assert check_output(OUT[1], "cat").ok
    assert check_causal_weights(W_CAUSAL).ok


def test_float32_torch_answer_passes():
    t = torch.softmax(torch.tensor(S, dtype=torch.float32) / math.sqrt(D_K), dim=-1)
    assert check_weights(t).ok


def test_feedback_is_printable_and_falsy_on_mistake():
    fb = check_weights(np.zeros((6, 6)))
    assert isinstance(fb, Feedback) and not fb
    assert str(fb).startswith("❌")


def test_wrong_shape_is_named():
    fb = check_weights(W[:3])
    assert not fb.ok and "wrong shape" in fb.message and "(3, 6)" in fb.message


def test_forgot_scaling_is_named():
    fb = check_weights(softmax(S, axis=-1))
    assert not fb.ok and "forgot the scaling" in fb.message
    assert "wrong axis" not in fb.message


def test_wrong_axis_says_columns_sum_to_one():
    fb = check_weights(softmax(S / math.sqrt(D_K), axis=0))
    assert not fb.ok and "wrong axis" in fb.message and "columns sum to 1" in fb.message
    assert "scaling" not in fb.message


def test_both_mistakes_at_once_are_both_named():
    fb = check_weights(softmax(S, axis=0))
    assert "forgot the scaling" in fb.message and "wrong axis" in fb.message


def test_dividing_by_model_width_is_named():
    fb = check_weights(softmax(S / math.sqrt(D), axis=-1))
    assert not fb.ok and "√d = √4" in fb.message


def test_transposed_weights_are_named():
    assert "swapped" in check_weights(W.T).message


def test_scores_without_softmax_are_named():
    assert "apply the softmax" in check_weights(S / math.sqrt(D_K)).message


def test_unrecognised_answer_points_at_a_row():
    wrong = W.copy()
    wrong[2] = np.full(6, 1 / 6)
    fb = check_weights(wrong)
    assert not fb.ok and "row 2 (query 'sat')" in fb.message


@pytest.mark.parametrize("bad", ["abc", None, [[1, 2], [3]], np.full((6, 6), np.nan)])
def test_non_arrays_and_nan_give_feedback_not_errors(bad):
    fb = check_weights(bad)
    assert isinstance(fb, Feedback) and not fb.ok


def test_output_shape_mistakes():
    assert "looks like the weights" in check_output(W[5]).message
    assert "take row 5" in check_output(OUT).message
    assert "wrong shape" in check_output(np.zeros(3)).message


def test_output_mistakes():
    assert "averaged the keys" in check_output(W[5] @ K).message
    assert "forgot the scaling" in check_output(softmax(S, axis=-1)[5] @ V).message
    assert "wrong axis" in check_output(softmax(S / math.sqrt(D_K), axis=0)[5] @ V).message
    assert "should be [0.429, 0.861]" in check_output(np.zeros(2)).message


def test_output_unknown_query_gives_feedback():
    fb = check_output(OUT[1], "dog")
    assert not fb.ok and "dog" in fb.message


def test_causal_mistakes():
    assert "no mask applied" in check_causal_weights(W).message
    assert "wrong way round" in check_causal_weights(
        scaled_dot_product_attention(Q, K, V, mask=MASK.T)[1]).message
    assert "after the softmax" in check_causal_weights(W * MASK).message
    assert "forgot the scaling" in check_causal_weights(softmax(S, where=MASK)).message
    assert "wrong axis" in check_causal_weights(
        softmax(S / math.sqrt(D_K), axis=0, where=MASK)).message


def test_causal_look_ahead_is_located():
    wrong = W_CAUSAL.copy()
    wrong[1, 2] = 0.1
    fb = check_causal_weights(wrong)
    assert "'cat' (position 1)" in fb.message and "'sat' (position 2)" in fb.message


def test_every_diagnosed_mistake_is_far_from_every_other():
    """The checkers tell mistakes apart with tolerance ATOL: no two candidates are that close."""
    candidates = [softmax(S / tau, axis=axis, where=m)
                  for tau in (math.sqrt(D_K), 1.0, math.sqrt(D))
                  for axis in (-1, 0) for m in (None, MASK, MASK.T)]
    candidates += [W.T, W * MASK, S / math.sqrt(D_K)]
    gap = min(np.abs(a - b).max() for a, b in itertools.combinations(candidates, 2))
    assert gap > 100 * ATOL
