"""Checkers for notebook 07 (the BERT family): DeBERTa's δ matrix, ALBERT's parameter count,
and disentangled attention scores. Each returns a :class:`Feedback` and never raises."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from bertlib.exercises import (
    Feedback,
    as_answer_array,
    as_answer_whole,
    call_answer,
    how_far,
)
from bertlib.paper import family
from bertlib.paper.attention import attention_scale, head_columns, softmax

__all__ = ["check_relative_positions", "check_albert_parameters", "check_disentangled_scores",
           "check_score_memory", "check_albert_design"]


def check_relative_positions(answer, n: int = 6, k: int = 2) -> Feedback:
    """Check an (n, n) matrix of DeBERTa buckets δ(i, j) = clip(i − j + k, 0, 2k − 1)."""
    want = family.relative_positions(n, k)
    got = as_answer_array(answer, "δ", want.shape, why=": one row per query i, one column per "
                          "key j", todo=f"build the ({n}, {n}) matrix δ(i, j) for k={k}")
    if isinstance(got, Feedback):
        return got
    if np.array_equal(got, want):
        return Feedback(True, f"δ(i, j) is right: {2 * k} buckets, 0..{2 * k - 1}, the same along "
                              "each diagonal")
    offsets = np.arange(n)[:, None] - np.arange(n)[None, :]
    if np.array_equal(got, want.T):
        return Feedback(False, "you computed δ(j, i), the transpose: row i is query i and column "
                               "j is key j, and a key to the LEFT of its query (j < i) gets a "
                               "bucket above k")
    if np.array_equal(got, offsets):
        return Feedback(False, f"these are the raw offsets i − j, from {1 - n} to {n - 1}; bucket "
                               f"numbers start at 0 and there are only 2k = {2 * k} of them")
    if np.array_equal(got, offsets + k):
        return Feedback(False, f"right shift by k, but not clipped: distances of {k} or more "
                               f"must all share bucket {2 * k - 1} (and ≤ −{k} bucket 0)")
    if np.array_equal(got, np.clip(offsets + k, 0, 2 * k)):
        return Feedback(False, f"your largest bucket is 2k = {2 * k}, one too many: there are 2k "
                               f"buckets, numbered 0..{2 * k - 1}")
    other_k = [kk for kk in range(1, n + 1) if kk != k
               and np.array_equal(got, family.relative_positions(n, kk))]
    if other_k:
        return Feedback(False, f"these are the buckets for k = {other_k[0]}; this exercise has "
                               f"k = {k}, so {2 * k} buckets")
    wrong = np.argwhere(got != want)[0]
    return Feedback(False, f"entry (i={wrong[0]}, j={wrong[1]}) should be "
                           f"{want[wrong[0], wrong[1]]}, got {got[wrong[0], wrong[1]]:g}")


def check_albert_parameters(answer, V: int = 30000, E: int = 128, H: int = 1024, L: int = 24,
                            I: int = 4096, P: int = 512, T: int = 2) -> Feedback:
    """Check an AlbertModel parameter count: embeddings, E→H map, ONE shared layer, pooler."""
    got = as_answer_whole(answer, "a parameter count", low=1,
                          todo="add up the parameters of each part of AlbertModel")
    if isinstance(got, Feedback):
        return got
    c = family.albert_parameter_count(V, E, H, L, I, P, T)
    if got == c.total:
        return Feedback(True, f"{c.total:,} parameters: embeddings {c.embeddings:,}, E→H map "
                              f"{c.projection:,}, one shared layer {c.layers:,}, pooler "
                              f"{c.pooler:,}")
    layer = family.layer_parameter_count(H, I)
    mistakes = {
        c.total + (L - 1) * layer: f"you counted {L} separate layers; ALBERT shares one set of "
                                   "layer weights across all of them",
        c.total - c.projection: "you left out the E→H projection (E·H weights + H biases)",
        c.total - c.pooler: "you left out the pooler (H·H + H), which AlbertModel includes",
        c.total - c.embeddings + (V + P + T) * H + 2 * H: "your embedding tables are H wide; "
                                                           "ALBERT's are E wide",
        c.total - 2 * E - 4 * H: "you left out the LayerNorm parameters (2 per feature)",
    }
    if got in mistakes:
        return Feedback(False, mistakes[got])
    return Feedback(False, f"{got:,} is {how_far(got, c.total)}, and none of the usual slips; "
                           "count each part of AlbertModel on its own: the embedding tables and "
                           "their LayerNorm, the E→H map, the encoder layers, the pooler")


def _split(W, h: int) -> list:
    """The h column blocks of W, (d, d) -> h × (d, d/h): block a is head a's, head_columns(a)."""
    d_k = W.shape[1] // h
    return [W[:, head_columns(a, d_k)] for a in range(h)]


