"""Scaled dot-product attention in numpy: the reference every notebook checks against.

Shapes: one sequence is ``(n, d)``; any number of leading batch/head dimensions may precede the
last two axes. Masks are boolean with ``True`` = "this query may attend to this key".
"""

from __future__ import annotations

import numpy as np

from bertlib.checks import as_array, heads_dividing, number, whole

__all__ = [
    "softmax",
    "scaled_dot_product_attention",
    "causal_mask",
    "padding_mask",
    "check_qkv_shapes",
    "split_heads",
    "merge_heads",
    "multi_head_attention",
]


def check_qkv_shapes(Q_shape, K_shape, V_shape) -> None:
    """Raise ValueError unless Q (..., n_q, d_k), K (..., n_k, d_k), V (..., n_k, d_v) fit.

    Takes shapes (tuples or torch.Size), so numpy and torch code share one check; the message
    names what disagrees and all three shapes.
    """
    Q_shape, K_shape, V_shape = tuple(Q_shape), tuple(K_shape), tuple(V_shape)
    problems = [why for bad, why in (
        (Q_shape[-1] != K_shape[-1], "Q and K must share d_k (their last axis)"),
        (K_shape[-2] != V_shape[-2], "K and V must have the same number of keys n_k "
                                     "(second-last axis)")) if bad]
    if problems:
        raise ValueError(f"{'; '.join(problems)}: Q has shape {Q_shape}, K has {K_shape}, "
                         f"V has {V_shape}")


def softmax(x, axis: int = -1, where=None) -> np.ndarray:
    """Numerically stable softmax: exp(x - max) / sum(exp(x - max)) along ``axis``.

    x: any shape. where: optional boolean array broadcastable to x; entries where it is False get
    weight 0. A slice whose entries are all excluded (or all -inf) gives zeros, never NaN.
    Returns an array of x's shape whose slices along ``axis`` sum to 1 (or 0 if fully excluded).
    """
    x = as_array(x, "x", finite=False)  # -inf is a valid score: "never attend here"
    if np.isnan(x).any():
        raise ValueError("softmax input contains NaN")
    return _softmax(x, axis, where)


def _softmax(x: np.ndarray, axis: int = -1, where=None) -> np.ndarray:
    """:func:`softmax` on an already checked float array."""
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
    """``mask`` as a bool array that broadcasts to the scores' ``shape``, or a clear error."""
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


