"""bertlib.paper.attention against torch's scaled_dot_product_attention, and its errors."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from bertlib.checks import check_qkv_shapes
from bertlib.paper.attention import (
    attention_scale,
    causal_mask,
    check_one_head,
    cosine,
    key_mask,
    multi_head_attention,
    padding_mask,
    scaled_dot_product_attention,
    sliding_window_blocks,
    sliding_window_plan,
    softmax,
)

# float64 on both sides (eps 2.2e-16); sums of d <= 8 terms, a softmax and one more product:
# ~1e-15 relative -> RTOL; ATOL for entries near 0. Elsewhere in this file assert_allclose's
# default rtol 1e-7 is far above float64 rounding.
RTOL, ATOL = 1e-10, 1e-12


def torch_sdpa(Q, K, V, mask=None):
    t = [torch.from_numpy(np.ascontiguousarray(a)) for a in (Q, K, V)]
    m = None if mask is None else torch.from_numpy(np.ascontiguousarray(mask))
    return F.scaled_dot_product_attention(*t, attn_mask=m).numpy()


@pytest.mark.parametrize("shape", [(5, 3), (2, 7, 4), (2, 3, 6, 8), (1, 1, 1)])
def test_matches_torch_sdpa_without_mask(shape):
    rng = np.random.default_rng(0)
    Q, K, V = (rng.normal(size=shape) for _ in range(3))
    out, w = scaled_dot_product_attention(Q, K, V)
    np.testing.assert_allclose(out, torch_sdpa(Q, K, V), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(w.sum(-1), 1.0, rtol=0, atol=1e-12)  # n <= 7 terms: 2e-15


def test_cross_attention_shapes_and_values():
    rng = np.random.default_rng(1)
    Q = rng.normal(size=(3, 4, 8))
    K = rng.normal(size=(3, 9, 8))
    V = rng.normal(size=(3, 9, 5))
    out, w = scaled_dot_product_attention(Q, K, V)
    assert out.shape == (3, 4, 5) and w.shape == (3, 4, 9)
    np.testing.assert_allclose(out, torch_sdpa(Q, K, V), rtol=RTOL, atol=ATOL)


def test_matches_torch_with_causal_mask():
    rng = np.random.default_rng(2)
    Q, K, V = (rng.normal(size=(2, 6, 4)) for _ in range(3))
    m = causal_mask(6)
    out, w = scaled_dot_product_attention(Q, K, V, mask=m)
    np.testing.assert_allclose(out, torch_sdpa(Q, K, V, m), rtol=RTOL, atol=ATOL)
    assert np.all(w[:, np.triu_indices(6, 1)[0], np.triu_indices(6, 1)[1]] == 0)


def test_matches_torch_with_padding_mask_and_head_axis():
    rng = np.random.default_rng(3)
    B, H, n, d = 3, 2, 5, 4
    Q, K, V = (rng.normal(size=(B, H, n, d)) for _ in range(3))
    m = padding_mask([5, 3, 1])[:, None]  # (B, 1, 1, n)
    out, w = scaled_dot_product_attention(Q, K, V, mask=m)
    np.testing.assert_allclose(out, torch_sdpa(Q, K, V, np.broadcast_to(m, (B, H, n, n))),
                               rtol=RTOL, atol=ATOL)
    assert np.all(w[1, :, :, 3:] == 0) and np.all(w[2, :, :, 1:] == 0)


def test_fully_masked_row_gives_zero_weights_and_output(recwarn):
    rng = np.random.default_rng(4)
    Q, K, V = (rng.normal(size=(4, 3)) for _ in range(3))
    mask = np.ones((4, 4), bool)
    mask[2] = False
    out, w = scaled_dot_product_attention(Q, K, V, mask=mask)
    assert np.all(w[2] == 0) and np.all(out[2] == 0)
    assert not np.isnan(out).any()
    np.testing.assert_allclose(w[[0, 1, 3]].sum(-1), 1.0)
    assert len(recwarn) == 0


def test_large_scores_do_not_overflow():
    x = np.array([[1e4, -1e4, 0.0], [-1e4, -1e4, -1e4]])
    s = softmax(x)
    assert np.isfinite(s).all()
    np.testing.assert_allclose(s[0], [1, 0, 0])
    np.testing.assert_allclose(s[1], [1 / 3] * 3)
    Q = np.array([[100.0, 100.0]])
    K = np.array([[100.0, 100.0], [-100.0, -100.0]])
    out, w = scaled_dot_product_attention(Q, K, np.eye(2))
    assert np.isfinite(w).all() and w[0, 0] == pytest.approx(1.0)


def test_softmax_rows_sum_to_one_and_axis():
    x = np.random.default_rng(5).normal(size=(3, 4))
    np.testing.assert_allclose(softmax(x, axis=0).sum(0), 1.0)
    np.testing.assert_allclose(softmax(x).sum(1), 1.0)


def test_custom_scale_none_vs_explicit():
    rng = np.random.default_rng(6)
    Q, K, V = (rng.normal(size=(4, 16)) for _ in range(3))
    _, w_default = scaled_dot_product_attention(Q, K, V)
    _, w_explicit = scaled_dot_product_attention(Q, K, V, scale=1 / 4)
    _, w_flat = scaled_dot_product_attention(Q, K, V, scale=0.0)
    np.testing.assert_allclose(w_default, w_explicit)
    np.testing.assert_allclose(w_flat, 1 / 4)


def test_empty_sequence_gives_empty_output():
    out, w = scaled_dot_product_attention(np.zeros((0, 4)), np.zeros((0, 4)), np.zeros((0, 2)))
    assert out.shape == (0, 2) and w.shape == (0, 0)
    out, w = scaled_dot_product_attention(np.ones((2, 4)), np.zeros((0, 4)), np.zeros((0, 2)))
    assert out.shape == (2, 2) and np.all(out == 0) and w.shape == (2, 0)


def test_causal_and_padding_masks():
    np.testing.assert_array_equal(causal_mask(3), [[1, 0, 0], [1, 1, 0], [1, 1, 1]])
    np.testing.assert_array_equal(padding_mask([2, 0], n=3)[:, 0], [[1, 1, 0], [0, 0, 0]])
    np.testing.assert_array_equal(padding_mask(np.array([[1, 0]]))[:, 0], [[True, False]])


# --- bad input -> clear errors -------------------------------------------------------------

def test_mismatched_d_k_names_both_shapes():
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(3, 5\)"):
        scaled_dot_product_attention(np.ones((3, 4)), np.ones((3, 5)), np.ones((3, 2)))


def test_mismatched_n_k_names_both_shapes():
    with pytest.raises(ValueError, match=r"n_k.*\(3, 4\).*\(2, 2\)"):
        scaled_dot_product_attention(np.ones((3, 4)), np.ones((3, 4)), np.ones((2, 2)))


def test_leading_axes_of_q_k_and_v_must_broadcast_and_are_named():
    Q, K, V = np.ones((2, 3, 4)), np.ones((2, 3, 4)), np.ones((2, 3, 2))
    with pytest.raises(ValueError, match=r"^the leading \(batch, head\) axes of Q, K, V do not "
                                         r"broadcast: Q has shape \(2, 3, 4\), K has shape "
                                         r"\(3, 3, 4\), V has shape \(2, 3, 2\)$"):
        scaled_dot_product_attention(Q, np.ones((3, 3, 4)), V)  # numpy's own message before
    with pytest.raises(ValueError, match=r"axes of Q, K, V do not broadcast: .* V has shape "
                                         r"\(3, 3, 2\)"):
        scaled_dot_product_attention(Q, K, np.ones((3, 3, 2)))  # V was never checked before
    assert check_qkv_shapes(Q.shape, (1, 3, 4), (5, 1, 3, 2)) == (5, 2)  # the broadcast lead


def test_mask_wrong_shape():
    with pytest.raises(ValueError, match="does not broadcast"):
        scaled_dot_product_attention(np.ones((3, 4)), np.ones((3, 4)), np.ones((3, 2)),
                                     mask=np.ones((2, 3), bool))


def test_mask_wrong_dtype():
    with pytest.raises(TypeError, match="boolean"):
        scaled_dot_product_attention(np.ones((3, 4)), np.ones((3, 4)), np.ones((3, 2)),
                                     mask=np.ones((3, 3)))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("which", ["Q", "K", "V"])
def test_nan_or_inf_inputs_raise(bad, which):
    arrs = {k: np.ones((3, 4)) for k in "QKV"}
    arrs[which][1, 2] = bad
    with pytest.raises(ValueError, match=f"{which} contains 1 NaN/inf.*\\(1, 2\\)"):
        scaled_dot_product_attention(arrs["Q"], arrs["K"], arrs["V"])


def test_one_dimensional_input_raises():
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        scaled_dot_product_attention(np.ones(4), np.ones((3, 4)), np.ones((3, 4)))


def test_non_numeric_input_raises():
    with pytest.raises(TypeError):
        scaled_dot_product_attention([["a", "b"]], np.ones((1, 2)), np.ones((1, 2)))


def test_bad_scale_and_bad_mask_arguments():
    with pytest.raises(ValueError, match="scale"):
        scaled_dot_product_attention(np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 2)),
                                     scale=float("nan"))
    with pytest.raises(ValueError, match="n must be"):
        causal_mask(-1)
    with pytest.raises(ValueError, match="lengths"):
        padding_mask([2, -1])
    with pytest.raises(ValueError, match="shorter"):
        padding_mask([4], n=2)
    with pytest.raises(ValueError, match="NaN"):
        softmax(np.array([np.nan, 1.0]))


def test_mask_that_would_enlarge_the_scores_is_rejected():
    # (2, 3, 3) broadcasts WITH the scores' (3, 3) but not TO it: one set of scores, two masks
    with pytest.raises(ValueError, match=r"\(2, 3, 3\) does not broadcast .*\(3, 3\)"):
        scaled_dot_product_attention(np.ones((3, 4)), np.ones((3, 4)), np.ones((3, 2)),
                                     mask=np.ones((2, 3, 3), bool))


def test_zero_width_queries_and_keys_are_rejected_by_every_entry_point():
    """One rule for d_k = 0 (checks.check_qkv_shapes): every attention refuses it by name."""
    from bertlib.paper.kernels import banded_attention, naive_attention, tiled_attention

    message = r"d_k, the last axis of Q and K, must be a whole number >= 1, got 0"
    Q, K, V = np.ones((3, 0)), np.ones((3, 0)), np.ones((3, 2))
    Qt, Kt, Vt = (torch.from_numpy(x) for x in (Q, K, V))
    for attend in (lambda: scaled_dot_product_attention(Q, K, V), lambda: check_one_head(Q, K, V),
                   lambda: naive_attention(Qt, Kt, Vt), lambda: tiled_attention(Qt, Kt, Vt),
                   lambda: banded_attention(Qt, Kt, Vt, 2)):
        with pytest.raises(ValueError, match=message):
            attend()
    with pytest.raises(ValueError, match=r"d, the last axis of X and X_kv, must be a whole "
                                         r"number >= 1, got 0"):
        multi_head_attention(np.ones((3, 0)), *[np.ones((0, 0))] * 4, h=1)


def test_softmax_where_excludes_entries_and_must_fit_x():
    x = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    where = np.array([True, False, True])  # broadcasts over the rows
    s = softmax(x, where=where)
    np.testing.assert_allclose(s[:, 1], 0.0)
    np.testing.assert_allclose(s[0, [0, 2]], softmax(np.array([1.0, 3.0])), rtol=1e-15)
    np.testing.assert_array_equal(softmax(x, where=np.zeros(3, bool)), 0.0)
    with pytest.raises(ValueError):
        softmax(x, where=np.ones((3, 3), bool))


# ---------------------------------------------------------------- the one scale, the one-head check


def test_attention_scale_is_one_over_root_d_k_or_the_given_scale():
    assert attention_scale(64) == 0.125 and attention_scale(2) == 1 / np.sqrt(2)
    assert attention_scale(16, scale=0.5) == 0.5 and attention_scale(16, scale=0) == 0.0
    with pytest.raises(ValueError, match=r"d_k must be a whole number >= 1, got 0"):
        attention_scale(0)  # one rule with every attention: d_k >= 1 (checks.check_qkv_shapes)
    assert type(attention_scale(3)) is float  # keeps float32 scores float32
    Q = np.ones((2, 3), dtype=np.float32)
    assert (Q * attention_scale(3)).dtype == np.float32


def test_the_scores_dtype_is_what_the_docstring_says():
    # the default s is float64 (float32 Q, K give float64 weights: notebook 05 measures that);
    # a given scale is a Python float and keeps float32 float32
    Q = np.ones((2, 3), dtype=np.float32)
    assert scaled_dot_product_attention(Q, Q, Q)[1].dtype == np.float64
    assert scaled_dot_product_attention(Q, Q, Q, scale=0.5)[1].dtype == np.float32
    assert scaled_dot_product_attention(Q, Q, Q, scale=np.float64(0.5))[1].dtype == np.float32


def test_key_mask_turns_padding_flags_into_a_key_mask_once():
    flags = np.array([[1, 1, 0], [1, 0, 0]])
    np.testing.assert_array_equal(key_mask(flags), padding_mask(flags))
    assert key_mask(flags).shape == (2, 1, 3) and key_mask([1, 0]).shape == (1, 2)
    np.testing.assert_array_equal(key_mask(np.ones((2, 2, 4)))[..., 0, :], True)
    with pytest.raises(ValueError, match="at least one real token"):
        key_mask([[1, 1], [0, 0]], real_in_each_row=True)
    with pytest.raises(ValueError, match="0/1 or bool"):
        key_mask([[2, 1]], "flags")


@pytest.mark.parametrize("args, error, words", [
    ((-1,), ValueError, "d_k"), ((2.5,), (TypeError, ValueError), "d_k"),
    ((4, -0.1), ValueError, "scale"), ((4, "big"), TypeError, "scale")])
def test_attention_scale_rejects_bad_input(args, error, words):
    with pytest.raises(error, match=words):
        attention_scale(*args)


def test_check_one_head_casts_to_one_dtype_and_names_the_mistake():
    Q = np.ones((3, 2), dtype=np.float32)
    q, k, v = check_one_head(Q, np.ones((3, 2)), np.ones((3, 5)))
    assert q.dtype == k.dtype == v.dtype == np.float64 and v.shape == (3, 5)
    with pytest.raises(ValueError, match="2 dimensions"):
        check_one_head(np.ones((1, 3, 2)), np.ones((3, 2)), np.ones((3, 2)))
    with pytest.raises(ValueError, match="self-attention"):
        check_one_head(np.ones((3, 2)), np.ones((4, 2)), np.ones((4, 2)))
    with pytest.raises(ValueError, match="d_k"):
        check_one_head(np.ones((3, 2)), np.ones((3, 4)), np.ones((3, 2)))


@pytest.mark.parametrize("n, half, block", [(7, 2, 2), (5, 1, 1), (6, 3, 3), (4, 0, 1), (3, 2, 3)])
def test_sliding_window_blocks_keep_exactly_the_band(n, half, block):
    keys, keep = sliding_window_blocks(n, half, block)
    n_blocks = -(-n // block)
    assert keys.shape == (n_blocks, block + 2 * half) and keep.shape == (n_blocks, block, keys.shape[1])
    band = np.zeros((n_blocks * block, n), dtype=bool)  # rebuilt from the blocks
    for t in range(n_blocks):
        for r in range(block):
            band[t * block + r, keys[t][keep[t, r]]] = True
    i = np.arange(n)
    np.testing.assert_array_equal(band[:n], np.abs(i[:, None] - i[None, :]) <= half)
    assert keep.sum(axis=-1).max() <= 2 * half + 1  # a row keeps at most w + 1 keys


@pytest.mark.parametrize("w, n", [(4, 7), (2, 5), (6, 6), (40, 3), (2, 1)])
def test_sliding_window_plan_pads_so_each_slab_holds_its_keys(w, n):
    """The padding the numpy and torch windows both take: slab t of the padded K (stride B) is
    K at keys[t] (zeros off the sequence), and the padded Q has whole blocks of real queries."""
    plan = sliding_window_plan(w, n)
    B, (n_blocks, slab) = plan.block, plan.keys.shape
    assert plan.half == min(w // 2, n - 1) and B == max(plan.half, 1) and slab == B + 2 * plan.half
    K = np.arange(1.0, n + 1)  # K[j] = j + 1, so a zero is padding
    padded = np.pad(K, plan.key_pad)
    for t in range(n_blocks):
        real = (plan.keys[t] >= 0) & (plan.keys[t] < n)
        want = np.where(real, K[np.clip(plan.keys[t], 0, n - 1)], 0.0)
        np.testing.assert_array_equal(padded[t * B:t * B + slab], want)
    Q = np.pad(K, plan.query_pad)
    assert Q.size == n_blocks * B and Q.size - n < B  # whole blocks, less than one block of padding
    np.testing.assert_array_equal(Q[:n], K)


def test_sliding_window_blocks_rejects_bad_sizes():
    with pytest.raises(ValueError, match="block"):
        sliding_window_blocks(4, 1, 0)
    with pytest.raises(ValueError, match="half"):
        sliding_window_blocks(4, -1, 1)


def test_band_and_window_half_are_the_sliding_window():
    from bertlib.paper.attention import band, window_half
    i = np.arange(5)
    assert np.array_equal(band(i, i, 1), np.abs(i[:, None] - i[None, :]) <= 1)
    assert band(np.arange(2), np.arange(4) - 1, 1).tolist() == [
        [True, True, True, False], [False, True, True, True]]  # a slab's keys start at −half
    assert window_half(4, 10) == 2 and window_half(40, 10) == 9  # capped at n − 1
    with pytest.raises(ValueError, match="must be even"):
        window_half(3, 10)


def test_cosine_is_one_formula_with_one_zero_vector_rule():
    assert cosine(np.array([1.0, 0.0]), np.array([0.0, 2.0])) == 0.0
    assert cosine([1.0, 2.0], [2.0, 4.0]) == pytest.approx(1.0)
    assert cosine([1.0, 0.0], [-3.0, 0.0]) == -1.0 and isinstance(cosine([1.0], [2.0]), float)
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(3, 1, 8)), rng.normal(size=(4, 8))
    got = cosine(a, b)  # the leading axes broadcast: (3, 1) with (4,) -> (3, 4)
    assert got.shape == (3, 4)
    # bit for bit the formula hf.importance and paper.family wrote before they called this one
    assert np.array_equal(got, (a * b).sum(-1) / (np.linalg.norm(a, axis=-1)
                                                  * np.linalg.norm(b, axis=-1)))
    assert got[1, 2] == pytest.approx(a[1, 0] @ b[2] / np.linalg.norm(a[1, 0]) / np.linalg.norm(b[2]),
                                      rel=1e-14)
    # torch's twin (hf.finetune.pair_cosines trains through it) agrees away from the zero vector,
    # where it clamps the norms at eps and gives 0 instead of an error
    torch_cos = F.cosine_similarity(torch.from_numpy(a), torch.from_numpy(b), dim=-1).numpy()
    np.testing.assert_allclose(got, torch_cos, rtol=1e-12)
    assert F.cosine_similarity(torch.zeros(2), torch.ones(2), dim=0).item() == 0.0
    with pytest.raises(ValueError, match=r"^u has an all-zero vector: it has no direction, so "):
        cosine(np.zeros(2), np.ones(2))
    with pytest.raises(ValueError, match=r"^v has an all-zero vector at \(1,\): "):
        cosine(np.ones((2, 2)), np.array([[1.0, 1.0], [0.0, 0.0]]))
    with pytest.raises(ValueError, match=r"^B has an all-zero vector"):
        cosine(np.ones(2), np.zeros(2), ("A", "B"))
    with pytest.raises(ValueError, match=r"v must have shape \(\.\.\., d\) = \(\.\.\., 2\) "
                                         r"\(d from u's last axis\), got \(3,\)"):
        cosine(np.ones(2), np.ones(3))
