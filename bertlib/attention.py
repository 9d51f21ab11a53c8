"""Scaled dot-product attention in numpy: the reference every notebook checks against.

Shapes: one sequence is ``(n, d)``; any number of leading batch/head dimensions may precede the
last two axes. Masks are boolean with ``True`` = "this query may attend to this key".
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "softmax",
    "scaled_dot_product_attention",
    "causal_mask",
    "padding_mask",
    "check_finite",
    "check_qkv_shapes",
    "split_heads",
    "merge_heads",
    "multi_head_attention",
]


def _as_float_array(x, name: str, min_ndim: int = 1) -> np.ndarray:
    """``x`` as a float ndarray, or a TypeError/ValueError that names ``name``."""
    if isinstance(x, np.ndarray) and x.dtype == bool:
        raise TypeError(f"{name} must hold numbers, got a boolean array")
    try:
        arr = np.asarray(x, dtype=np.float64) if not isinstance(x, np.ndarray) else x
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an array of numbers, got {type(x).__name__}") from exc
    if not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating):
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    if not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float64)
    if arr.ndim < min_ndim:
        raise ValueError(
            f"{name} must have at least {min_ndim} dimensions (..., n, d), got shape {arr.shape}"
        )
    return arr


def check_finite(x: np.ndarray, name: str) -> None:
    """Raise ValueError if ``x`` (any shape) holds NaN or ±inf, saying how many and where first."""
    bad = ~np.isfinite(x)
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"{name} contains {int(bad.sum())} NaN/inf value(s) (first at index {first}); "
            "attention needs finite numbers"
        )


def check_qkv_shapes(Q_shape, K_shape, V_shape) -> None:
    """Raise ValueError unless Q (..., n_q, d_k), K (..., n_k, d_k), V (..., n_k, d_v) fit.

    Takes shapes (tuples or torch.Size), so numpy and torch code share one check; the message
    names both shapes that disagree.
    """
    Q_shape, K_shape, V_shape = tuple(Q_shape), tuple(K_shape), tuple(V_shape)
    if Q_shape[-1] != K_shape[-1]:
        raise ValueError(
            f"Q and K must share d_k (their last axis): Q has shape {Q_shape}, K has {K_shape}"
        )
    if K_shape[-2] != V_shape[-2]:
        raise ValueError(
            f"K and V must have the same number of keys n_k (second-last axis): "
            f"K has shape {K_shape}, V has {V_shape}"
        )


def softmax(x, axis: int = -1, where=None) -> np.ndarray:
    """Numerically stable softmax: exp(x - max) / sum(exp(x - max)) along ``axis``.

    x: any shape. where: optional boolean array broadcastable to x; entries where it is False get
    weight 0. A slice whose entries are all excluded (or all -inf) gives zeros, never NaN.
    Returns an array of x's shape whose slices along ``axis`` sum to 1 (or 0 if fully excluded).
    """
    x = _as_float_array(x, "x", min_ndim=0)
    if np.isnan(x).any():
        raise ValueError("softmax input contains NaN")
    if where is None:
        where = np.ones(x.shape, dtype=bool)
    where = np.broadcast_to(np.asarray(where, dtype=bool), x.shape) & (x != -np.inf)
    if x.size == 0:
        return np.zeros(x.shape, dtype=x.dtype)
    masked = np.where(where, x, -np.inf)
    m = np.max(masked, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)  # a fully excluded slice: any finite shift will do
    e = np.where(where, np.exp(np.where(where, x - m, 0.0)), 0.0)
    total = e.sum(axis=axis, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def _check_mask(mask, shape: tuple[int, ...], layout: str = "(..., n_q, n_k)") -> np.ndarray:
    mask = np.asarray(mask)
    if mask.dtype != bool:
        raise TypeError(
            f"mask must be boolean (True = may attend), got dtype {mask.dtype}; "
            "for a 0/1 array use mask.astype(bool)"
        )
    try:
        fits = np.broadcast_shapes(mask.shape, shape) == tuple(shape)
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(
            f"mask of shape {mask.shape} does not broadcast to the scores' shape {shape} "
            f"{layout}"
        )
    return mask


def scaled_dot_product_attention(Q, K, V, mask=None, scale: float | None = None):
    """softmax(Q Kᵀ / √d_k) V.

    Q: (..., n_q, d_k)   K: (..., n_k, d_k)   V: (..., n_k, d_v)
    mask: (..., n_q, n_k) bool, True where a query may attend; None = all.
    scale: the factor applied to Q Kᵀ; default 1/√d_k (what BERT uses, per head).
    Returns (output (..., n_q, d_v), weights (..., n_q, n_k)); masked-out rows get zero weights
    and a zero output. Leading dimensions broadcast (e.g. heads, batch).
    """
    Q = _as_float_array(Q, "Q", 2)
    K = _as_float_array(K, "K", 2)
    V = _as_float_array(V, "V", 2)
    check_qkv_shapes(Q.shape, K.shape, V.shape)
    for name, arr in (("Q", Q), ("K", K), ("V", V)):
        check_finite(arr, name)
    d_k = Q.shape[-1]
    if scale is None:
        scale = 1.0 / np.sqrt(d_k) if d_k > 0 else 1.0
    elif not np.isfinite(scale) or scale < 0:
        raise ValueError(f"scale must be a finite number >= 0, got {scale}")
    scores = (Q @ np.swapaxes(K, -1, -2)) * scale
    if mask is not None:
        mask = _check_mask(mask, scores.shape)
    weights = softmax(scores, axis=-1, where=mask)
    return weights @ V, weights


def causal_mask(n: int) -> np.ndarray:
    """Lower-triangular (n, n) bool mask: query i may attend to keys 0..i (GPT-style)."""
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
        raise ValueError(f"n must be a whole number >= 0, got {n!r}")
    return np.tril(np.ones((n, n), dtype=bool))


def padding_mask(lengths_or_flags, n: int | None = None) -> np.ndarray:
    """Key-padding mask (batch, 1, n): True for real tokens, False for padding.

    lengths_or_flags: either a 1-D sequence of lengths (one per batch item; then ``n`` is the
    padded length, default the longest), or a 2-D (batch, n) array of 0/1 or bool flags where 1 =
    real token (like transformers' ``attention_mask``).
    Returns shape (batch, 1, n), which broadcasts over queries: (batch, n_q, n).
    Add a head axis with ``mask[:, None]`` for (batch, heads, n_q, n).
    """
    a = np.asarray(lengths_or_flags)
    if a.ndim == 2:
        if not (a.dtype == bool or np.isin(a, (0, 1)).all()):
            raise ValueError("2-D padding flags must be 0/1 or bool (1 = real token)")
        return a.astype(bool)[:, None, :]
    if a.ndim != 1:
        raise ValueError(
            f"expected 1-D lengths or 2-D (batch, n) flags, got shape {a.shape}"
        )
    if a.size and (not np.issubdtype(a.dtype, np.integer) or (a < 0).any()):
        raise ValueError(f"lengths must be whole numbers >= 0, got {a.tolist()}")
    longest = int(a.max()) if a.size else 0
    if n is None:
        n = longest
    elif n < longest:
        raise ValueError(f"n={n} is shorter than the longest length {longest}")
    return (np.arange(n)[None, :] < a[:, None])[:, None, :]


def _check_heads(h, d: int) -> int:
    """``h`` as an int that divides d, or an error naming d, h and the valid choices."""
    if isinstance(h, bool) or not isinstance(h, int | np.integer):
        raise TypeError(f"h (the number of heads) must be a whole number, got {h!r}")
    if h <= 0:
        raise ValueError(f"h (the number of heads) must be at least 1, got {h}")
    if d % h:
        valid = [k for k in range(1, d + 1) if d % k == 0]
        raise ValueError(
            f"d = {d} is not divisible by h = {h}: every head gets d_k = d / h features, so h "
            f"must divide d. Valid h for d = {d}: {valid}"
        )
    return int(h)


def split_heads(X, h: int) -> np.ndarray:
    """Cut the feature axis into h heads of d_k = d / h features and put the head axis first.

    X: (..., n, d) -> (..., h, n, d_k), with out[..., i, t, :] = X[..., t, i·d_k : (i+1)·d_k]:
    head i gets feature columns i·d_k … (i+1)·d_k − 1 of every token.
    Raises ValueError if h does not divide d (the message lists the valid h).
    """
    X = _as_float_array(X, "X", 2)
    *lead, n, d = X.shape
    h = _check_heads(h, d)
    return np.swapaxes(X.reshape(*lead, n, h, d // h), -3, -2)


def merge_heads(X_heads) -> np.ndarray:
    """Concatenate the heads side by side again: the inverse of :func:`split_heads`.

    X_heads: (..., h, n, d_k) -> (..., n, h·d_k), with out[..., t, i·d_k : (i+1)·d_k] =
    X_heads[..., i, t, :].
    """
    X_heads = _as_float_array(X_heads, "X_heads", 3)
    *lead, h, n, d_k = X_heads.shape
    return np.swapaxes(X_heads, -3, -2).reshape(*lead, n, h * d_k)


def _check_weights(W, name: str, shape: tuple[int, ...], d: int) -> np.ndarray:
    W = _as_float_array(W, name, len(shape))
    if W.shape != shape:
        what = "a (d, d) matrix" if len(shape) == 2 else "a (d,) vector"
        raise ValueError(
            f"{name} must be {what} matching the input's d = {d}, i.e. shape {shape}; "
            f"got {W.shape}"
        )
    check_finite(W, name)
    return W


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h: int, mask=None, biases=None, X_kv=None):
    """MultiHead(X) = Concat(head_0, …, head_{h−1}) W_O + b_O, with
    head_i = softmax(Q_i K_iᵀ / √d_k) V_i,  Q = X W_Q + b_Q,  K = X_kv W_K + b_K,
    V = X_kv W_V + b_V, and Q_i, K_i, V_i = columns i·d_k … (i+1)·d_k − 1, d_k = d / h.

    X: (..., n_q, d), the queries' input. X_kv: (..., n_k, d), the keys' and values' input
    (cross-attention); None = X (self-attention, n_k = n_q).
    W_Q, W_K, W_V, W_O: (d, d), applied on the right (x W). torch.nn.Linear stores the transpose:
    W_Q = linear.weight.T.
    h: the number of heads, a divisor of d.
    mask: bool, broadcastable to (..., h, n_q, n_k), True where a query may attend: e.g. (n_k,)
    for key padding, (B, 1, 1, n_k) for a batch's key padding, (n_q, n_k) shared by all heads,
    (h, n_q, n_k) one per head. None = all.
    biases: None or a list/tuple (b_Q, b_K, b_V, b_O), each (d,) or None.
    Returns (output (..., n_q, d), weights (..., h, n_q, n_k)); each row of weights sums to 1
    (0 for a fully masked row).
    """
    X = _as_float_array(X, "X", 2)
    X_kv = X if X_kv is None else _as_float_array(X_kv, "X_kv", 2)
    d = X.shape[-1]
    h = _check_heads(h, d)
    if X_kv.shape[-1] != d:
        raise ValueError(
            f"X_kv must have the same d as X (last axis): X has shape {X.shape}, "
            f"X_kv has {X_kv.shape}"
        )
    try:
        np.broadcast_shapes(X.shape[:-2], X_kv.shape[:-2])
    except ValueError:
        raise ValueError(
            f"the leading (batch) axes of X {X.shape} and X_kv {X_kv.shape} do not broadcast"
        ) from None
    check_finite(X, "X")
    check_finite(X_kv, "X_kv")
    W_Q, W_K, W_V, W_O = (_check_weights(W, name, (d, d), d) for W, name in
                          ((W_Q, "W_Q"), (W_K, "W_K"), (W_V, "W_V"), (W_O, "W_O")))
    if biases is None:
        biases = (None,) * 4
    elif not isinstance(biases, list | tuple) or len(biases) != 4:
        raise TypeError("biases must be None or a list or tuple (b_Q, b_K, b_V, b_O) of (d,) "
                        f"vectors or None, got {type(biases).__name__}")
    b_Q, b_K, b_V, b_O = (0.0 if b is None else _check_weights(b, name, (d,), d) for b, name in
                          zip(biases, ("b_Q", "b_K", "b_V", "b_O"), strict=True))
    Q = split_heads(X @ W_Q + b_Q, h)  # (..., h, n_q, d_k)
    K = split_heads(X_kv @ W_K + b_K, h)  # (..., h, n_k, d_k)
    V = split_heads(X_kv @ W_V + b_V, h)  # (..., h, n_k, d_k)
    if mask is not None:
        scores_shape = np.broadcast_shapes(Q.shape[:-3], K.shape[:-3]) + (h, Q.shape[-2],
                                                                          K.shape[-2])
        mask = _check_mask(mask, scores_shape, "(..., h, n_q, n_k)")
    heads, weights = scaled_dot_product_attention(Q, K, V, mask=mask)
    return merge_heads(heads) @ W_O + b_O, weights
