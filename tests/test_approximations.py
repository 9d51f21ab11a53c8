"""bertlib.paper.approximations: Linformer, Performer and LSH against full attention, their limits, errors."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from bertlib.paper.approximations import (
    linformer_attention,
    linformer_projections,
    lsh_attention,
    lsh_buckets,
    lsh_pattern,
    orthogonal_features,
    performer_attention,
    performer_features,
    relative_error,
)
from bertlib.paper.attention import scaled_dot_product_attention

TOL = dict(rtol=1e-10, atol=1e-12)  # float64 on both sides: agreement to rounding


def unit_keys(Q):
    return Q / np.linalg.norm(Q, axis=1, keepdims=True)


# ---------------------------------------------------------------- Linformer


def test_linformer_with_k_equal_n_and_identity_projections_is_full_attention(numpy_qkv):
    Q, K, V = numpy_qkv()
    full, weights = scaled_dot_product_attention(Q, K, V)
    out, implied = linformer_attention(Q, K, V, 24, E=np.eye(24), F=np.eye(24),
                                       return_weights=True)
    np.testing.assert_allclose(out, full, **TOL)
    np.testing.assert_allclose(implied, weights, **TOL)


def test_linformer_matches_its_formula_and_implied_weights(numpy_qkv):
    Q, K, V = numpy_qkv()
    E, F_ = linformer_projections(24, 6, seed=1), linformer_projections(24, 6, seed=2)
    t = [torch.from_numpy(a) for a in (Q, E @ K, F_ @ V)]
    out, implied = linformer_attention(Q, K, V, 6, E=E, F=F_, return_weights=True)
    np.testing.assert_allclose(out, F.scaled_dot_product_attention(*t).numpy(), **TOL)
    np.testing.assert_allclose(implied @ V, out, **TOL)
    np.testing.assert_array_equal(linformer_attention(Q, K, V, 6, seed=3),
                                  linformer_attention(Q, K, V, 6, E=linformer_projections(24, 6, 3)))


@pytest.mark.parametrize("k", [0, -3, 25])
def test_linformer_bad_k_names_the_range(numpy_qkv, k):
    Q, K, V = numpy_qkv()
    with pytest.raises(ValueError, match=r"k must be a whole number in 1\.\.24"):
        linformer_attention(Q, K, V, k)


def test_linformer_projection_of_the_wrong_shape_is_named(numpy_qkv):
    Q, K, V = numpy_qkv()
    with pytest.raises(ValueError, match=r"E must have shape \(k, n\) = \(4, 24\)"):
        linformer_attention(Q, K, V, 4, E=np.ones((4, 20)))


# ---------------------------------------------------------------- Performer


def test_performer_error_shrinks_as_m_grows(numpy_qkv):
    Q, K, V = numpy_qkv(scale=0.5)
    _, exact = scaled_dot_product_attention(Q, K, V)

    def mean_error(m):
        return np.mean([relative_error(performer_attention(Q, K, V, m, seed=s, return_weights=True)[1],
                                       exact) for s in range(8)])

    errors = [mean_error(m) for m in (8, 64, 512)]
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 0.5 * errors[0]


def test_performer_features_estimate_exp_of_the_dot_product_without_bias():
    rng = np.random.default_rng(1)
    X = 0.4 * rng.standard_normal((4, 6))

    def estimate(seed):
        phi = performer_features(X, orthogonal_features(8, 6, seed))
        return phi @ phi.T

    mean = np.mean([estimate(s) for s in range(3000)], axis=0)
    np.testing.assert_allclose(mean, np.exp(X @ X.T), rtol=0.04)  # one draw is off by ~30 %
    assert np.abs(estimate(0) / np.exp(X @ X.T) - 1).max() > 0.1


def test_orthogonal_feature_lengths_follow_a_gaussian_vectors():
    lengths = np.linalg.norm(orthogonal_features(4000, 8, seed=0), axis=1)
    assert abs((lengths**2).mean() - 8) < 0.3  # E‖ω‖² = d for ω ~ N(0, I_d)
    assert lengths.std() > 0.5  # not all rescaled to one length


def test_performer_features_bad_shapes_are_named():
    with pytest.raises(ValueError, match=r"omega must have shape \(m, d\) = \(m, 4\) \(the same d as X\)"):
        performer_features(np.ones((3, 4)), np.ones((5, 6)))


def test_performer_weights_are_positive_rows_summing_to_one(numpy_qkv):
    Q, K, V = numpy_qkv(scale=3.0)  # large scores: the stabiliser must keep exp finite
    out, weights = performer_attention(Q, K, V, 32, seed=0, return_weights=True)
    assert np.all(weights > 0) and np.isfinite(out).all()
    np.testing.assert_allclose(weights.sum(1), 1.0, **TOL)
    np.testing.assert_allclose(weights @ V, out, rtol=1e-9, atol=1e-12)


def test_performer_is_deterministic_with_a_seed(numpy_qkv):
    Q, K, V = numpy_qkv()
    np.testing.assert_array_equal(performer_attention(Q, K, V, 16, seed=4),
                                  performer_attention(Q, K, V, 16, seed=4))
    assert not np.array_equal(performer_attention(Q, K, V, 16, seed=4),
                              performer_attention(Q, K, V, 16, seed=5))


def test_orthogonal_features_are_orthogonal_within_a_block():
    omega = orthogonal_features(20, 8, seed=0)
    assert omega.shape == (20, 8)
    gram = omega[:8] @ omega[:8].T
    np.testing.assert_allclose(gram - np.diag(np.diag(gram)), 0, atol=1e-10)


@pytest.mark.parametrize("m", [0, -1])
def test_performer_bad_m_is_named(numpy_qkv, m):
    Q, K, V = numpy_qkv()
    with pytest.raises(ValueError, match="m .*must be a whole number >= 1"):
        performer_attention(Q, K, V, m)


# ---------------------------------------------------------------- LSH (Reformer)


def test_lsh_with_one_bucket_is_full_shared_qk_attention_without_the_diagonal(numpy_qkv,
                                                                              torch_masked):
    Q, _, V = numpy_qkv()
    expected = torch_masked(Q, unit_keys(Q), V, ~np.eye(24, dtype=bool))
    np.testing.assert_allclose(lsh_attention(Q, V, n_buckets=1), expected, **TOL)


def test_lsh_token_attends_to_itself_only_when_nothing_else_is_in_reach(numpy_qkv):
    Q, _, V = numpy_qkv(n=24)
    mask = lsh_pattern(Q, 4, 1, seed=2, chunk=2)
    others = mask & ~np.eye(24, dtype=bool)
    np.testing.assert_array_equal(mask.diagonal(), ~others.any(axis=1))
    assert mask.diagonal().any()  # this seed leaves one token alone in its bucket and chunk
    _, weights = lsh_attention(Q, V, 4, 1, seed=2, chunk=2, return_weights=True)
    np.testing.assert_allclose(weights.diagonal(), mask.diagonal().astype(float), **TOL)
    np.testing.assert_allclose(lsh_attention(Q[:1], V[:1], 1), V[:1], **TOL)  # n = 1


@pytest.mark.parametrize("n_hashes", [1, 2, 4])
def test_lsh_is_exact_softmax_over_its_pattern(numpy_qkv, torch_masked, n_hashes):
    Q, _, V = numpy_qkv(n=32)
    mask = lsh_pattern(Q, 4, n_hashes, seed=2, chunk=4)
    out, weights = lsh_attention(Q, V, 4, n_hashes, seed=2, chunk=4, return_weights=True)
    np.testing.assert_allclose(out, torch_masked(Q, unit_keys(Q), V, mask), **TOL)
    assert np.all(weights[~mask] == 0)
    np.testing.assert_allclose(weights.sum(1), 1.0, **TOL)
    others = mask & ~np.eye(32, dtype=bool)
    np.testing.assert_array_equal(mask.diagonal(), ~others.any(axis=1))  # itself only if alone


def test_more_hash_rounds_keep_more_pairs(numpy_qkv):
    Q, _, _ = numpy_qkv(n=32)
    counts = [lsh_pattern(Q, 4, h, seed=0, chunk=4).sum() for h in (1, 2, 4)]
    assert counts[0] < counts[1] < counts[2]


def test_lsh_buckets_put_opposite_directions_apart_and_are_seeded(numpy_qkv):
    x = np.array([[1.0, 0.2], [-1.0, -0.2]])
    b = lsh_buckets(x, 2, n_hashes=5, seed=0)
    assert b.shape == (5, 2) and np.all(b[:, 0] != b[:, 1])
    Q, _, V = numpy_qkv(n=32)
    np.testing.assert_array_equal(lsh_attention(Q, V, 4, 2, seed=1),
                                  lsh_attention(Q, V, 4, 2, seed=1))


def test_lsh_bad_bucket_counts_are_named(numpy_qkv):
    Q, _, V = numpy_qkv()
    with pytest.raises(ValueError, match="n_buckets must be 1 or even"):
        lsh_attention(Q, V, 3)
    with pytest.raises(ValueError, match="n_buckets=16 does not divide n=24"):
        lsh_attention(Q, V, 16)
    with pytest.raises(ValueError, match="chunk=5 must divide n=24"):
        lsh_attention(Q, V, 4, chunk=5)


def test_self_attention_approximations_need_as_many_keys_as_queries():
    Q, K, V = np.ones((4, 2)), np.ones((5, 2)), np.ones((5, 2))
    with pytest.raises(ValueError, match=r"K must have shape \(n, d_k\) = \(4, d_k\) \(self-attention"):
        linformer_attention(Q, K, V, k=2)
    with pytest.raises(ValueError, match=r"n \(the number of tokens, Q's first axis\) must be a whole number >= 1, got 0"):
        performer_attention(np.ones((0, 2)), np.ones((0, 2)), np.ones((0, 2)), m=4)
