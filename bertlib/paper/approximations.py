"""Approximations of full softmax attention, built small in numpy: none keeps exact softmax weights.

Full attention softmax(Q Kᵀ/√d_k) V costs O(n²·d) time and O(n²) memory. Each function here
estimates all of it, or a part chosen by hashing, more cheaply:

- :func:`linformer_attention` (Wang et al. 2020): keys and values projected to length k;
- :func:`performer_attention` (FAVOR+, Choromanski et al. 2021): positive random features,
  no n×n matrix at all;
- :func:`lsh_attention` (Reformer, Kitaev et al. 2020): shared QK, angular LSH buckets, attention
  inside sorted chunks.

All take one head: Q (n, d_k), K (n, d_k), V (n, d_v). ``return_weights=True`` also returns the
(n, n) attention the variant implies (for plots at small n; it costs n² memory, so the fast path
never builds it). :func:`relative_error` measures how far any variant's output is from full
attention. Each checks its one head with :func:`bertlib.paper.attention.check_one_head`, as the
sparse patterns of :mod:`bertlib.paper.variants` do.
"""

from __future__ import annotations

import math

import numpy as np

from bertlib.checks import as_array, same_shape, whole
from bertlib.paper.attention import attention_scale, check_one_head, scaled_dot_product_attention

__all__ = [
    "relative_error",
    "linformer_projections",
    "linformer_attention",
    "orthogonal_features",
    "performer_features",
    "performer_attention",
    "lsh_buckets",
    "lsh_pattern",
    "lsh_attention",
]


def relative_error(approx, exact) -> float:
    """‖approx − exact‖_F / ‖exact‖_F: how far a variant's output is from full attention.

    approx, exact: arrays of the same shape (e.g. outputs (n, d_v)). 0 means identical.
    """
    approx, exact = as_array(approx, "approx"), as_array(exact, "exact")
    same_shape(approx, exact, ("approx", "exact"))
    norm = np.linalg.norm(exact)
    if norm == 0:
        raise ValueError("exact is all zeros: a relative error is undefined")
    return float(np.linalg.norm(approx - exact) / norm)


# ---------------------------------------------------------------- Linformer: low rank


def linformer_projections(n: int, k: int, seed: int | None = 0) -> np.ndarray:
    """A random (k, n) projection E with entries drawn from N(0, 1/k) (seeded).

    Linformer learns E and F during training; a random Gaussian projection is the untrained
    stand-in (Johnson–Lindenstrauss: it keeps lengths roughly, E[EᵀE] = I).
    Returns (k, n) float64.
    """
    n = whole(n, "n", 1)
    k = whole(k, "k", 1, n, why=f"(the projected length, at most n={n})")
    return np.random.default_rng(seed).normal(0.0, 1.0 / np.sqrt(k), size=(k, n))


def _check_projection(P, name: str, k: int, n: int) -> np.ndarray:
    """Linformer's E or F: a finite (k, n) array."""
    return as_array(P, name, shape=(k, n), layout="(k, n)")


def linformer_attention(Q, K, V, k: int, E=None, F=None, seed: int | None = 0,
                        return_weights: bool = False):
    """Linformer's attention: project keys and values along the sequence to length k.

    Idea: attention matrices are close to low rank, so mix the n keys (and values) into k ≪ n
    summaries and let each query attend to those.
        out = softmax(Q (E K)ᵀ / √d_k) (F V),   E, F: (k, n)
    E defaults to :func:`linformer_projections` (random, seeded); F defaults to E (Linformer's
    key-value sharing). With k = n and E = F = I this is full attention.
    Cost: O(n·k·d) time, O(n·k) memory.
    The implied attention on the original tokens is P̄ F (n, n), with P̄ the (n, k) softmax:
    its rows still sum to 1 only if F's columns sum to 1, and entries can be negative.

    Q, K: (n, d_k); V: (n, d_v); k: 1..n; E, F: (k, n).
    Returns out (n, d_v), or (out, implied weights (n, n)).
    """
    Q, K, V = check_one_head(Q, K, V)
    n = K.shape[0]
    k = whole(k, "k", 1, n, why=f"(the projected length, at most n={n})")
    E = linformer_projections(n, k, seed) if E is None else _check_projection(E, "E", k, n)
    F = E if F is None else _check_projection(F, "F", k, n)
    E, F = E.astype(Q.dtype, copy=False), F.astype(Q.dtype, copy=False)
    out, P = scaled_dot_product_attention(Q, E @ K, F @ V)  # P: (n, k)
    return (out, P @ F) if return_weights else out


# ---------------------------------------------------------------- Performer: random features


