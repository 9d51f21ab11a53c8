"""Efficient attention, built small in numpy: what each variant computes instead of the full n×n.

Full attention softmax(Q Kᵀ/√d_k) V costs O(n²·d) time and O(n²) memory. Each function here
replaces the n×n score matrix with something cheaper, and says which pairs (i, j) it keeps:

- :func:`sliding_window_attention` (Longformer, Beltagy et al. 2020): a band of w + 1 keys
  around each query, plus global tokens;
- :func:`block_sparse_attention` (BigBird, Zaheer et al. 2020): window, random and global blocks;
- :func:`linformer_attention` (Wang et al. 2020): keys and values projected to length k;
- :func:`performer_attention` (FAVOR+, Choromanski et al. 2021): positive random features,
  no n×n matrix at all;
- :func:`lsh_attention` (Reformer, Kitaev et al. 2020): shared QK, angular LSH buckets, attention
  inside sorted chunks.

All take one head: Q (n, d_k), K (n, d_k), V (n, d_v). ``return_weights=True`` also returns the
(n, n) attention the variant implies (for plots at small n; it costs n² memory, so the fast path
never builds it). :func:`bert_qkv` and :func:`bert_layer` take Q, K, V from the real BERT and put a
variant into one of its layers.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from bertlib.attention import _attend, _softmax, check_qkv_shapes, softmax, split_heads
from bertlib.bert import BertParams, LayerParams, bert_params, encoder_layer
from bertlib.checks import as_array, same_shape, whole
from bertlib.models import bert_module, check_layer_head

__all__ = [
    "relative_error",
    "sliding_window_pattern",
    "sliding_window_attention",
    "sliding_window_attention_plain",
    "block_sparse_pattern",
    "block_sparse_attention",
    "linformer_projections",
    "linformer_attention",
    "orthogonal_features",
    "performer_features",
    "performer_attention",
    "lsh_buckets",
    "lsh_pattern",
    "lsh_attention",
    "bert_qkv",
    "bert_layer",
]


# ---------------------------------------------------------------- checks shared by the variants


def _one_head(Q, K, V) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One head's Q (n, d_k), K (n, d_k), V (n, d_v), checked once: 2-D, finite, sizes that fit,
    as many queries as keys (self-attention), cast to one float type."""
    Q, K, V = (as_array(x, name, 2, layout="(one head, a 2-D (n, d) array; loop over heads and "
                                          "batch items for more)")
               for name, x in (("Q", Q), ("K", K), ("V", V)))
    check_qkv_shapes(Q.shape, K.shape, V.shape)
    if Q.shape[0] != K.shape[0] or Q.shape[0] == 0:
        raise ValueError(f"self-attention needs n >= 1 tokens, as many queries as keys: Q has "
                         f"shape {Q.shape}, K has {K.shape}")
    dtype = np.result_type(Q, K, V)  # one float type: mixed float32/float64 products are slow
    return Q.astype(dtype, copy=False), K.astype(dtype, copy=False), V.astype(dtype, copy=False)


def _scale(d_k: int) -> float:
    return float(1.0 / np.sqrt(d_k))  # a Python float keeps float32 inputs float32


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


# ---------------------------------------------------------------- Longformer: sliding window


