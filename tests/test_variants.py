"""bertlib.paper.variants: each sparse pattern against exact masked attention, its limits, errors."""

import tracemalloc

import numpy as np
import pytest

from bertlib.paper.approximations import linformer_attention, performer_attention, relative_error
from bertlib.paper.attention import scaled_dot_product_attention
from bertlib.paper.variants import (
    block_sparse_attention,
    block_sparse_pattern,
    sliding_window_attention,
    sliding_window_attention_plain,
    sliding_window_pattern,
)

TOL = dict(rtol=1e-10, atol=1e-12)  # float64 on both sides: agreement to rounding


# ---------------------------------------------------------------- sliding window


@pytest.mark.parametrize("w, global_idx", [(2, ()), (4, (0,)), (6, (0, 5, 23)), (10, (3, 3, 7))])
def test_sliding_window_equals_torch_attention_with_its_pattern(numpy_qkv, torch_masked, w,
                                                                global_idx):
    Q, K, V = numpy_qkv()
    mask = sliding_window_pattern(24, w, global_idx)
    out, weights = sliding_window_attention(Q, K, V, w, global_idx, return_weights=True)
    np.testing.assert_allclose(out, torch_masked(Q, K, V, mask), **TOL)
    assert np.all(weights[~mask] == 0)
    np.testing.assert_allclose(weights.sum(1), 1.0, **TOL)
    np.testing.assert_allclose(weights @ V, out, **TOL)


@pytest.mark.parametrize("n, w, global_idx", [
    (24, 2, ()), (24, 6, (0, 23)), (23, 4, (5,)), (9, 40, (1,)), (31, 10, (0, 3, 30)),
])
def test_plain_sliding_window_twin_equals_fast_one(numpy_qkv, n, w, global_idx):
    # float64 both: the same softmax over the same keys, summed in a different order, so they
    # agree to float64 rounding (TOL leaves ~1e4 ulps)
    Q, K, V = numpy_qkv(n=n, seed=n + w)
    plain = sliding_window_attention_plain(Q, K, V, w, global_idx)
    np.testing.assert_allclose(plain, sliding_window_attention(Q, K, V, w, global_idx), **TOL)
    # the twin writes its window N(i) out by hand: it is attention.band's (with the globals)
    pattern = sliding_window_pattern(n, w, global_idx)  # band(i, i, w/2) | global rows and columns
    np.testing.assert_allclose(plain, scaled_dot_product_attention(Q, K, V, pattern)[0], **TOL)


def test_plain_sliding_window_twin_rejects_odd_window(numpy_qkv):
    Q, K, V = numpy_qkv()
    with pytest.raises(ValueError, match="even"):
        sliding_window_attention_plain(Q, K, V, 5)


def test_window_covering_the_sequence_equals_full_attention(numpy_qkv):
    Q, K, V = numpy_qkv(n=9)
    full, _ = scaled_dot_product_attention(Q, K, V)
    for w in (16, 18, 1000):  # w/2 >= n - 1 = 8: every window holds all 9 tokens
        np.testing.assert_allclose(sliding_window_attention(Q, K, V, w), full, **TOL)
    assert not np.allclose(sliding_window_attention(Q, K, V, 14), full)  # w/2 = 7 misses one


def test_window_rows_hold_w_plus_one_keys_away_from_the_edges():
    mask = sliding_window_pattern(20, 6)
    assert mask[3:17].sum(1).tolist() == [7] * 14
    assert mask[0].sum() == 4 and mask[19].sum() == 4


def test_global_tokens_see_everything_and_are_seen_by_everything(numpy_qkv):
    Q, K, V = numpy_qkv(n=16)
    _, weights = sliding_window_attention(Q, K, V, 2, global_idx=[0, 9], return_weights=True)
    assert np.all(weights[[0, 9]] > 0)
    assert np.all(weights[:, [0, 9]] > 0)
    assert weights[4, 12] == 0  # an ordinary pair far apart stays out


def test_sliding_window_memory_grows_with_n_times_w_not_n_squared(numpy_qkv):
    def peak(n):
        Q, K, V = (x.astype(np.float32) for x in numpy_qkv(n=n, d=16))
        tracemalloc.start()
        sliding_window_attention(Q, K, V, 32)
        _, peak_bytes = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return peak_bytes

    small, large = peak(2048), peak(4096)
    assert large / small < 2.5  # doubling n about doubles the memory (n² would quadruple it)
    assert large < 4096 * 4096 * 4 / 8  # far below one float32 n×n matrix (64 MiB)


