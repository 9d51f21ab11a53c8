"""bertlib.paper.toy: shapes, the numbers a learner checks by hand, and the story the weights tell."""

import math

import numpy as np

from bertlib.paper import toy
from bertlib.paper.attention import causal_mask, scaled_dot_product_attention

CAT, SAT, MAT = 1, 2, 5


def single_head():
    X = toy.embeddings()
    W_Q, W_K, W_V = toy.projections()
    return X @ W_Q, X @ W_K, X @ W_V


def test_shapes():
    assert toy.TOKENS == toy.SENTENCE.lower().split()
    assert toy.embeddings().shape == (6, 4) == (len(toy.TOKENS), len(toy.FEATURES))
    assert all(W.shape == (4, 2) for W in toy.projections())
    W_Q, W_K, W_V, W_O = toy.two_head_projections()
    assert W_Q.shape == W_K.shape == W_V.shape == W_O.shape == (4, 4)


def test_numbers_are_whole_and_small():
    for M in (toy.embeddings(), *toy.projections()):
        assert np.array_equal(M, np.round(M)) and np.abs(M).max() <= 2


def test_cat_by_hand():
    Q, K, V = single_head()
    np.testing.assert_array_equal(Q[CAT], [2, 1])
    np.testing.assert_array_equal(K[SAT], [2, 0])
    np.testing.assert_array_equal(Q[CAT] @ K.T, [0, 1, 4, 1, 0, 2])
    # softmax of [0, 1, 4, 1, 0, 2] / √2, written out
    e = [math.exp(s / math.sqrt(2)) for s in (0, 1, 4, 1, 0, 2)]
    _, w = scaled_dot_product_attention(Q, K, V)
    # float64 softmax of 6 scores vs the formula by hand: a few eps (2.2e-16) -> 1e-12
    np.testing.assert_allclose(w[CAT], np.array(e) / sum(e), rtol=1e-12)
    assert round(w[CAT, SAT], 3) == 0.625


def test_cat_attends_most_to_sat_then_mat():
    _, w = scaled_dot_product_attention(*single_head())
    top_two = np.argsort(w[CAT])[::-1][:2]
    assert [toy.TOKENS[j] for j in top_two] == ["sat", "mat"]


def test_the_two_the_rows_are_identical():
    X = toy.embeddings()
    np.testing.assert_array_equal(X[0], X[4])
    _, w = scaled_dot_product_attention(*single_head())
    np.testing.assert_array_equal(w[0], w[4])


def test_causal_cat_cannot_see_sat():
    _, w = scaled_dot_product_attention(*single_head(), mask=causal_mask(6))
    assert w[CAT, SAT] == 0 and w[CAT, :CAT + 1].sum() == 1.0


def test_two_heads_first_is_the_single_head_second_links_cat_to_mat():
    X = toy.embeddings()
    W_Q, W_K, W_V, W_O = toy.two_head_projections()
    np.testing.assert_array_equal(W_Q[:, :2], toy.projections()[0])
    np.testing.assert_array_equal(W_O, np.eye(4))
    _, w1 = scaled_dot_product_attention(X @ W_Q[:, 2:], X @ W_K[:, 2:], X @ W_V[:, 2:])
    assert toy.TOKENS[int(w1[CAT].argmax())] == "mat"