def _per_head(X, P_rel, Ws, k: int, h: int, p2c_delta: str = "ji") -> list:
    """One family.disentangled_attention result per head: head a uses columns a·d_k..(a+1)·d_k."""
    blocks = [_split(W, h) for W in Ws]
    return [family.disentangled_attention(X, P_rel, *(b[a] for b in blocks), k, p2c_delta=p2c_delta)
            for a in range(h)]


def _score_mistakes(X, P_rel, Ws, k: int, h: int) -> list[tuple[np.ndarray, str]]:
    """(scores, message) for each typical mistake in the disentangled scores, (h, n, n) each."""
    n, d = X.shape
    d_k = d // h
    heads = _per_head(X, P_rel, Ws, k, h)
    raw = np.stack([r.c2c + r.c2p + r.p2c for r in heads])
    rows = np.arange(n)[:, None]
    delta = family.relative_positions(n, k)
    c2p_ji = np.stack([r.c2c + r.p2c + (X @ Wq @ (P_rel @ Wk).T)[rows, delta.T]
                       for r, Wq, Wk in zip(heads, *(_split(W, h) for W in (Ws[0], Ws[3])),
                                            strict=True)])
    right = np.stack([r.scores for r in heads])
    weights = softmax(right)  # row by row
    p2c_t = np.stack([(r.c2c + r.c2p + r.p2c.T) * r.scale for r in heads])
    whole = family.disentangled_attention(X, P_rel, *Ws, k)  # all d columns as one head
    mistakes = [
        (raw / np.sqrt(3 * d), "you divided by √(3·d) with d the model width; each head's dot "
                               "products have d_k = d / h terms, so divide by √(3·d_k)"),
        (raw / np.sqrt(d_k), "you divided by √d_k: three terms of variance ≈ d_k add up to "
                             "≈ 3·d_k, so divide by √(3·d_k)"),
        (raw, "you forgot to scale: divide the sum by √(3·d_k)"),
        (np.stack([r.scores for r in _per_head(X, P_rel, Ws, k, h, "ij")]),
         "p2c read at δ(i, j) is what transformers computes; the paper (and this exercise) reads "
         "Q_r at δ(j, i)"),
        (c2p_ji * attention_scale(3 * d_k),
         "c2p reads K_r at δ(i, j) (query i, key j), not δ(j, i)"),
        (p2c_t, "your p2c is transposed: entry (i, j) must be the KEY j's content K^c_j against "
                "the position vector Q^r at δ(j, i), not query i's content"),
        (weights,
         "these are the attention weights after the softmax; return the scaled scores before it"),
        (np.stack([(r.c2c + r.c2p) * r.scale for r in heads]),
         "the position→content term p2c is missing"),
        (np.stack([(r.c2c + r.p2c) * r.scale for r in heads]),
         "the content→position term c2p is missing"),
        (np.stack([(r.c2p + r.p2c) * r.scale for r in heads]),
         "the content→content term c2c is missing"),
    ]
    for scale in (whole.scale, attention_scale(3 * d_k)):  # all d columns in one head, either scale
        mistakes.append((np.broadcast_to(whole.scores / whole.scale * scale, (h, n, n)),
                         "every head got the same scores, from all d columns: head a uses only "
                         "the columns a·d_k to (a+1)·d_k of each W"))
    return mistakes


def check_disentangled_scores(fn: Callable, seed: int = 0) -> Feedback:
    """Run ``fn(X, P_rel, W_qc, W_kc, W_qr, W_kr, k, h) -> (h, n, n) scores`` on random inputs
    (X: (n, d), P_rel: (2k, d), each W: (d, d), head a using columns a·d_k..(a+1)·d_k, d_k = d/h)
    and compare it with the paper's formula per head, (c2c + c2p + p2c) / √(3·d_k), p2c read at
    δ(j, i)."""
    rng = np.random.default_rng(seed)
    n, d, h, k = 7, 6, 2, 2
    X, P_rel = rng.normal(size=(n, d)), rng.normal(size=(2 * k, d))
    Ws = [rng.normal(size=(d, d)) for _ in range(4)]
    got, error = call_answer(fn, X.copy(), P_rel.copy(), *(W.copy() for W in Ws), k, h,
                             todo="pass your fn(X, P_rel, W_qc, W_kc, W_qr, W_kr, k, h) that "
                                  "returns the scores")
    got = as_answer_array(got, "the scores") if error is None else error
    if isinstance(got, Feedback):
        return got
    if got.shape == (n, n):
        return Feedback(False, f"expected one ({n}, {n}) score matrix per head, shape ({h}, {n}, "
                               f"{n}); you returned a single ({n}, {n}) matrix")
    if got.shape != (h, n, n):
        return Feedback(False, f"expected scores of shape (h, n, n) = ({h}, {n}, {n}), got "
                               f"{got.shape}")
    scores = np.stack([r.scores for r in _per_head(X, P_rel, Ws, k, h)])
    if np.allclose(got, scores, atol=1e-8):
        return Feedback(True, "your scores match (c2c + c2p + p2c) / √(3·d_k) in every head")
    for reference, message in _score_mistakes(X, P_rel, Ws, k, h):
        if np.allclose(got, reference, atol=1e-8):
            return Feedback(False, message)
    gap = float(np.abs(got - scores).max())
    return Feedback(False, f"your scores differ from the formula by up to {gap:.3g}, and not by "
                           "one of the slips this checker knows (a missing term, a wrong scale, a "
                           "swapped index, a transposed term); check how each head takes its "
                           "columns, then one term at a time")