def orthogonal_features(m: int, d: int, seed: int | None = 0) -> np.ndarray:
    """m random directions ω (m, d) for FAVOR+: orthogonal within blocks of d, each N(0, I) in law.

    Each block of d rows is an orthonormal basis (QR of a Gaussian matrix, signs fixed so it is
    uniformly random) with its rows rescaled to the lengths of d-dimensional Gaussian vectors.
    Returns (m, d) float64.
    """
    m = whole(m, "m (the number of random features)", 1)
    d = whole(d, "d", 1)
    rng = np.random.default_rng(seed)
    blocks = []
    for _ in range(-(-m // d)):
        q, r = np.linalg.qr(rng.standard_normal((d, d)))
        q = q * np.sign(np.diag(r))  # columns orthonormal, Haar-uniform
        lengths = np.linalg.norm(rng.standard_normal((d, d)), axis=1)
        blocks.append(q.T * lengths[:, None])
    return np.concatenate(blocks)[:m]


def _log_features(X: np.ndarray, omega: np.ndarray) -> np.ndarray:
    """log φ(x) = ωᵀx − ‖x‖²/2 − log(m)/2 for every row x of X (n, d) → (n, m)."""
    return X @ omega.T - 0.5 * (X**2).sum(1, keepdims=True) - 0.5 * np.log(omega.shape[0])


def performer_features(X, omega) -> np.ndarray:
    """FAVOR+'s positive random features φ(x) = exp(ωᵢᵀx − ‖x‖²/2)/√m, i = 1..m, for each row x.

    For ω ~ N(0, I), E[exp(ωᵀq − ‖q‖²/2) exp(ωᵀk − ‖k‖²/2)] = exp(q·k), so φ(q)·φ(k) is an
    unbiased estimate of exp(q·k), averaged over the m features (orthogonal ω keep it unbiased:
    each ω is still N(0, I) on its own). Not stabilised: large ‖x‖ can overflow, which
    :func:`performer_attention` avoids.
    X: (n, d); omega: (m, d), e.g. :func:`orthogonal_features`. Returns (n, m), all positive.
    """
    X = as_array(X, "X", 2, layout="(n, d)")
    omega = as_array(omega, "omega", shape=(None, X.shape[1]), layout="(m, d)",
                     why="(the same d as X)")
    return np.exp(_log_features(X, omega))


def performer_attention(Q, K, V, m: int, seed: int | None = 0, return_weights: bool = False):
    """Performer's FAVOR+ attention: exp(q·k) estimated by positive random features.

    Idea: exp(qᵀk) = E_ω[φ(q)ᵀφ(k)] with φ(x) = exp(ωᵀx − ‖x‖²/2)/√m, so the softmax's n×n
    matrix factors into φ(Q) φ(K)ᵀ and the product can be taken in the cheap order.
        Q' = Q √s, K' = K √s, s = 1/√d_k (so q'·k' = q·k · s), ω: (m, d_k) orthogonal,
        out = D⁻¹ φ(Q') (φ(K')ᵀ V),  D = diag(φ(Q') (φ(K')ᵀ 1_n)).
    Rows of φ(Q') and the whole of φ(K') are rescaled by a constant before exp (it cancels in
    D⁻¹), so nothing overflows. The estimate improves as m grows.
    Cost: O(n·m·d) time and O(n·m) memory: linear in n, no n×n matrix.

    Q, K: (n, d_k); V: (n, d_v); m ≥ 1. Returns out (n, d_v), or (out, implied weights (n, n)),
    whose rows are positive and sum to 1.
    """
    Q, K, V = check_one_head(Q, K, V)
    m = whole(m, "m (the number of random features)", 1)
    d_k = Q.shape[1]
    omega = orthogonal_features(m, d_k, seed).astype(Q.dtype)
    root_s = math.sqrt(attention_scale(d_k))  # half the scale on each side: q'·k' = q·k · s
    log_q = _log_features(Q * root_s, omega)
    log_k = _log_features(K * root_s, omega)
    phi_q = np.exp(log_q - log_q.max(axis=1, keepdims=True))  # (n, m)
    phi_k = np.exp(log_k - log_k.max())  # (n, m)
    numerator = phi_q @ (phi_k.T @ V)  # (n, d_v) via an (m, d_v) summary
    D = phi_q @ phi_k.sum(axis=0)  # (n,)
    out = numerator / D[:, None]
    if not return_weights:
        return out
    return out, (phi_q @ phi_k.T) / D[:, None]


# ---------------------------------------------------------------- Reformer: LSH


def _check_lsh(n: int, n_buckets, n_hashes, chunk) -> tuple[int, int, int]:
    n_buckets = whole(n_buckets, "n_buckets", 1)
    if n_buckets > 1 and n_buckets % 2:
        raise ValueError(
            f"n_buckets must be 1 or even: angular LSH takes the argmax over [xR; −xR], which "
            f"makes buckets in pairs; got {n_buckets}, use {n_buckets - 1} or {n_buckets + 1}"
        )
    n_hashes = whole(n_hashes, "n_hashes", 1)
    if chunk is None:
        if n % n_buckets:
            raise ValueError(
                f"n_buckets={n_buckets} does not divide n={n}, so the default chunk length "
                f"n/n_buckets is not whole: pick n_buckets dividing {n}, or pass chunk"
            )
        chunk = n // n_buckets
    chunk = whole(chunk, "chunk", 1, n, why=f"(n={n})")
    if n % chunk:
        raise ValueError(f"chunk={chunk} must divide n={n} (the sorted tokens are cut in chunks)")
    return n_buckets, n_hashes, chunk


def lsh_buckets(X, n_buckets: int, n_hashes: int = 1, seed: int | None = 0) -> np.ndarray:
    """Angular LSH bucket of each row of X (n, d): h(x) = argmax([xR; −xR]), R: (d, n_buckets/2).

    Vectors pointing in similar directions tend to share a bucket. One random R per hash round.
    n_buckets: 1 (everyone together) or even. Returns (n_hashes, n) ints in 0..n_buckets−1.
    """
    X = as_array(X, "X", 2, layout="(n, d)")
    n_buckets, n_hashes, _ = _check_lsh(X.shape[0], n_buckets, n_hashes, X.shape[0])
    return _buckets(X, n_buckets, n_hashes, seed)


def _buckets(X: np.ndarray, n_buckets: int, n_hashes: int, seed) -> np.ndarray:
    """:func:`lsh_buckets` on checked arguments."""
    if n_buckets == 1:
        return np.zeros((n_hashes, X.shape[0]), dtype=int)
    rng = np.random.default_rng(seed)
    R = rng.standard_normal((n_hashes, X.shape[1], n_buckets // 2))
    xR = X @ R.astype(X.dtype)  # (n_hashes, n, n_buckets/2)
    return np.concatenate([xR, -xR], axis=-1).argmax(axis=-1)


def _lsh_rounds(Q: np.ndarray, n_buckets: int, n_hashes: int, seed, chunk: int):
    """Buckets (n_hashes, n), and per hash round: query ids (c_n, chunk), key ids (c_n, 2·chunk;
    −1 = none), allowed (c_n, chunk, 2·chunk) bool.

    Tokens are sorted by (bucket, position) and cut into chunks; a chunk's queries see the keys
    of their own and the previous chunk that share their bucket. A token does not see itself if
    any round gives it another key (Reformer's rule for shared QK); then some rounds may leave
    it no key at all (an all-False row).
    """
    n = Q.shape[0]
    buckets = _buckets(Q, n_buckets, n_hashes, seed)  # (n_hashes, n)
    rounds = []
    has_other = np.zeros(n, dtype=bool)  # some round offers the token a key other than itself
    for b in buckets:
        order = np.lexsort((np.arange(n), b)).reshape(-1, chunk)  # (c_n, chunk) token ids
        previous = np.concatenate([np.full((1, chunk), -1), order[:-1]])
        keys = np.concatenate([previous, order], axis=1)  # (c_n, 2·chunk)
        allowed = (keys[:, None, :] >= 0) & (b[order][:, :, None] == b[keys][:, None, :])
        is_self = keys[:, None, :] == order[:, :, None]
        has_other[order] |= (allowed & ~is_self).any(axis=-1)
        rounds.append((order, keys, allowed, is_self))
    return buckets, [(order, keys, allowed & ~(is_self & has_other[order][:, :, None]))
                     for order, keys, allowed, is_self in rounds]


def lsh_pattern(Q, n_buckets: int, n_hashes: int = 1, seed: int | None = 0,
                chunk: int | None = None) -> np.ndarray:
    """Which pairs Reformer's LSH attention keeps for these queries, as an (n, n) bool mask.

    Pair (i, j) is kept when, in some hash round, j shares i's bucket and sits in i's chunk or the
    chunk before it (after sorting by bucket). The diagonal (i, i) is kept only for a token that
    no round gives another key (shared QK: q_i·k_i would otherwise dominate).
    Q: (n, d). Returns (n, n) bool.
    """
    Q = as_array(Q, "Q", 2, layout="(one head, a 2-D (n, d) array)")
    n = Q.shape[0]
    n_buckets, n_hashes, chunk = _check_lsh(n, n_buckets, n_hashes, chunk)
    mask = np.zeros((n, n), dtype=bool)
    for order, keys, allowed in _lsh_rounds(Q, n_buckets, n_hashes, seed, chunk)[1]:
        rows = np.broadcast_to(order[:, :, None], allowed.shape)
        mask[rows[allowed], np.broadcast_to(keys[:, None, :], allowed.shape)[allowed]] = True
    return mask


def lsh_attention(Q, V, n_buckets: int, n_hashes: int = 1, seed: int | None = 0,
                  chunk: int | None = None, return_weights: bool = False):
    """Reformer's LSH attention: attend only to keys in the same hash bucket.

    Idea: softmax is dominated by the largest q·k, and similar directions land in the same
    angular-LSH bucket, so sort tokens by bucket, cut them into chunks, and let each query attend
    within its chunk and the previous one. Keys are shared with queries: k_j = q_j / ‖q_j‖.
        out_i = Σ_{j ∈ N(i)} softmax_j(q_i·k_j / √d) v_j,  N(i) from :func:`lsh_pattern`.
    As in the paper, a token does not attend to itself (with shared QK, q_i·k_i = ‖q_i‖ would
    win almost always) unless it has no other key in reach. With several hash rounds N(i) is the
    union over rounds; a pair found in c rounds has its weight divided by c, so this is exactly
    softmax over the union. One bucket (one chunk) gives full shared-QK attention without the
    diagonal.
    Cost: O(n_hashes·n·chunk·d) time and O(n_hashes·n·chunk) memory, plus the O(n log n) sort.
    Defaults: chunk = n / n_buckets (so n_buckets must divide n); n_buckets 1 or even.

    Q: (n, d) shared queries/keys; V: (n, d_v).
    Returns out (n, d_v), or (out, weights (n, n)).
    """
    Q, _, V = check_one_head(Q, Q, V)
    n, d = Q.shape
    n_buckets, n_hashes, chunk = _check_lsh(n, n_buckets, n_hashes, chunk)
    norms = np.linalg.norm(Q, axis=1, keepdims=True)
    K = np.divide(Q, norms, out=np.zeros_like(Q), where=norms > 0)
    buckets, rounds = _lsh_rounds(Q, n_buckets, n_hashes, seed, chunk)
    chunk_of = np.empty((n_hashes, n), dtype=int)  # chunk index of each token, per round
    for r, (order, _, _) in enumerate(rounds):
        chunk_of[r, order] = np.arange(order.shape[0])[:, None]
    outs, lses, parts = [], [], []
    for order, keys, allowed in rounds:
        qi, kj = order[:, :, None], np.where(keys < 0, 0, keys)[:, None, :]
        seen = np.zeros(allowed.shape, dtype=Q.dtype)  # in how many rounds each pair is kept
        for b, c in zip(buckets, chunk_of, strict=True):
            gap = c[qi] - c[kj]
            seen += (b[qi] == b[kj]) & ((gap == 0) | (gap == 1))
        scores = (Q[order] @ np.swapaxes(K[kj[:, 0]], 1, 2)) * attention_scale(d)  # (c_n, c, 2c)
        logits = np.where(allowed, scores - np.log(np.maximum(seen, 1)), -np.inf)
        # not attention.softmax: the rounds are joined by their log-sum-exp (below), which needs
        # the max and the sum a softmax hides; the same stable form (shift by the max, e^−∞ = 0)
        top = logits.max(axis=-1, keepdims=True)
        top = np.where(np.isfinite(top), top, 0.0)  # a row with no key in this round
        e = np.exp(logits - top)
        total = e.sum(axis=-1, keepdims=True)
        out_r = np.zeros((n, V.shape[1]), dtype=Q.dtype)
        out_r[order] = (e @ V[kj[:, 0]]) / np.where(total > 0, total, 1.0)
        lse_r = np.full(n, -np.inf, dtype=Q.dtype)  # log Σ exp over this round's keys
        log_total = np.log(total, out=np.full_like(total, -np.inf), where=total > 0)
        lse_r[order] = (top + log_total)[..., 0]
        outs.append(out_r)
        lses.append(lse_r)
        parts.append((qi, kj, logits))
    lse = np.logaddexp.reduce(np.stack(lses), axis=0)  # (n,): every token has a key in some round
    out = sum(np.exp(l_r - lse)[:, None] * o_r for l_r, o_r in zip(lses, outs, strict=True))
    if not return_weights:
        return out
    dense = np.zeros((n, n))
    for qi, kj, logits in parts:
        rows, cols = np.broadcast_arrays(qi, kj)
        np.add.at(dense, (rows, cols), np.exp(logits - lse[rows]))
    return out, dense