def _window_half(w, n: int) -> int:
    """w/2 for a valid window w (a positive even number), capped at n − 1."""
    w = whole(w, "w (the window)", 1)
    if w % 2:
        raise ValueError(
            f"w must be even: a token sees w/2 keys on each side (w + 1 with itself), so an odd "
            f"w={w} has no whole half; use {w - 1} or {w + 1}"
        )
    return min(w // 2, n - 1)


def _global_positions(global_idx, n: int) -> np.ndarray:
    """Sorted unique global positions, each a whole number in 0..n−1."""
    why = f"(token positions run 0..{n - 1}, n={n})"
    return np.unique(np.array([whole(i, "every global_idx entry", 0, n - 1, why=why)
                               for i in global_idx], dtype=int))


def sliding_window_pattern(n: int, w: int, global_idx=()) -> np.ndarray:
    """Which pairs Longformer's sliding window + global attention keeps, as an (n, n) bool mask.

    Query i may attend key j when |i − j| ≤ w/2, or when i or j is global.
    n: tokens; w: a positive even window; global_idx: positions in 0..n−1.
    Returns (n, n) bool, True = may attend (for plots; the attention itself never builds it).
    """
    n = whole(n, "n", 1)
    half = _window_half(w, n)
    g = _global_positions(global_idx, n)
    i = np.arange(n)
    mask = np.abs(i[:, None] - i[None, :]) <= half
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
    Q, K, V = _one_head(Q, K, V)
    n, d_k = Q.shape
    half = _window_half(w, n)
    g = _global_positions(global_idx, n)
    is_global = np.zeros(n, dtype=bool)
    is_global[g] = True

    B = max(half, 1)  # queries per block
    n_blocks = -(-n // B)
    S = B + 2 * half  # keys per slab
    starts = np.arange(n_blocks)[:, None, None] * B
    rows = starts + np.arange(B)[None, :, None]  # (n_blocks, B, 1) query index
    cols = starts - half + np.arange(S)[None, None, :]  # (n_blocks, 1, S) key index
    in_band = np.abs(np.arange(B)[:, None] - np.arange(S)[None, :] + half) <= half  # (B, S)
    real_key = (cols >= 0) & (cols < n) & ~is_global[np.clip(cols, 0, n - 1)]  # globals apart
    keep = in_band & real_key & (rows < n)  # (n_blocks, B, S)
    pad = ((half, n_blocks * B - n + half), (0, 0))

    def slabs(X):  # (n_blocks, d, S): block t's S rows of X, a strided view of the padded X
        # made contiguous (3·n·d numbers), so that the batched products below run in BLAS
        return np.ascontiguousarray(sliding_window_view(np.pad(X, pad), S, axis=0)[::B])

    K_slab = slabs(K)  # (n_blocks, d_k, S)
    V_slab = np.swapaxes(slabs(V), 1, 2)  # (n_blocks, S, d_v)
    Q_blocks = np.pad(Q, ((0, n_blocks * B - n), (0, 0))).reshape(n_blocks, B, d_k)
    scale = _scale(d_k)
    band = (Q_blocks @ K_slab) * scale  # (n_blocks, B, S)
    to_global = ((Q_blocks @ K[g].T) * scale)  # (n_blocks, B, g)
    weights = _softmax(np.concatenate([band, to_global], axis=2),
                       where=np.concatenate([keep, np.ones(to_global.shape, bool)], axis=2))
    w_band, w_global = weights[..., :S], weights[..., S:]
    out = (w_band @ V_slab + w_global @ V[g]).reshape(-1, V.shape[1])[:n]
    out_g, weights_g = _attend(Q[g], K, V)  # global rows see everything
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
    """The teaching twin of :func:`sliding_window_attention`: one query at a time.

        out_i = softmax_j(q_i·k_j / √d_k) over j ∈ N(i), times v_j,
        N(i) = {j : |i − j| ≤ w/2} ∪ G for an ordinary token, every j for a global one.
    Q, K: (n, d_k); V: (n, d_v); w: positive even int; global_idx: positions in 0..n−1.
    Returns out (n, d_v). A loop over the n queries, each with at most w + 1 + |G| keys: read it
    beside the formula. The fast function computes the same in blocks; a test proves them equal.
    """
    Q, K, V = _one_head(Q, K, V)
    n, d_k = Q.shape
    half = _window_half(w, n)
    G = _global_positions(global_idx, n)
    out = np.zeros((n, V.shape[1]), dtype=np.result_type(Q, V))
    for i in range(n):
        if i in G:
            keys = np.arange(n)  # a global token reads every token
        else:
            window = np.arange(max(0, i - half), min(n, i + half + 1))
            keys = np.union1d(window, G)  # its window, plus the global tokens
        scores = K[keys] @ Q[i] * _scale(d_k)
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
    layout = np.abs(idx[:, None] - idx[None, :]) <= 1  # window: the block and its neighbours
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
    Q, K, V = _one_head(Q, K, V)
    n = Q.shape[0]
    layout = _block_layout(n, block, n_random, global_blocks, seed)
    out = np.zeros((n, V.shape[1]), dtype=np.result_type(Q, V))
    dense = np.zeros((n, n), dtype=out.dtype) if return_weights else None
    for qb in range(layout.shape[0]):
        rows = slice(qb * block, (qb + 1) * block)
        keys = (np.flatnonzero(layout[qb])[:, None] * block + np.arange(block)).ravel()
        out[rows], w = _attend(Q[rows], K[keys], V[keys])
        if dense is not None:
            dense[rows, keys] = w
    return (out, dense) if return_weights else out


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


def _projection(P, name: str, k: int, n: int) -> np.ndarray:
    P = as_array(P, name)
    if P.shape != (k, n):
        raise ValueError(f"{name} must have shape (k, n) = ({k}, {n}), got {P.shape}")
    return P


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
    Q, K, V = _one_head(Q, K, V)
    n = K.shape[0]
    k = whole(k, "k", 1, n, why=f"(the projected length, at most n={n})")
    E = linformer_projections(n, k, seed) if E is None else _projection(E, "E", k, n)
    F = E if F is None else _projection(F, "F", k, n)
    E, F = E.astype(Q.dtype, copy=False), F.astype(Q.dtype, copy=False)
    out, P = _attend(Q, E @ K, F @ V)  # P: (n, k)
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
    X, omega = as_array(X, "X", 2, layout="(n, d)"), as_array(omega, "omega", 2, layout="(m, d)")
    if X.shape[1] != omega.shape[1]:
        raise ValueError(f"X (n, d) and omega (m, d) must have the same d, got shapes "
                         f"{X.shape} and {omega.shape}")
    return np.exp(_log_features(X, omega))


def performer_attention(Q, K, V, m: int, seed: int | None = 0, return_weights: bool = False):
    """Performer's FAVOR+ attention: exp(q·k) estimated by positive random features.

    Idea: exp(qᵀk) = E_ω[φ(q)ᵀφ(k)] with φ(x) = exp(ωᵀx − ‖x‖²/2)/√m, so the softmax's n×n
    matrix factors into φ(Q) φ(K)ᵀ and the product can be taken in the cheap order.
        Q' = Q/d_k^{1/4}, K' = K/d_k^{1/4} (so q'·k' = q·k/√d_k), ω: (m, d_k) orthogonal,
        out = D⁻¹ φ(Q') (φ(K')ᵀ V),  D = diag(φ(Q') (φ(K')ᵀ 1_n)).
    Rows of φ(Q') and the whole of φ(K') are rescaled by a constant before exp (it cancels in
    D⁻¹), so nothing overflows. The estimate improves as m grows.
    Cost: O(n·m·d) time and O(n·m) memory: linear in n, no n×n matrix.

    Q, K: (n, d_k); V: (n, d_v); m ≥ 1. Returns out (n, d_v), or (out, implied weights (n, n)),
    whose rows are positive and sum to 1.
    """
    Q, K, V = _one_head(Q, K, V)
    m = whole(m, "m (the number of random features)", 1)
    d_k = Q.shape[1]
    omega = orthogonal_features(m, d_k, seed).astype(Q.dtype)
    c = d_k ** -0.25
    log_q = _log_features(Q * c, omega)
    log_k = _log_features(K * c, omega)
    phi_q = np.exp(log_q - log_q.max(axis=1, keepdims=True))  # (n, m)
    phi_k = np.exp(log_k - log_k.max())  # (n, m)
    numerator = phi_q @ (phi_k.T @ V)  # (n, d_v) via an (m, d_v) summary
    D = phi_q @ phi_k.sum(axis=0)  # (n,)
    out = numerator / D[:, None]
    if not return_weights:
        return out
    return out, (phi_q @ phi_k.T) / D[:, None]


# ---------------------------------------------------------------- Reformer: LSH


def _lsh_checks(n: int, n_buckets, n_hashes, chunk) -> tuple[int, int, int]:
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
    n_buckets, n_hashes, _ = _lsh_checks(X.shape[0], n_buckets, n_hashes, X.shape[0])
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
    n_buckets, n_hashes, chunk = _lsh_checks(n, n_buckets, n_hashes, chunk)
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
    Q, _, V = _one_head(Q, Q, V)
    n, d = Q.shape
    n_buckets, n_hashes, chunk = _lsh_checks(n, n_buckets, n_hashes, chunk)
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
        scores = (Q[order] @ np.swapaxes(K[kj[:, 0]], 1, 2)) * _scale(d)  # (c_n, chunk, 2·chunk)
        logits = np.where(allowed, scores - np.log(np.maximum(seen, 1)), -np.inf)
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


# ---------------------------------------------------------------- the real BERT, one layer by hand


def _layer_params(model, layer) -> tuple[LayerParams, BertParams]:
    """(LayerParams of ``layer``, BertParams) of ``model`` (None = the bundled BERT)."""
    bert = bert_module(model)
    layer, _ = check_layer_head(bert, layer)
    params = bert_params(bert)
    return params.layers[layer], params


def bert_qkv(hidden, layer: int, model=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Q, K, V of every head of BERT's layer ``layer`` from its input hidden states.

        Q = X W_Q + b_Q (likewise K, V), split into h heads of d_k = d/h features.
    hidden: X (n, d), the layer's input (``run_bert(text).hidden_states[layer]``).
    model: a LoadedBert or BertModel (default: the bundled BERT).
    Returns Q, K, V each (h, n, d_k) float64.
    """
    p, params = _layer_params(model, layer)
    X = as_array(hidden, "hidden", 2, layout="(n, d)").astype(np.float64)
    if X.shape[1] != p.W_Q.shape[0]:
        raise ValueError(f"hidden must be (n, {p.W_Q.shape[0]}) for this model, got shape "
                         f"{X.shape}")
    return tuple(split_heads(X @ W + b, params.h)
                 for W, b in ((p.W_Q, p.b_Q), (p.W_K, p.b_K), (p.W_V, p.b_V)))


def bert_layer(hidden, layer: int, attend=None, model=None) -> np.ndarray:
    """One BERT encoder layer in numpy, with each head's attention computed by ``attend``:
    :func:`bertlib.bert.encoder_layer` with the attention swapped,

        A = Concat_i attend(Q_i, K_i, V_i) W_O + b_O;  X' = LayerNorm(X + A)
        out = LayerNorm(X' + GELU(X' W_1 + b_1) W_2 + b_2)
    hidden: X (n, d), the layer's input; attend(Q, K, V) -> (n, d_k) for one head, with Q, K, V
    (n, d_k), e.g. ``lambda Q, K, V: sliding_window_attention(Q, K, V, 4)``; None = BERT's
    full softmax attention. No padding (one unpadded sequence).
    Returns the layer's output (n, d) float64 (``hidden_states[layer + 1]`` when attend is None).
    """
    p, params = _layer_params(model, layer)
    return encoder_layer(hidden, p, params.h, eps=params.eps, attend=attend)[0]