def _qkv(Q, K, V) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Q, K, V as finite float arrays of at least 2 axes whose shapes fit (one check)."""
    Q, K, V = (as_array(x, name, min_ndim=2, layout="(..., n, d)")
               for x, name in ((Q, "Q"), (K, "K"), (V, "V")))
    check_qkv_shapes(Q.shape, K.shape, V.shape)
    return Q, K, V


def _scores_shape(Q: np.ndarray, K: np.ndarray) -> tuple[int, ...]:
    """The shape of Q Kᵀ: the broadcast leading axes, then (n_q, n_k)."""
    return np.broadcast_shapes(Q.shape[:-2], K.shape[:-2]) + (Q.shape[-2], K.shape[-2])


def scaled_dot_product_attention(Q, K, V, mask=None, scale: float | None = None):
    """softmax(Q Kᵀ / √d_k) V.

    Q: (..., n_q, d_k)   K: (..., n_k, d_k)   V: (..., n_k, d_v)
    mask: (..., n_q, n_k) bool, True where a query may attend; None = all.
    scale: the factor applied to Q Kᵀ; default 1/√d_k (what BERT uses, per head).
    Returns (output (..., n_q, d_v), weights (..., n_q, n_k)); masked-out rows get zero weights
    and a zero output. Leading dimensions broadcast (e.g. heads, batch).
    """
    Q, K, V = _qkv(Q, K, V)
    scale = None if scale is None else number(scale, "scale", 0)
    mask = None if mask is None else _check_mask(mask, _scores_shape(Q, K))
    return _attend(Q, K, V, mask, scale)


def _attend(Q: np.ndarray, K: np.ndarray, V: np.ndarray, mask=None, scale=None):
    """softmax(Q Kᵀ · scale) V on checked arrays (scale None = 1/√d_k): (output, weights)."""
    d_k = Q.shape[-1]
    if scale is None:
        scale = 1.0 / np.sqrt(d_k) if d_k > 0 else 1.0
    scores = (Q @ np.swapaxes(K, -1, -2)) * scale
    weights = _softmax(scores, axis=-1, where=mask)
    return weights @ V, weights


def causal_mask(n: int) -> np.ndarray:
    """Lower-triangular (n, n) bool mask: query i may attend to keys 0..i (GPT-style)."""
    n = whole(n, "n", 0)
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
    if a.ndim not in (1, 2) or (a.ndim == 2 and not (a.dtype == bool or np.isin(a, (0, 1)).all())):
        raise ValueError(f"expected 1-D lengths, or 2-D (batch, n) flags of 0/1 or bool (1 = real "
                         f"token); got shape {a.shape} and dtype {a.dtype}")
    if a.ndim == 2:
        return a.astype(bool)[:, None, :]
    lengths = np.array([whole(x, f"lengths[{i}]", 0) for i, x in enumerate(a.tolist())], int)
    longest = int(lengths.max()) if lengths.size else 0
    n = longest if n is None else whole(n, "n", longest, why="(not shorter than the longest "
                                                            "length)")
    return (np.arange(n)[None, :] < lengths[:, None])[:, None, :]


def split_heads(X, h: int) -> np.ndarray:
    """Cut the feature axis into h heads of d_k = d / h features and put the head axis first.

    X: (..., n, d) -> (..., h, n, d_k), with out[..., i, t, :] = X[..., t, i·d_k : (i+1)·d_k]:
    head i gets feature columns i·d_k … (i+1)·d_k − 1 of every token.
    Raises ValueError if h does not divide d (the message lists the valid h).
    """
    X = as_array(X, "X", min_ndim=2, layout="(..., n, d)", finite=False)
    return _split(X, heads_dividing(h, X.shape[-1]))


def _split(X: np.ndarray, h: int) -> np.ndarray:
    """:func:`split_heads` of a checked X whose d is a multiple of h."""
    *lead, n, d = X.shape
    return np.swapaxes(X.reshape(*lead, n, h, d // h), -3, -2)


def merge_heads(X_heads) -> np.ndarray:
    """Concatenate the heads side by side again: the inverse of :func:`split_heads`.

    X_heads: (..., h, n, d_k) -> (..., n, h·d_k), with out[..., t, i·d_k : (i+1)·d_k] =
    X_heads[..., i, t, :].
    """
    return _merge(as_array(X_heads, "X_heads", min_ndim=3, layout="(..., h, n, d_k)",
                           finite=False))


def _merge(X_heads: np.ndarray) -> np.ndarray:
    """:func:`merge_heads` of a checked array."""
    *lead, h, n, d_k = X_heads.shape
    return np.swapaxes(X_heads, -3, -2).reshape(*lead, n, h * d_k)


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
    X, X_kv, W, b, h, mask = _check_multi_head(X, X_kv, (W_Q, W_K, W_V, W_O), biases, h, mask)
    return _multi_head(X, X_kv, W, b, h, mask)


def _multi_head(X, X_kv, W, b, h: int, mask=None, attend=None):
    """:func:`multi_head_attention` on checked arguments, W = (W_Q, W_K, W_V, W_O) and
    b = (b_Q, b_K, b_V, b_O) (a bias may be 0.0).

    attend: None for softmax attention (returns its weights), or a function
    attend(Q, K, V) -> (n_q, d_k) run on each head (and batch item) alone (weights None).
    """
    W_Q, W_K, W_V, W_O = W
    b_Q, b_K, b_V, b_O = b
    Q = _split(X @ W_Q + b_Q, h)  # (..., h, n_q, d_k)
    K = _split(X_kv @ W_K + b_K, h)  # (..., h, n_k, d_k)
    V = _split(X_kv @ W_V + b_V, h)  # (..., h, n_k, d_k)
    if attend is None:
        heads, weights = _attend(Q, K, V, mask)
    else:
        heads, weights = _each_head(attend, Q, K, V), None
    return _merge(heads) @ W_O + b_O, weights


def _each_head(attend, Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
    """attend(q, k, v) on every head (and batch item) alone, stacked: (..., h, n_q, d_v)."""
    lead = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2])
    flat = [np.broadcast_to(x, lead + x.shape[-2:]).reshape(-1, *x.shape[-2:]) for x in (Q, K, V)]
    heads = np.stack([np.asarray(attend(q, k, v), dtype=Q.dtype)
                      for q, k, v in zip(*flat, strict=True)])
    one_head = (Q.shape[-2], V.shape[-1])
    if heads.shape[1:] != one_head:
        raise ValueError(f"attend must return one head's output of shape {one_head} "
                         f"(n_q, d_k), got {heads.shape[1:]}")
    return heads.reshape(lead + one_head)


def _check_multi_head(X, X_kv, W, biases, h, mask):
    """The arguments of :func:`multi_head_attention`, checked once: (X, X_kv, W, b, h, mask)."""
    X = as_array(X, "X", min_ndim=2, layout="(..., n_q, d)")
    X_kv = X if X_kv is None else as_array(X_kv, "X_kv", min_ndim=2, layout="(..., n_k, d)")
    d = X.shape[-1]
    h = heads_dividing(h, d)
    try:
        lead = np.broadcast_shapes(X.shape[:-2], X_kv.shape[:-2])
    except ValueError:
        lead = None
    if X_kv.shape[-1] != d or lead is None:
        raise ValueError(f"X_kv must have the same d as X (last axis), and leading (batch) axes "
                         f"that broadcast with X's: X has shape {X.shape}, X_kv has {X_kv.shape}")
    if biases is None:
        biases = (None,) * 4
    elif not isinstance(biases, list | tuple) or len(biases) != 4:
        raise TypeError("biases must be None or a list or tuple (b_Q, b_K, b_V, b_O) of (d,) "
                        f"vectors or None, got {type(biases).__name__}")
    W = tuple(_param(w, name, (d, d))
              for w, name in zip(W, ("W_Q", "W_K", "W_V", "W_O"), strict=True))
    b = tuple(0.0 if x is None else _param(x, name, (d,))
              for x, name in zip(biases, ("b_Q", "b_K", "b_V", "b_O"), strict=True))
    if mask is not None:
        mask = _check_mask(mask, lead + (h, X.shape[-2], X_kv.shape[-2]), "(..., h, n_q, n_k)")
    return X, X_kv, W, b, h, mask


def _param(W, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """A finite projection matrix (d, d) or bias (d,) of exactly ``shape``, or an error naming d."""
    return as_array(W, name, shape=shape, layout="(d, d)" if len(shape) == 2 else "(d,)",
                    why="(d from the input's last axis)")
