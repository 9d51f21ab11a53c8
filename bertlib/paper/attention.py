"""Scaled dot-product attention in numpy: the reference every notebook checks against.

Shapes: one sequence is ``(n, d)``; any number of leading batch/head dimensions may precede the
last two axes. Masks are boolean with ``True`` = "this query may attend to this key".

Equation first: each public function checks its arguments in one line, then reads like the paper
(Vaswani et al. 2017, section 3.2); ``band`` alone takes positions its callers have checked. The
checks sit at the bottom of the file.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from bertlib.checks import (
    as_array,
    bool_mask,
    check_qkv_shapes,
    has_shape,
    heads_dividing,
    number,
    padding_flags,
    whole,
    window,
)

__all__ = [
    "softmax",
    "attention_scale",
    "scaled_dot_product_attention",
    "causal_mask",
    "padding_mask",
    "key_mask",
    "band",
    "window_half",
    "sliding_window_blocks",
    "WindowPlan",
    "sliding_window_plan",
    "check_one_head",
    "split_heads",
    "project_heads",
    "merge_heads",
    "head_columns",
    "multi_head_attention",
    "cosine",
]


def softmax(x, axis: int = -1, where=None) -> np.ndarray:
    """softmax(x)_i = e^(x_i − m) / Σ_j e^(x_j − m), m = max_j x_j (the same, and never overflows).
    x: any shape; where: bool to x, False = weight 0. Returns x's shape (an all-False slice: 0s)."""
    x, where = _check_softmax(x, where)  # -inf is a valid score: "never attend here"
    x = x if where is None else np.where(where, x, -np.inf)  # excluded: e^(−∞) = 0
    m = np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    e = np.exp(x - np.where(np.isfinite(m), m, 0.0))  # a fully excluded slice: any shift will do
    total = e.sum(axis=axis, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def attention_scale(d_k: int, scale: float | None = None) -> float:
    """s = 1/√d_k, the factor on Q Kᵀ (Vaswani et al. 2017, section 3.2.1), unless a scale is given.
    d_k: a head's query/key width, whole >= 1 (checks.check_qkv_shapes' rule); scale: >= 0, or
    None.
    Returns a Python float, so x · s keeps x's float type (scaled_dot_product_attention alone
    makes its default s a float64, see there). Every bertlib attention takes its scale here
    (DeBERTa's as attention_scale(3 * d_k)); only exercise checkers write √d_k out, as learners do.
    """
    d_k = whole(d_k, "d_k", 1)
    return 1 / math.sqrt(d_k) if scale is None else number(scale, "scale", 0)


def scaled_dot_product_attention(Q, K, V, mask=None, scale: float | None = None):
    """Attention(Q, K, V) = softmax(Q Kᵀ · s) V, s = 1/√d_k unless given; leading axes broadcast.
    Q (..., n_q, d_k), K (..., n_k, d_k), V (..., n_k, d_v); mask (..., n_q, n_k), True = attend.
    Returns (..., n_q, d_v), weights (..., n_q, n_k): float64 with the default s, Q's type with a
    given scale."""
    Q, K, V, mask, s_type = _check_attention(Q, K, V, mask, scale)  # s_type: the dtype rule above
    s = s_type(attention_scale(Q.shape[-1], scale))  # 1/√d_k unless a scale is given
    scores = Q @ np.swapaxes(K, -1, -2) * s
    weights = softmax(scores, where=mask)  # a masked-out key gets weight 0
    return weights @ V, weights


def split_heads(X, h: int) -> np.ndarray:
    """Cut the feature axis into h heads of d_k = d / h features and put the head axis first.
    X (..., n, d) -> (..., h, n, d_k): out[..., i, t, :] = X[..., t, i·d_k : (i+1)·d_k].
    ValueError if h does not divide d (the message lists the valid h)."""
    X, h = _check_split(X, h)
    *lead, n, d = X.shape
    return np.swapaxes(X.reshape(*lead, n, h, d // h), -3, -2)


def project_heads(X, W, b, h: int) -> np.ndarray:
    """Q = X W + b (or K, or V) cut into h heads, every head at once: the one numpy projection of
    multi_head_attention, bert.encoder_layer, hf.params.bert_qkv and importance's value vectors.
    X (..., n, d_in), W (d_in, d) as in x W, b (d,) or None (no bias) -> (..., h, n, d_k),
    d_k = d / h: split_heads' cut (its ValueError if h does not divide d)."""
    X, W, b = _check_project(X, W, b)
    return split_heads(X @ W + b, h)


def merge_heads(X_heads) -> np.ndarray:
    """Concat(head_0, …, head_{h−1}): the heads side by side again, the inverse of split_heads.

    X_heads: (..., h, n, d_k) -> (..., n, h·d_k), with out[..., t, i·d_k : (i+1)·d_k] =
    X_heads[..., i, t, :].
    """
    X_heads = as_array(X_heads, "X_heads", min_ndim=3, layout="(..., h, n, d_k)", finite=False)
    *lead, h, n, d_k = X_heads.shape
    return np.swapaxes(X_heads, -3, -2).reshape(*lead, n, h * d_k)


def head_columns(head: int, d_k: int) -> slice:
    """Where head ``head``'s d_k features sit on a merged feature axis (..., n, h·d_k), and which
    rows of W_O they meet: columns head·d_k .. (head + 1)·d_k − 1, split_heads' and merge_heads'
    layout, for code that picks one head out of the merged axis (merge_heads(X)[..., cols] is
    X[..., head, :, :]). head: whole >= 0; d_k: whole >= 1. Returns a slice."""
    head, d_k = whole(head, "head", 0), whole(d_k, "d_k", 1)
    return slice(head * d_k, (head + 1) * d_k)


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h: int, mask=None, biases=None, X_kv=None,
                         attention=scaled_dot_product_attention):
    """MultiHead(X) = Concat(head_0…head_{h−1}) W_O + b_O, head_i = attention(Q_i, K_i, V_i, mask).
    X (..., n_q, d); X_kv (..., n_k, d), None = X; W_* (d, d), x W; biases None or (b_Q, b_K, b_V,
    b_O), each (d,) or None; mask (..., h, n_q, n_k) bool. -> (..., n_q, d), (..., h, n_q, n_k)."""
    X, X_kv, (W_Q, W_K, W_V, W_O), (b_Q, b_K, b_V, b_O), h, mask = _check_multi_head(
        X, X_kv, (W_Q, W_K, W_V, W_O), biases, h, mask)
    Q = project_heads(X, W_Q, b_Q, h)  # X W_Q + b_Q in h heads of d_k = d / h: (..., h, n_q, d_k)
    K, V = project_heads(X_kv, W_K, b_K, h), project_heads(X_kv, W_V, b_V, h)  # (..., h, n_k, d_k)
    heads, weights = attention(Q, K, V, mask)  # every head_i at once; mask: True = may attend
    return merge_heads(heads) @ W_O + (0.0 if b_O is None else b_O), weights  # no b_O: + 0


def causal_mask(n: int) -> np.ndarray:
    """Causal attention mask (n, n) bool, True = may attend: query i sees keys 0..i (GPT-style)."""
    n = whole(n, "n", 0)
    return np.tril(np.ones((n, n), dtype=bool))


def padding_mask(lengths_or_flags, n: int | None = None) -> np.ndarray:
    """Key-padding attention mask (batch, 1, n), True = may attend: real tokens yes, padding no.

    lengths_or_flags: either a 1-D sequence of lengths (one per batch item; then ``n`` is the
    padded length, default the longest), or a 2-D (batch, n) array of 0/1 or bool flags where 1 =
    real token (like transformers' ``attention_mask``).
    Returns shape (batch, 1, n), which broadcasts over queries: (batch, n_q, n).
    Add a head axis with ``mask[:, None]`` for (batch, heads, n_q, n).
    """
    flags, lengths, n = _check_padding(lengths_or_flags, n)  # 2-D flags, or lengths and n
    if flags is None:  # token t of a row is real when t < the row's length
        flags = np.arange(n)[None, :] < lengths[:, None]  # (batch, n)
    return key_mask(flags, "lengths_or_flags")


def key_mask(flags, name: str = "attention_mask", real_in_each_row: bool = False) -> np.ndarray:
    """Padding flags (..., n), 1 = real token (transformers' attention_mask), as the key mask
    (..., 1, n) bool, True = may attend: it broadcasts over the queries. The one place flags
    become a mask (padding_mask and bert_forward use it). real_in_each_row: every row of flags
    needs a real token (else a ValueError, as a query with no key to attend has no softmax)."""
    return padding_flags(flags, name, real_in_each_row)[..., None, :]


def band(queries, keys, half: int) -> np.ndarray:
    """The sliding window, |i − j| ≤ half, the one place the library computes it (the plain twin in
    variants writes N(i) out by hand, to be read beside the formula; a test holds it to this one).
    queries: (n_q,), keys: (n_k,) positions. Returns (n_q, n_k) bool, True where |i − j| ≤ half."""
    return np.abs(np.asarray(queries)[:, None] - np.asarray(keys)[None, :]) <= half


def window_half(w, n: int) -> int:
    """w/2, the keys a window w (a positive even number, checks.window) reaches on each side,
    capped at n − 1 (no key of n tokens lies farther): the one place the half is derived."""
    return min(window(w) // 2, whole(n, "n", 1) - 1)


def sliding_window_blocks(n: int, half: int, block: int) -> tuple[np.ndarray, np.ndarray]:
    """The blocked sliding window: which keys each block of queries reads, and which it may attend.

    Query block t (queries t·B .. t·B + B − 1, B = ``block``) reads one slab of B + 2·half
    consecutive keys (``slab``, its width), t·B − half .. t·B + B − 1 + half: every key j with
    |i − j| ≤ half for its queries i (Longformer's "sliding chunks"). n: tokens; half: w/2 keys on
    each side (>= 0). Returns (keys (n_blocks, slab) ints: the key index of each slab place,
    outside 0..n−1 where the slab runs past the sequence; keep (n_blocks, B, slab) bool: True
    where query t·B + r may attend keys[t, c], i.e. |r − c + half| ≤ half and the key is real).
    n_blocks = ⌈n / B⌉.
    """
    n, half, B = whole(n, "n", 1), whole(half, "half", 0), whole(block, "block", 1)
    keys = np.arange(-(-n // B))[:, None] * B - half + np.arange(B + 2 * half)  # (n_blocks, slab)
    in_band = band(np.arange(B), np.arange(B + 2 * half) - half, half)  # (B, slab)
    return keys, in_band & ((keys >= 0) & (keys < n))[:, None, :]


class WindowPlan(NamedTuple):
    """The blocked sliding window of n tokens, for a window w: :func:`sliding_window_plan`'s."""

    half: int  # w/2 keys on each side, capped at n − 1 (window_half)
    block: int  # B = max(half, 1) queries per block
    keys: np.ndarray  # (n_blocks, slab) ints, slab = B + 2·half: sliding_window_blocks' keys
    keep: np.ndarray  # (n_blocks, B, slab) bool, True = may attend: sliding_window_blocks' band
    key_pad: tuple[int, int]  # K and V padded by (half, n_blocks·B − n + half) rows: slab t is
    # the rows t·B .. t·B + slab − 1 of the padded K (its key t·B − half first)
    query_pad: tuple[int, int]  # Q padded by (0, n_blocks·B − n) rows: n_blocks whole blocks


def sliding_window_plan(w, n: int) -> WindowPlan:
    """Longformer's sliding chunks for a window w (positive, even) over n tokens (>= 1), derived
    once for the numpy window (variants.sliding_window_attention) and the torch one
    (kernels.banded_attention): the half, the block size B, the slabs' keys and band, and how far
    K, V and Q are padded so that block t reads rows t·B .. t·B + slab − 1 of the padded K, V (a
    stride-B view) and rows t·B .. t·B + B − 1 of the padded Q. Returns a :class:`WindowPlan`."""
    half = window_half(w, n)
    B = max(half, 1)  # queries per block
    keys, keep = sliding_window_blocks(n, half, B)
    end = keys.shape[0] * B - n  # queries that pad the last block
    return WindowPlan(half, B, keys, keep, (half, end + half), (0, end))


def cosine(u, v, names: tuple[str, str] = ("u", "v")) -> np.ndarray:
    """cos(u, v) = u·v / (‖u‖ ‖v‖) over the last axis: the one numpy cosine similarity.
    u (..., d), v (..., d), leading axes broadcast -> (...) (one number for two (d,) vectors).
    An all-zero vector has no direction: ValueError, naming it by ``names`` (hf.finetune's torch
    twin, torch's cosine_similarity, clamps the norms at eps instead and gives 0)."""
    u, v, norm_u, norm_v = _check_cosine(u, v, names)  # ‖u‖ and ‖v‖ over the last axis, none 0
    return (u * v).sum(-1) / (norm_u * norm_v)


# ---------------------------------------------------------------- the checks, once at the edge

def check_one_head(Q, K, V) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One head's self-attention inputs, checked once: Q (n, d_k), K (n, d_k), V (n, d_v).

    Each must be 2-D and finite, the sizes must fit (as checks.check_qkv_shapes), with as many
    queries as keys (n >= 1). Returns Q, K, V cast to one float type (mixed float32/float64
    products are slow). Used by every efficient variant (bertlib.paper.approximations, .variants).
    """
    Q, K, V = (as_array(x, name, 2, layout="(one head, a 2-D (n, d) array; loop over heads and "
                                          "batch items for more)")
               for name, x in (("Q", Q), ("K", K), ("V", V)))
    check_qkv_shapes(Q.shape, K.shape, V.shape)
    n = whole(Q.shape[0], "n (the number of tokens, Q's first axis)", 1)
    has_shape(K, "K", (n, None), "(n, d_k)", "(self-attention: as many keys as queries)")
    dtype = np.result_type(Q, K, V)
    return Q.astype(dtype, copy=False), K.astype(dtype, copy=False), V.astype(dtype, copy=False)


def _check_softmax(x, where) -> tuple[np.ndarray, np.ndarray | None]:
    """softmax's x as a float array without NaN, and ``where`` as bool of x's shape (or None)."""
    x = as_array(x, "x", finite=False)
    if np.isnan(x).any():
        raise ValueError("softmax input contains NaN")
    return x, None if where is None else np.broadcast_to(np.asarray(where, dtype=bool), x.shape)


def _check_attention(Q, K, V, mask, scale):
    """Q, K, V as finite float arrays (at least 2 axes, d_k >= 1) whose shapes fit, the mask as a
    bool array that broadcasts to the scores' shape, and the type of s: np.float64 for the default
    1/√d_k (the numpy reference computes in float64), float for a given scale (Q's type kept)."""
    Q, K, V = (as_array(x, name, min_ndim=2, layout="(..., n, d)")
               for x, name in ((Q, "Q"), (K, "K"), (V, "V")))
    check_qkv_shapes(Q.shape, K.shape, V.shape)  # d_k >= 1 too
    scores = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2]) + (Q.shape[-2], K.shape[-2])
    s_type = np.float64 if scale is None else float
    return Q, K, V, None if mask is None else bool_mask(mask, scores), s_type


def _check_padding(lengths_or_flags, n):
    """padding_mask's input: (2-D (batch, n) flags, None, None), or (None, 1-D lengths as
    whole numbers >= 0, n >= the longest length, default the longest)."""
    a = np.asarray(lengths_or_flags)
    if a.ndim == 2:  # (batch, n) flags: True = real token; key_mask checks them
        return a, None, None
    if a.ndim != 1:
        raise ValueError(f"expected 1-D lengths, or 2-D (batch, n) flags of 0/1 or bool (1 = real "
                         f"token); got shape {a.shape}")
    lengths = np.array([whole(x, f"lengths[{i}]", 0) for i, x in enumerate(a.tolist())], int)
    longest = int(lengths.max()) if lengths.size else 0
    n = longest if n is None else whole(n, "n", longest, why="(not shorter than the longest "
                                                            "length)")
    return None, lengths, n


def _check_split(X, h) -> tuple[np.ndarray, int]:
    """split_heads' X as a float array (..., n, d) and h as a whole number dividing d."""
    X = as_array(X, "X", min_ndim=2, layout="(..., n, d)", finite=False)
    return X, heads_dividing(h, X.shape[-1])


def _check_project(X, W, b) -> tuple[np.ndarray, np.ndarray, np.ndarray | float]:
    """project_heads' X (..., n, d_in), W (d_in, d) and b (d,), None as 0.0 (h: split_heads')."""
    X = as_array(X, "X", min_ndim=2, layout="(..., n, d_in)", finite=False)
    W = as_array(W, "W", shape=(X.shape[-1], None), layout="(d_in, d)",
                 why="(d_in from X's last axis)")
    return X, W, 0.0 if b is None else as_array(b, "b", shape=(W.shape[1],), layout="(d,)",
                                                  why="(d from W's last axis)")


def _check_multi_head(X, X_kv, W, biases, h, mask):
    """The arguments of :func:`multi_head_attention`, checked once: (X, X_kv, W, b, h, mask)."""
    X = as_array(X, "X", min_ndim=2, layout="(..., n_q, d)")
    X_kv = X if X_kv is None else as_array(X_kv, "X_kv", min_ndim=2, layout="(..., n_k, d)")
    d = X.shape[-1]
    h = heads_dividing(h, d)
    lead = check_qkv_shapes(X.shape, X_kv.shape, X_kv.shape, ("X", "X_kv", "X_kv"), "d")
    if biases is None:
        biases = (None,) * 4
    elif not isinstance(biases, list | tuple) or len(biases) != 4:
        raise TypeError("biases must be None or a list or tuple (b_Q, b_K, b_V, b_O) of (d,) "
                        f"vectors or None, got {type(biases).__name__}")
    W = tuple(_param(w, name, (d, d))
              for w, name in zip(W, ("W_Q", "W_K", "W_V", "W_O"), strict=True))
    b_Q, b_K, b_V, b_O = (None if x is None else _param(x, name, (d,))
                          for x, name in zip(biases, ("b_Q", "b_K", "b_V", "b_O"), strict=True))
    if mask is not None:
        mask = bool_mask(mask, lead + (h, X.shape[-2], X_kv.shape[-2]), "(..., h, n_q, n_k)")
    return X, X_kv, W, (b_Q, b_K, b_V, b_O), h, mask


def _param(W, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """A finite projection matrix (d, d) or bias (d,) of exactly ``shape``, or an error naming d."""
    return as_array(W, name, shape=shape, layout="(d, d)" if len(shape) == 2 else "(d,)",
                    why="(d from the input's last axis)")


def _check_cosine(u, v, names):
    """cosine's u (..., d) and v (..., d) as float arrays, and their norms over d, each > 0."""
    u = as_array(u, names[0], min_ndim=1, layout="(..., d)")
    v = as_array(v, names[1], shape=(..., u.shape[-1]), layout="(..., d)",
                 why=f"(d from {names[0]}'s last axis)")
    norms = np.linalg.norm(u, axis=-1), np.linalg.norm(v, axis=-1)
    for name, norm in zip(names, norms, strict=True):
        if not (norm > 0).all():
            at = "" if norm.ndim == 0 else f" at {tuple(np.argwhere(norm == 0)[0].tolist())}"
            raise ValueError(f"{name} has an all-zero vector{at}: it has no direction, so the "
                             "cosine similarity is undefined")
    return u, v, *norms
