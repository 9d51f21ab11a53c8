"""Attention in torch, four ways: the whole n×n matrix, keys in blocks, and a sliding window.

- :func:`naive_attention`: softmax(Q Kᵀ / √d_k) V with the whole n_q × n_k matrix (memory ∝ n²).
- :func:`tiled_attention_plain`: keys in blocks with an online softmax, FlashAttention's idea
  written to be read beside its equations (memory ∝ n); :func:`tiled_attention`, its fast twin
  (the same loop with reused buffers). A test proves the two equal.
- :func:`banded_attention`: each query attends to the keys within w/2 of it (sliding window).

The online softmax of the tiled twins (Milakov & Gimelshein 2018; Dao et al. 2022), for each
block j of B keys, from m = −∞, ℓ = 0, O = 0:

    S_j = s·Q K_jᵀ                    scores of this block                (..., n_q, B)
    m'  = max(m, rowmax S_j)           the running maximum                 (..., n_q, 1)
    P_j = exp(S_j − m')                exponentials against it             (..., n_q, B)
    ℓ'  = e^(m − m')·ℓ + rowsum P_j    the running sum                     (..., n_q, 1)
    O'  = e^(m − m')·O + P_j V_j       the running, unnormalised output    (..., n_q, d_v)

and the answer is O / ℓ, divided once at the end (FlashAttention-2's order). A masked score is
−∞, so a row that may see no key of the blocks so far keeps m' = −∞, and −∞ − (−∞) is NaN: there
the exponents subtract 0 instead of m' (e^−∞ = 0 all the same). A query that may attend to
nothing ends with ℓ = 0 and gets zeros, as in ``attention.scaled_dot_product_attention`` and
torch's own attention.

``bertlib.paper.attention`` is the numpy reference they are checked against;
``bertlib.lab.cost`` counts and measures what they cost.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from bertlib.checks import bool_mask, check_finite, check_qkv_shapes, has_shape, kind, whole
from bertlib.paper.attention import attention_scale, sliding_window_plan

__all__ = ["naive_attention", "tiled_attention", "tiled_attention_plain", "banded_attention"]


# --------------------------------------------------------------------------- input checks


def _check_qkv(Q, K, V) -> tuple[int, ...]:
    """Check Q (..., n_q, d_k >= 1), K (..., n_k, d_k), V (..., n_k, d_v) as float tensors;
    return the leading axes (checks.check_qkv_shapes, the rule every attention shares)."""
    for name, t in (("Q", Q), ("K", K), ("V", V)):
        hint = " (use torch.from_numpy)" if isinstance(t, np.ndarray) else ""
        kind(t, name, torch.Tensor, f"a torch.Tensor{hint} of floating-point numbers")
        if not t.is_floating_point():  # the one check of its own: a torch dtype
            raise TypeError(f"{name} must be a torch.Tensor of floating-point numbers, got dtype "
                            f"{t.dtype}")
        has_shape(t, name, (..., None, None), "(n, d)")  # at least 2 axes
        if t.device.type != "meta":  # a meta tensor has a shape but no values
            check_finite(t, name)
    return check_qkv_shapes(Q.shape, K.shape, V.shape)


def _check_tiled(Q, K, V, block, mask) -> int:
    """The checks of both tiled twins: Q, K, V, block and mask; returns block (the scale is
    checked where s is computed, by attention_scale in each body)."""
    batch = _check_qkv(Q, K, V)
    if mask is not None:
        kind(mask, "mask", torch.Tensor, "a boolean torch.Tensor (True = may attend)")
        bool_mask(mask, (*batch, Q.shape[-2], K.shape[-2]))
    return whole(block, "block", low=1)


# --------------------------------------------------------------------------- the n×n matrix


def naive_attention(Q, K, V, scale: float | None = None):
    """softmax(Q Kᵀ / √d_k) V in torch, the whole n_q × n_k matrix at once (no mask).

    Q: (..., n_q, d_k)   K: (..., n_k, d_k)   V: (..., n_k, d_v); leading axes broadcast.
    Returns the output (..., n_q, d_v). It holds two (..., n_q, n_k) matrices at its peak (the
    scores and the weights): memory ∝ n². bertlib.paper.attention is the numpy twin (with masks).
    """
    _check_qkv(Q, K, V)
    s = attention_scale(Q.shape[-1], scale)
    return torch.softmax((Q @ K.transpose(-2, -1)) * s, dim=-1) @ V


# --------------------------------------------------------------------------- keys in blocks


def tiled_attention_plain(Q, K, V, block: int = 256, mask=None, scale: float | None = None):
    """softmax(s·Q Kᵀ) V, s = 1/√d_k unless given, over blocks of keys: the online softmax, one line
    per equation (fast twin: :func:`tiled_attention`). Q (..., n_q, d_k), K (..., n_k, d_k), V
    (..., n_k, d_v), leading axes broadcast; mask (..., n_q, n_k) bool. Returns (..., n_q, d_v)."""
    block = _check_tiled(Q, K, V, block, mask)
    s = attention_scale(Q.shape[-1], scale)  # 1/√d_k unless a scale is given
    m = torch.full((*Q.shape[:-1], 1), -math.inf, dtype=Q.dtype, device=Q.device)  # m = −∞
    l = torch.zeros_like(m)  # ℓ = 0
    O = torch.zeros((*Q.shape[:-1], V.shape[-1]), dtype=Q.dtype, device=Q.device)  # O = 0
    for j in range(0, K.shape[-2], block):
        S = s * Q @ K[..., j:j + block, :].transpose(-2, -1)  # S_j = s·Q K_jᵀ
        if mask is not None:
            S = S.masked_fill(~mask[..., j:j + block], -math.inf)  # a masked score is −∞
        m_new = torch.maximum(m, S.amax(dim=-1, keepdim=True))  # m' = max(m, rowmax S_j)
        shift = torch.where(m_new == -math.inf, 0.0, m_new)  # m', or 0 while m' = −∞
        P = torch.exp(S - shift)  # P_j = exp(S_j − m')
        alpha = torch.exp(m - shift)  # e^(m − m')
        l = alpha * l + P.sum(dim=-1, keepdim=True)  # ℓ' = e^(m − m')·ℓ + rowsum P_j
        O = alpha * O + P @ V[..., j:j + block, :]  # O' = e^(m − m')·O + P_j V_j
        m = m_new
    return torch.where(l > 0, O / l, 0.0)  # O / ℓ, once; ℓ = 0 (no key allowed): zeros


def tiled_attention(Q, K, V, block: int = 256, mask=None, scale: float | None = None):
    """softmax(Q Kᵀ / √d_k) V computed over blocks of ``block`` keys, never the whole matrix.

    Q: (..., n_q, d_k)   K: (..., n_k, d_k)   V: (..., n_k, d_v); leading axes broadcast.
    mask: (..., n_q, n_k) bool tensor, True where a query may attend; None = all.
    Returns the output (..., n_q, d_v); a query that may attend to nothing gets zeros.
    Forward pass only: inputs that require grad raise a ValueError outside ``torch.no_grad()``.

    The online softmax of :func:`tiled_attention_plain` (read that one first): for each block of
    keys j, with scores S_j = s·Q K_jᵀ (s = 1/√d_k by default),
        m' = max(m, rowmax S_j),   P = exp(S_j − m'),   α = exp(m − m'),
        ℓ' = α·ℓ + rowsum P,       O' = α·O + P V_j,
    starting from m = −∞, ℓ = 0, O = 0; the answer is O / ℓ. Made fast: ℓ comes out of the same
    product as P V (V gets an extra column of ones), and two buffers are reused for every block
    (allocating fresh ones each time costs more than the arithmetic, and is what a fused kernel
    avoids too). Equal to full attention up to float rounding (max abs difference ≤ 1e-5 in
    float32 and ≤ 1e-12 in float64 on unit-normal inputs, as the tests check). Memory: one
    (..., n_q, block) block of scores at a time, so it grows linearly in n for a fixed block.
    """
    block = _check_tiled(Q, K, V, block, mask)
    s = attention_scale(Q.shape[-1], scale)  # 1/√d_k unless a scale is given
    if torch.is_grad_enabled() and any(t.requires_grad for t in (Q, K, V)):
        raise ValueError(
            "tiled_attention computes the forward pass only (it reuses buffers in place, which "
            "autograd cannot follow): call it under torch.no_grad(), or use naive_attention"
        )
    dtype = torch.promote_types(torch.promote_types(Q.dtype, K.dtype), V.dtype)
    rows = (*torch.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2]), Q.shape[-2])
    n_k = K.shape[-2]
    Qs = Q.to(dtype) * s
    Kt = K.to(dtype).transpose(-2, -1)
    V1 = torch.cat([V.to(dtype), V.new_ones((*V.shape[:-1], 1), dtype=dtype)], dim=-1)  # [V, 1]
    m = torch.full((*rows, 1), -math.inf, dtype=dtype, device=Q.device)
    Ol = torch.zeros((*rows, V1.shape[-1]), dtype=dtype, device=Q.device)  # [O, ℓ]
    S_full = torch.empty((*rows, min(block, n_k)), dtype=dtype, device=Q.device)  # reused
    PV = torch.empty_like(Ol)  # reused
    for start in range(0, n_k, block):
        keys = slice(start, start + block)
        width = min(block, n_k - start)
        S = S_full if width == S_full.shape[-1] else S_full.new_empty((*rows, width))
        torch.matmul(Qs, Kt[..., keys], out=S)
        if mask is not None:
            S.masked_fill_(~mask[..., keys], -math.inf)
        m_new = torch.maximum(m, S.amax(dim=-1, keepdim=True))
        shift = torch.where(m_new == -math.inf, 0.0, m_new)  # m', or 0 while m' = −∞
        P = S.sub_(shift).exp_()
        torch.matmul(P, V1[..., keys, :], out=PV)
        Ol.mul_(torch.exp(m - shift)).add_(PV)
        m = m_new
    O, l = Ol[..., :-1], Ol[..., -1:]
    return torch.where(l > 0, O / torch.where(l > 0, l, 1.0), 0.0)


# --------------------------------------------------------------------------- a sliding window


def banded_attention(Q, K, V, w: int):
    """Sliding-window attention in torch: each query attends to the keys within w/2 of it.

    Q, K: (..., n, d_k); V: (..., n, d_v); w: positive even window (w + 1 keys a row).
        out_i = Σ_{|i−j| ≤ w/2} softmax_j(q_i·k_j / √d_k) v_j
    Queries go in blocks of B = w/2; block t reads one slab of B + w keys (a strided view of the
    zero-padded K) and masks it to the band, so the scores are (..., n/B, B, B + w): 3·n·w/2
    numbers, never n × n; the blocks and padding are attention.sliding_window_plan's, as the
    numpy window's. Returns (..., n, d_v). The numpy teaching twin with global tokens is
    ``bertlib.paper.variants.sliding_window_attention_plain``.
    """
    _check_qkv(Q, K, V)
    n, d_k = Q.shape[-2], Q.shape[-1]
    plan = sliding_window_plan(w, n)  # B, the slabs' keys, the band, the padding: numpy's too
    B, (n_blocks, slab), keep = plan.block, plan.keys.shape, torch.from_numpy(plan.keep)
    keep = keep.to(Q.device)  # (n_blocks, B, slab), slab = B + w
    K_slab = torch.nn.functional.pad(K, (0, 0, *plan.key_pad)).unfold(-2, slab, B)
    V_slab = torch.nn.functional.pad(V, (0, 0, *plan.key_pad)).unfold(-2, slab, B)
    Q_blocks = torch.nn.functional.pad(Q, (0, 0, *plan.query_pad)).unflatten(-2, (n_blocks, B))
    scores = (Q_blocks @ K_slab) * attention_scale(d_k)  # (..., n_blocks, B, slab)
    weights = torch.softmax(scores.masked_fill(~keep, -math.inf), dim=-1)
    out = weights @ V_slab.transpose(-2, -1)  # (..., n_blocks, B, d_v)
    return out.flatten(-3, -2)[..., :n, :]