@pytest.mark.parametrize("w, why", [(0, r"w \(the window\) must be a whole number >= 1, got 0"),
                                    (-2, "must be a whole number >= 1, got -2"),
                                    (5, "w must be even: .* w/2 .* use 4 or 6"),
                                    (3, "use 2 or 4")])
def test_bad_window_says_why(numpy_qkv, w, why):
    Q, K, V = numpy_qkv()
    with pytest.raises(ValueError, match=why):
        sliding_window_attention(Q, K, V, w)


def test_global_index_that_is_not_a_position_is_named(numpy_qkv):
    Q, K, V = numpy_qkv()
    with pytest.raises(TypeError, match=r"global_idx\[0\] must be a whole number"):
        sliding_window_attention(Q, K, V, 4, global_idx=[0.5])


def test_window_must_be_a_whole_number():
    with pytest.raises(TypeError, match="whole number"):
        sliding_window_pattern(8, 2.5)


@pytest.mark.parametrize("bad", [[24], [-1], [0, 30]])
def test_global_index_out_of_range_is_named(numpy_qkv, bad):
    Q, K, V = numpy_qkv()
    with pytest.raises(ValueError, match=r"global_idx\[\d\] must be a whole number in 0\.\.23 "
                                         r"\(token positions of n = 24 tokens\)"):
        sliding_window_attention(Q, K, V, 4, global_idx=bad)


# ---------------------------------------------------------------- block-sparse (BigBird)


def test_block_sparse_equals_torch_attention_with_its_pattern(numpy_qkv, torch_masked):
    Q, K, V = numpy_qkv(n=32)
    mask = block_sparse_pattern(32, 4, n_random=2, global_blocks=1, seed=5)
    out, weights = block_sparse_attention(Q, K, V, 4, 2, 1, seed=5, return_weights=True)
    np.testing.assert_allclose(out, torch_masked(Q, K, V, mask), **TOL)
    assert np.all(weights[~mask] == 0)
    np.testing.assert_allclose(weights.sum(1), 1.0, **TOL)


@pytest.mark.parametrize("n_random, global_blocks", [(0, 0), (1, 1), (2, 2), (3, 1)])
def test_block_sparse_rows_have_the_stated_counts(n_random, global_blocks):
    n, block = 48, 4
    nb = n // block
    mask = block_sparse_pattern(n, block, n_random, global_blocks, seed=1)
    for qb in range(nb):
        window = {b for b in (qb - 1, qb, qb + 1) if 0 <= b < nb} - set(range(global_blocks))
        expected = n if qb < global_blocks else block * (len(window) + global_blocks + n_random)
        assert mask[qb * block:(qb + 1) * block].sum(1).tolist() == [expected] * block
    assert np.all(mask[:, : block * global_blocks])  # every token reads the global blocks


def test_block_sparse_is_deterministic_with_a_seed_and_varies_without():
    a = block_sparse_pattern(64, 4, 2, 1, seed=7)
    assert np.array_equal(a, block_sparse_pattern(64, 4, 2, 1, seed=7))
    assert any(not np.array_equal(a, block_sparse_pattern(64, 4, 2, 1, seed=s)) for s in range(8))


def test_block_not_dividing_n_says_how_to_fix(numpy_qkv):
    Q, K, V = numpy_qkv(n=10)
    with pytest.raises(ValueError, match=r"n=10 is not a multiple of block=4.*pad .* to 12"):
        block_sparse_attention(Q, K, V, 4)


def test_block_sparse_bad_counts_are_named():
    with pytest.raises(ValueError, match="n_random=9 is too many"):
        block_sparse_pattern(32, 4, n_random=9)
    with pytest.raises(ValueError, match=r"global_blocks must be a whole number in 0\.\.8"):
        block_sparse_pattern(32, 4, global_blocks=9)
    with pytest.raises(ValueError, match="block must be a whole number >= 1"):
        block_sparse_pattern(32, 0)


# ---------------------------------------------------------------- shared input checks


def test_bad_arrays_are_named(numpy_qkv):
    Q, K, V = numpy_qkv()
    with pytest.raises(ValueError, match="one head, a 2-D"):
        sliding_window_attention(Q[None], K[None], V[None], 4)
    with pytest.raises(ValueError, match="Q and K must share d_k"):
        performer_attention(Q, K[:, :4], V, 8)
    bad = Q.copy()
    bad[2, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        linformer_attention(bad, K, V, 4)
    with pytest.raises(ValueError, match="approx and exact must have the same shape"):
        relative_error(Q, Q[:3])
