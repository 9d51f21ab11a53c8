"""Efficient attention that keeps exact softmax on some pairs, built small in numpy.

Full attention softmax(Q Kᵀ/√d_k) V costs O(n²·d) time and O(n²) memory. Each sparse pattern here
keeps a chosen set of pairs (i, j) and computes the exact softmax over them, never the n×n matrix:

- :func:`sliding_window_attention` (Longformer, Beltagy et al. 2020): a band of w + 1 keys
  around each query, plus global tokens (and :func:`sliding_window_attention_plain`, its plain
  loop twin);
- :func:`block_sparse_attention` (BigBird, Zaheer et al. 2020): window, random and global blocks.

The approximations of the full softmax (Linformer, Performer, Reformer) live in
:mod:`bertlib.paper.approximations`. All take one head: Q (n, d_k), K (n, d_k), V (n, d_v).
``return_weights=True`` also returns the (n, n) attention the variant implies (for plots at small
n; it costs n² memory, so the fast path never builds it). Putting a variant into one layer of
the real BERT is the hf side's work: ``bertlib.hf.params.bert_qkv`` and ``bert_layer``.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from bertlib.checks import positions, whole
from bertlib.paper.attention import (
    attention_scale,
    band,
    check_one_head,
    scaled_dot_product_attention,
    sliding_window_plan,
    softmax,
    window_half,
)

__all__ = [
    "sliding_window_pattern",
    "sliding_window_attention",
    "sliding_window_attention_plain",
    "block_sparse_pattern",
    "block_sparse_attention",
]


# ---------------------------------------------------------------- Longformer: sliding window


def _global_positions(global_idx, n: int) -> np.ndarray:
    """Sorted unique global positions, each in 0..n−1 (checks.positions, the one rule)."""
    return np.unique(positions(global_idx, "global_idx", n))


def sliding_window_pattern(n: int, w: int, global_idx=()) -> np.ndarray:
    """Which pairs Longformer's sliding window + global attention keeps, as an (n, n) bool mask.

    Query i may attend key j when |i − j| ≤ w/2, or when i or j is global.
    n: tokens; w: a positive even window; global_idx: positions in 0..n−1.
    Returns (n, n) bool, True = may attend (for plots; the attention itself never builds it).
    """
    n = whole(n, "n", 1)
    half = window_half(w, n)
    g = _global_positions(global_idx, n)
    i = np.arange(n)
    mask = band(i, i, half)
    mask[g, :] = True
    mask[:, g] = True
    return mask


def sliding_window_attention(Q, K, V, w: int, global_idx=(), return_weights: bool = False):
    """Longformer's attention: each token attends to the w/2 tokens on each side of it.

    Idea: nearby words matter most, so keep a band of w + 1 keys per query (itself and w/2 on each
    side) instead of all n; a few global tokens (e.g. [CLS]) attend to all and are attended by all.
        out_i = Σ_{j ∈ N(i)} softmax_j(q_i·k_j / √d_k) v_j,
        N(i) = {j : |i − j| ≤ w/2} ∪ G for ordinary i;  N(i) = all j for i ∈ G.
    Rule: w must be even and > 0. Once w/2 ≥ n − 1 every window covers the whole sequence and
    this equals full attention.
    How: queries go in blocks of B = w/2; block t (queries tB..tB+B−1) reads one contiguous
    slab of B + w keys (tB − w/2 .. tB + B − 1 + w/2), which holds every key its queries may see,
    and masks the slab to the band |i − j| ≤ w/2 (Longformer's "sliding chunks").
    Cost: O(n·(w + g)·d) time and O(n·(w + g + d)) memory for g global tokens: scores are
    (n/B, B, B + w), i.e. 3·n·w/2 numbers, never n×n; the key and value slabs 3·n·d each.

    Q, K: (n, d_k); V: (n, d_v); w: positive even int; global_idx: positions in 0..n−1.
    Returns out (n, d_v), or (out, weights (n, n)) when return_weights is True.
    """
    Q, K, V = check_one_head(Q, K, V)
    n, d_k = Q.shape
    g = _global_positions(global_idx, n)
    is_global = np.zeros(n, dtype=bool)
    is_global[g] = True

    plan = sliding_window_plan(w, n)  # B, the slabs' keys, the band, the padding: derived once
    B, (n_blocks, slab), cols = plan.block, plan.keys.shape, plan.keys[:, None, :]  # slab = B + w
    rows = (np.arange(n_blocks)[:, None] * B + np.arange(B))[:, :, None]  # query index
    keep = plan.keep & ~is_global[np.clip(cols, 0, n - 1)] & (rows < n)  # globals apart

    def slabs(X):  # (n_blocks, d, slab): block t's rows of X, a strided view of the padded X
        # made contiguous (3·n·d numbers), so that the batched products below run in BLAS
        padded = np.pad(X, (plan.key_pad, (0, 0)))
        return np.ascontiguousarray(sliding_window_view(padded, slab, axis=0)[::B])

    K_slab = slabs(K)  # (n_blocks, d_k, slab)
    V_slab = np.swapaxes(slabs(V), 1, 2)  # (n_blocks, slab, d_v)
    Q_blocks = np.pad(Q, (plan.query_pad, (0, 0))).reshape(n_blocks, B, d_k)
    scale = attention_scale(d_k)
    scores_band = (Q_blocks @ K_slab) * scale  # (n_blocks, B, slab)
    to_global = ((Q_blocks @ K[g].T) * scale)  # (n_blocks, B, g)
    weights = softmax(np.concatenate([scores_band, to_global], axis=2),
                      where=np.concatenate([keep, np.ones(to_global.shape, bool)], axis=2))
    w_band, w_global = weights[..., :slab], weights[..., slab:]
    out = (w_band @ V_slab + w_global @ V[g]).reshape(-1, V.shape[1])[:n]
    out_g, weights_g = scaled_dot_product_attention(Q[g], K, V)  # global rows see everything
    out[g] = out_g
    if not return_weights:
        return out
    dense = np.zeros((n, n), dtype=weights.dtype)
    r, c = np.broadcast_arrays(rows, cols)
    dense[r[keep], c[keep]] = w_band[keep]
    dense[:, g] = w_global.reshape(n_blocks * B, g.size)[:n]
    dense[g] = weights_g
    return out, dense


def sliding_window_attention_plain(Q, K, V, w: int, global_idx=()) -> np.ndarray:
    """out_i = Σ_{j ∈ N(i)} softmax_j(q_i·k_j / √d_k) v_j, N(i) = {j : |i − j| ≤ w/2} ∪ G (every j
    for a global i), one query at a time: :func:`sliding_window_attention`'s teaching twin. Q, K:
    (n, d_k); V: (n, d_v); w: even, > 0; global_idx: G, in 0..n−1. Returns out (n, d_v)."""
    Q, K, V = check_one_head(Q, K, V)
    (n, d_k), G = Q.shape, _global_positions(global_idx, len(Q))
    half, out = window_half(w, n), np.zeros((n, V.shape[1]), dtype=np.result_type(Q, V))
    for i in range(n):  # at most w + 1 + |G| keys a query: read it beside the formula
        window = np.arange(max(0, i - half), min(n, i + half + 1))  # |i − j| ≤ w/2
        keys = np.arange(n) if i in G else np.union1d(window, G)  # N(i): all j for a global i
        scores = K[keys] @ Q[i] * attention_scale(d_k)  # q_i·k_j / √d_k
        out[i] = softmax(scores) @ V[keys]
    return out


# ---------------------------------------------------------------- BigBird: block-sparse


def _block_layout(n: int, block, n_random, global_blocks, seed) -> np.ndarray:
    """(nb, nb) bool: which key blocks each query block attends to (window, global, random)."""
    block = whole(block, "block", 1)
    if n % block:
        divisors = [b for b in range(1, n + 1) if n % b == 0]
        raise ValueError(
            f"n={n} is not a multiple of block={block}: pad the sequence to "
            f"{-(-n // block) * block} tokens, or pick a block that divides {n} ({divisors})"
        )
    nb = n // block
    global_blocks = whole(global_blocks, "global_blocks", 0, nb, why=f"(n/block = {nb} blocks)")
    n_random = whole(n_random, "n_random", 0)
    rng = np.random.default_rng(seed)
    idx = np.arange(nb)
    layout = band(idx, idx, 1)  # window: the block and its neighbours, |i − j| ≤ 1
    layout[:global_blocks, :] = True  # global blocks attend to all ...
    layout[:, :global_blocks] = True  # ... and are attended by all
    for qb in range(global_blocks, nb):
        free = np.flatnonzero(~layout[qb])
        if n_random > free.size:
            raise ValueError(
                f"n_random={n_random} is too many: query block {qb} has only {free.size} "
                f"block(s) outside its window and the global blocks ({nb} blocks in all)"
            )
        layout[qb, rng.choice(free, size=n_random, replace=False)] = True
    return layout


def block_sparse_pattern(n: int, block: int, n_random: int = 1, global_blocks: int = 1,
                         seed: int | None = 0) -> np.ndarray:
    """Which pairs BigBird's block-sparse attention keeps, as an (n, n) bool mask.

    The sequence is cut into n/block blocks. Query block b attends to key blocks b−1, b, b+1
    (window), to the first ``global_blocks`` blocks (global), and to ``n_random`` other blocks
    drawn with ``seed`` (random); the global blocks attend to everything. So an ordinary row keeps
    block·(|window ∖ global| + global_blocks + n_random) keys, a global row all n.
    Returns (n, n) bool, True = may attend.
    """
    n = whole(n, "n", 1)
    layout = _block_layout(n, block, n_random, global_blocks, seed)
    return np.kron(layout, np.ones((block, block), dtype=bool)).astype(bool)


def block_sparse_attention(Q, K, V, block: int, n_random: int = 1, global_blocks: int = 1,
                           seed: int | None = 0, return_weights: bool = False):
    """BigBird's attention: window blocks + random blocks + global blocks.

    Idea: a local window captures nearby words, a few random links keep every pair a short hop
    apart, and global blocks give every token a hub to read from and write to.
        out_i = Σ_{j ∈ N(i)} softmax_j(q_i·k_j / √d_k) v_j, with N(i) the key blocks of
        :func:`block_sparse_pattern` for i's block.
    Cost: O(n·block·(3 + n_random + global_blocks)·d) for ordinary blocks (linear in n at fixed
    block sizes) plus O(global_blocks·block·n·d) for the global rows; no n×n matrix.
    n must be a multiple of block (pad the sequence otherwise).

    Q, K: (n, d_k); V: (n, d_v). Returns out (n, d_v), or (out, weights (n, n)).
    """
    Q, K, V = check_one_head(Q, K, V)
    n = Q.shape[0]
    layout = _block_layout(n, block, n_random, global_blocks, seed)
    out = np.zeros((n, V.shape[1]), dtype=np.result_type(Q, V))
    dense = np.zeros((n, n), dtype=out.dtype) if return_weights else None
    for qb in range(layout.shape[0]):
        rows = slice(qb * block, (qb + 1) * block)
        keys = (np.flatnonzero(layout[qb])[:, None] * block + np.arange(block)).ravel()
        out[rows], w = scaled_dot_product_attention(Q[rows], K[keys], V[keys])
        if dense is not None:
            dense[rows, keys] = w
    return (out, dense) if return_weights else out