def check_score_memory(answer, n: int = 512, h: int = 12, d: int = 768, L: int = 12) -> Feedback:
    """Check a prediction of how many attention weights ONE layer of a BERT holds for one
    sequence of n tokens: h·n² (one n × n matrix per head), not the n²·d of some tutorials."""
    got = as_answer_whole(answer, "the number of attention weights", low=1,
                          todo=f"how many attention weights does one layer with {h} heads hold "
                               f"for {n} tokens?")
    if isinstance(got, Feedback):
        return got
    want = h * n * n
    if got == want:
        return Feedback(True, f"h·n² = {h}·{n}² = {want:,}: one n × n matrix of weights per head")
    mistakes = {
        n * n * d: f"n²·d = h·n²·d_k = {n * n * d:,} counts every product inside every score; "
                   "a score is one number per pair of tokens and head (its d_k products are "
                   "summed), so the weights are h·n²; n²·d is the WORK of QKᵀ, not its memory",
        n * n: "that is one n × n matrix; every head has its own",
        L * h * n * n: f"that is all {L} layers; the question asks for one layer",
        n * d: "that is the size of the layer's output (n × d): it grows with n, the weights "
               "with n²",
        2 * h * n * n: "count the weights once: the scores before the softmax are replaced by the "
                       "weights after it",
        4 * h * n * n: "that is a size in bytes (4 bytes per float32 weight); the question asks "
                       "how many weights, one number each",
        8 * h * n * n: "that is a size in bytes (8 bytes per float64 number); the question asks "
                       "how many weights, one number each",
    }
    if got in mistakes:
        return Feedback(False, mistakes[got])
    return Feedback(False, f"{got:,} is {how_far(got, want)}: count one number per query, per "
                           "key, per head")


def check_albert_design(E, groups, budget: int = 20_000_000, V: int = 30000, H: int = 768,
                        L: int = 12, I: int = 3072, min_E: int = 64) -> Feedback:
    """Check an ALBERT design (embedding size E, number of distinct layer groups) against a
    parameter budget: it must fit, with E >= ``min_E``, and keep as many distinct layers as fit."""
    todo = f"choose E and groups for a {L}-layer ALBERT with H={H} under {budget:,} parameters"
    E, groups = (as_answer_whole(value, name, todo=todo)
                 for value, name in ((E, "E"), (groups, "groups")))
    for value in (E, groups):
        if isinstance(value, Feedback):
            return value
    if not min_E <= E <= H:
        return Feedback(False, f"choose E in {min_E}..{H}: below {min_E} the word-piece vectors "
                               f"get very narrow (ALBERT used 128), above H nothing is saved")
    if not 1 <= groups <= L:
        return Feedback(False, f"groups must be in 1..{L} (1 = every layer shares one set of "
                               f"weights, {L} = no sharing), got {groups}")
    count = family.albert_parameter_count(V, int(E), H, L, I, groups=int(groups)).total
    layer = family.layer_parameter_count(H, I)
    per_E = V + 512 + 2 + 2 + H  # tables (V + P + T)·E, LayerNorm 2E, the E→H map E·H
    best = max(g for g in range(1, L + 1)
               if family.albert_parameter_count(V, min_E, H, L, I, groups=g).total <= budget)
    if count > budget:
        return Feedback(False, f"{count:,} parameters, {count - budget:,} over the budget "
                               f"({count / budget:.0%} of it); one distinct layer costs "
                               f"{layer:,}, one unit of E costs {per_E:,}")
    if groups < best:
        room = ("enough for another distinct layer" if count + layer <= budget
                 else f"and a smaller E (still >= {min_E}) would make room for another distinct "
                      "layer")
        return Feedback(False, f"{count:,} parameters fit ({count / budget:.0%} of the budget), "
                               f"but {budget - count:,} are left, {room}")
    return Feedback(True, f"{count:,} parameters ({count / budget:.0%} of the budget) with "
                          f"{groups} distinct layers, the most that fit")
