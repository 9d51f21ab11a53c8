"""bertlib.paper.kernels: naive, tiled (the plain twin and the fast one) and banded attention in torch."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from bertlib.lab.cost import fit_exponent, measure
from bertlib.paper.attention import scaled_dot_product_attention
from bertlib.paper.kernels import (
    banded_attention,
    naive_attention,
    tiled_attention,
    tiled_attention_plain,
)

# --------------------------------------------------------------------------- kernels


@pytest.mark.parametrize("shape, block", [
    ((1, 1, 300, 64), 64), ((2, 3, 130, 16), 32), ((50, 8), 7), ((1, 1, 17, 4), 256),
])
def test_tiled_equals_sdpa_float32(torch_qkv, shape, block):
    Q, K, V = torch_qkv(shape)
    out = tiled_attention(Q, K, V, block=block)
    ref = F.scaled_dot_product_attention(Q, K, V)
    assert out.shape == ref.shape
    assert (out - ref).abs().max().item() <= 1e-5


def test_tiled_equals_numpy_reference_float64(torch_qkv):
    Q, K, V = torch_qkv((2, 40, 8), seed=3, dtype=torch.float64)
    out = tiled_attention(Q, K, V, block=6)
    ref, _ = scaled_dot_product_attention(Q.numpy(), K.numpy(), V.numpy())
    np.testing.assert_allclose(out.numpy(), ref, rtol=0, atol=1e-12)


def test_tiled_cross_attention_and_d_v():
    gen = torch.Generator().manual_seed(4)
    Q = torch.randn(3, 9, 8, generator=gen, dtype=torch.float64)
    K = torch.randn(3, 20, 8, generator=gen, dtype=torch.float64)
    V = torch.randn(3, 20, 5, generator=gen, dtype=torch.float64)
    out = tiled_attention(Q, K, V, block=4)
    ref, _ = scaled_dot_product_attention(Q.numpy(), K.numpy(), V.numpy())
    assert out.shape == (3, 9, 5)
    np.testing.assert_allclose(out.numpy(), ref, rtol=0, atol=1e-12)


def test_tiled_with_causal_and_padding_masks(torch_qkv):
    Q, K, V = torch_qkv((2, 2, 37, 8), seed=5, dtype=torch.float64)
    causal = torch.tril(torch.ones(37, 37, dtype=torch.bool))
    out = tiled_attention(Q, K, V, block=5, mask=causal)
    ref = F.scaled_dot_product_attention(Q, K, V, attn_mask=causal)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-12)
    lengths = torch.tensor([30, 11])
    padding = (torch.arange(37) < lengths[:, None])[:, None, None, :]  # (batch, 1, 1, n)
    out = tiled_attention(Q, K, V, block=8, mask=padding)
    ref = F.scaled_dot_product_attention(Q, K, V, attn_mask=padding)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-12)


@pytest.mark.parametrize("fn", [tiled_attention_plain, tiled_attention])
def test_tiled_fully_masked_row_gives_zeros_like_both_references(torch_qkv, fn):
    # the decision: a query that may attend to nothing gets zeros (no NaN, no error), as
    # bertlib.paper.attention's reference and torch's own attention give
    Q, K, V = torch_qkv((6, 4), seed=6, dtype=torch.float64)
    mask = torch.ones(6, 6, dtype=torch.bool)
    mask[2] = False  # query 2 may attend to nothing
    mask[4, :3] = False  # query 4 only to keys in the second block
    out = fn(Q, K, V, block=3, mask=mask)
    ref, _ = scaled_dot_product_attention(Q.numpy(), K.numpy(), V.numpy(), mask=mask.numpy())
    assert not torch.isnan(out).any()
    assert torch.equal(out[2], torch.zeros(4, dtype=torch.float64))
    np.testing.assert_allclose(out.numpy(), ref, rtol=0, atol=1e-12)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(Q, K, V, attn_mask=mask),
                               rtol=0, atol=1e-12)


def test_tiled_memory_is_linear_and_naive_quadratic(torch_qkv):
    def setup(n):
        return torch_qkv((1, 1, n, 16))

    sizes = [256, 512, 1024]
    tiled = measure(lambda Q, K, V: tiled_attention(Q, K, V, block=64), sizes, setup=setup,
                    repeats=1, warmup=0, progress=False)
    naive = measure(naive_attention, sizes, setup=setup, repeats=1, warmup=0, progress=False)
    assert fit_exponent(sizes, [m.peak_bytes for m in tiled]).slope == pytest.approx(1, abs=0.01)
    assert fit_exponent(sizes, [m.peak_bytes for m in naive]).slope == pytest.approx(2, abs=0.01)
    assert tiled[-1].peak_bytes * 10 < naive[-1].peak_bytes


def test_naive_attention_equals_sdpa(torch_qkv):
    Q, K, V = torch_qkv((2, 3, 50, 16), seed=7)
    ref = F.scaled_dot_product_attention(Q, K, V)
    assert (naive_attention(Q, K, V) - ref).abs().max().item() <= 1e-5


@pytest.mark.parametrize("fn", [tiled_attention, naive_attention])
def test_kernels_reject_mismatched_shapes(torch_qkv, fn):
    Q, K, V = torch_qkv((5, 8))
    with pytest.raises(ValueError, match=r"Q and K must share d_k.*\(5, 8\).*\(5, 4\)"):
        fn(Q, K[:, :4], V)
    with pytest.raises(ValueError, match="K and V must have the same number of keys"):
        fn(Q, K, V[:3])
    with pytest.raises(ValueError, match=r"Q must have shape \(n, d\) = \(\.\.\., n, d\), got \(8,\)"):
        fn(Q[0], K, V)
    with pytest.raises(TypeError, match="torch.Tensor .use torch.from_numpy"):
        fn(Q.numpy(), K, V)
    with pytest.raises(TypeError, match="floating-point"):
        fn(Q.long(), K, V)
    bad = Q.clone()
    bad[1, 2] = float("nan")
    with pytest.raises(ValueError, match=r"Q contains 1 NaN/inf value\(s\) \(first at index \(1, 2\)\)"):
        fn(bad, K, V)


def test_tiled_rejects_bad_block_and_mask(torch_qkv):
    Q, K, V = torch_qkv((5, 8))
    for block in (0, -2):
        with pytest.raises(ValueError, match="block must be a whole number >= 1"):
            tiled_attention(Q, K, V, block=block)
    with pytest.raises(TypeError, match="block must be a whole number >= 1, got 1.5"):
        tiled_attention(Q, K, V, block=1.5)
    with pytest.raises(TypeError, match=r"mask must be boolean .* use mask.bool\(\)"):
        tiled_attention(Q, K, V, mask=torch.ones(5, 5))
    with pytest.raises(TypeError, match="mask must be a boolean torch.Tensor"):
        tiled_attention(Q, K, V, mask=np.ones((5, 5), bool))
    with pytest.raises(ValueError, match=r"mask of shape \(4, 5\) does not broadcast to the "
                                         r"scores' shape \(5, 5\)"):
        tiled_attention(Q, K, V, mask=torch.ones(4, 5, dtype=torch.bool))


def test_tiled_broadcasts_leading_axes():
    gen = torch.Generator().manual_seed(8)
    Q = torch.randn(1, 4, 30, 8, generator=gen, dtype=torch.float64)
    K = torch.randn(3, 1, 30, 8, generator=gen, dtype=torch.float64)
    V = torch.randn(3, 4, 30, 5, generator=gen, dtype=torch.float64)
    out = tiled_attention(Q, K, V, block=7)
    ref = F.scaled_dot_product_attention(Q.expand(3, 4, 30, 8), K.expand(3, 4, 30, 8), V)
    assert out.shape == (3, 4, 30, 5)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-12)


def test_tiled_refuses_gradients_clearly_but_runs_under_no_grad(torch_qkv):
    Q, K, V = torch_qkv((6, 4))
    Q.requires_grad_(True)
    with pytest.raises(ValueError, match="forward pass only.*torch.no_grad"):
        tiled_attention(Q, K, V)
    with torch.no_grad():
        out = tiled_attention(Q, K, V, block=4)
    assert (out - F.scaled_dot_product_attention(Q, K, V)).abs().max().item() <= 1e-5


# --------------------------------------------------------------------------- teaching twins
# float64 on both sides: the two do the same sums in the same blocks, only the buffers differ,
# so they agree to a few units of float64 rounding (1e-12 leaves ~1e4 ulps of room).


@pytest.mark.parametrize("shape, block", [((1, 2, 37, 8), 5), ((40, 6), 7), ((3, 9, 4), 64)])
def test_plain_tiled_twin_equals_fast_tiled_float64(torch_qkv, shape, block):
    Q, K, V = torch_qkv(shape, seed=11, dtype=torch.float64)
    torch.testing.assert_close(tiled_attention_plain(Q, K, V, block=block),
                               tiled_attention(Q, K, V, block=block), rtol=0, atol=1e-12)


def test_plain_tiled_twin_equals_fast_with_random_mask_and_empty_rows(torch_qkv):
    Q, K, V = torch_qkv((2, 1, 30, 8), seed=12, dtype=torch.float64)
    mask = torch.rand(2, 1, 30, 30, generator=torch.Generator().manual_seed(0)) > 0.6
    mask[..., 4, :] = False  # a query with no key at all
    mask[..., 7, :10] = False  # a query whose first blocks are all masked
    plain = tiled_attention_plain(Q, K, V, block=4, mask=mask)
    torch.testing.assert_close(plain, tiled_attention(Q, K, V, block=4, mask=mask),
                               rtol=0, atol=1e-12)
    assert torch.equal(plain[..., 4, :], torch.zeros_like(plain[..., 4, :]))


def test_plain_tiled_twin_rejects_bad_block(torch_qkv):
    Q, K, V = torch_qkv((5, 4))
    with pytest.raises(ValueError, match="block"):
        tiled_attention_plain(Q, K, V, block=0)


# --------------------------------------------------------------------------- banded (torch)


@pytest.mark.parametrize("n, w", [(37, 2), (37, 6), (64, 16), (10, 40)])
def test_banded_attention_equals_masked_sdpa_float64(torch_qkv, n, w):
    Q, K, V = torch_qkv((1, 2, n, 8), seed=13, dtype=torch.float64)
    i = torch.arange(n)
    band = (i[:, None] - i[None, :]).abs() <= w // 2
    ref = F.scaled_dot_product_attention(Q, K, V, attn_mask=band)
    torch.testing.assert_close(banded_attention(Q, K, V, w), ref, rtol=0, atol=1e-12)


def test_banded_attention_memory_is_linear_in_n(torch_qkv):
    def setup(n):
        return torch_qkv((1, 1, n, 16))
    rows = measure(lambda Q, K, V: banded_attention(Q, K, V, 32), [512, 1024, 2048],
                   setup=setup, repeats=1, warmup=0, progress=False)
    assert abs(fit_exponent([r.n for r in rows], [r.peak_bytes for r in rows]).slope - 1) < 0.05


def test_banded_attention_rejects_odd_window(torch_qkv):
    Q, K, V = torch_qkv((8, 4))
    with pytest.raises(ValueError, match="even"):
        banded_attention(Q, K, V, 3)



def test_kernels_reject_leading_axes_that_do_not_broadcast(torch_qkv):
    Q, K, V = torch_qkv((2, 5, 8))
    with pytest.raises(ValueError, match=r"leading \(batch, head\) axes of Q, K, V do not broadcast: "
                                         r"Q has shape \(2, 5, 8\), K has shape \(3, 5, 8\), V has "
                                         r"shape \(2, 5, 8\)$"):
        naive_attention(Q, torch.cat([K, K[:1]]), V)
    with pytest.raises(ValueError, match=r"leading .* do not broadcast: .* V has shape \(3, 5, 8\)"):
        tiled_attention(Q, K, torch.cat([V, V[:1]]))  # V's leading axes too, as numpy's


def test_banded_attention_rejects_a_window_that_is_not_a_positive_whole_number(torch_qkv):
    Q, K, V = torch_qkv((8, 4))
    with pytest.raises(ValueError, match=r"w \(the window\) must be a whole number >= 1, got 0"):
        banded_attention(Q, K, V, 0)
    with pytest.raises(TypeError, match=r"w \(the window\) must be a whole number >= 1, got 2.0"):
        banded_attention(Q, K, V, 2.0)


def test_scale_is_checked_and_used(torch_qkv):
    Q, K, V = torch_qkv((6, 4), seed=14, dtype=torch.float64)
    ref = F.scaled_dot_product_attention(Q, K, V, scale=0.3)
    for fn in (naive_attention, tiled_attention, tiled_attention_plain):
        torch.testing.assert_close(fn(Q, K, V, scale=0.3), ref, rtol=0, atol=1e-12)
        with pytest.raises(ValueError, match="scale must be a number >= 0"):
            fn(Q, K, V, scale=-1.0)


# --------------------------------------------------------------------------- very negative scores
# A query whose first key block is fully masked, and whose real scores are all far below 0 (here
# shifted by −200 in float32 and −1000 in float64, past where exp underflows: e^−88 in float32,
# e^−745 in float64). The online softmax must keep its running max at −∞ over the masked block,
# not reset it to 0, or every later exp(S − m) underflows to 0 and the row loses its output.


def shift_scores(Q, K, shift):
    """Q, K (n, d) -> (n, d + 1) whose scores at scale 1 are Q Kᵀ + shift.

    A column of ones in Q and of ``shift`` in K adds ``shift`` to every score: the softmax does
    not change, but exp of every score underflows.
    """
    ones = torch.ones(*Q.shape[:-1], 1, dtype=Q.dtype)
    return torch.cat([Q, ones], -1), torch.cat([K, shift * ones], -1)


@pytest.mark.parametrize("fn", [tiled_attention_plain, tiled_attention])
@pytest.mark.parametrize("dtype, shift", [(torch.float32, -200.0), (torch.float64, -1000.0)])
def test_tiled_after_a_fully_masked_block_with_very_negative_scores(torch_qkv, fn, dtype, shift):
    Q, K, V = torch_qkv((12, 4), seed=15, dtype=dtype)
    Q, K = shift_scores(Q, K, shift)
    mask = torch.ones(12, 12, dtype=torch.bool)
    mask[3:7, :4] = False  # queries 3..6 see nothing of the first block of 4 keys
    mask[5, 4:8] = False  # query 5 nothing of the second block either
    out = fn(Q, K, V, block=4, mask=mask, scale=1.0)
    ref, _ = scaled_dot_product_attention(*(t.double().numpy() for t in (Q, K, V)),
                                          mask=mask.numpy(), scale=1.0)
    # each score (size |shift|) carries an absolute rounding of a few |shift|·eps; that is the
    # relative error of each weight, and outputs are weighted means of unit-normal values (< 4)
    tol = 20 * abs(shift) * torch.finfo(dtype).eps
    np.testing.assert_allclose(out.double().numpy(), ref, rtol=0, atol=tol)
