"""What the heads look at: statistics over BERT's attention maps, averaged over a corpus.

Everything here is numpy over maps of shape ``(layers, heads, n, n)`` where
``attentions[l, h, i, j]`` is how much query token i attends to key token j in head h of layer l
(each row sums to 1); :mod:`bertlib.hf.corpus` gives the maps of a few hundred sentences.

The measures follow the papers that first made them:

- shares of attention to [CLS], [SEP], punctuation, self, previous and next token, and entropy
  per head: Clark, Khandelwal, Levy & Manning (2019), "What Does BERT Look At?";
- pattern classes (vertical, diagonal, vertical+diagonal, block, heterogeneous): Kovaleva,
  Romanov, Rogers & Rumshisky (2019), "Revealing the Dark Secrets of BERT";
- attention rollout: Abnar & Zuidema (2020), "Quantifying Attention Flow in Transformers".

What a head passes on and what it is worth are in :mod:`bertlib.hf.importance`.
"""

from __future__ import annotations

import string
import warnings
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from bertlib.checks import (
    as_array,
    attention_rows,
    attention_stack,
    has_shape,
    items,
    labels,
    number,
    positions,
    same_shape,
    whole,
)
from bertlib.paper.attention import band

__all__ = ["SPECIAL_TOKENS", "PATTERN_THRESHOLDS", "PositionalHead", "WordMaps", "check_maps",
           "token_classes", "to_token_shares", "key_share", "offset_share", "offset_weights",
           "corpus_average", "attention_entropy", "positional_heads", "attention_distance",
           "word_ids_from_pieces", "word_level_maps", "pattern_features", "pattern_labels",
           "block_score", "attention_rollout"]

#: Word pieces that the tokenizer adds around the text; they are never part of a word.
SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[PAD]")

#: The rules of :func:`pattern_labels`, in the order they are tried.
PATTERN_THRESHOLDS = {
    "vertical+diagonal": 0.3,  # vertical >= 0.3 and diagonal >= 0.3
    "vertical": 0.5,  # vertical >= 0.5
    "diagonal": 0.5,  # diagonal >= 0.5
    "block": 0.8,  # within_segment >= 0.8 (sentence pairs only), and both lines below
    "block_mass": 0.2,  # far_mass >= 0.2: enough attention outside the band and [CLS]/[SEP]
    "block_over_chance": 0.2,  # within_segment >= within_chance + 0.2
}

_PUNCTUATION = set(string.punctuation)


# --------------------------------------------------------------------------------------------
# Checking maps
# --------------------------------------------------------------------------------------------
def check_maps(attentions, atol: float = 1e-3) -> np.ndarray:
    """The attention maps as a float64 array (layers, heads, n, n), after checking them.

    Accepts (n, n) for one head (returned as (1, 1, n, n)), (heads, n, n) for one layer
    (returned as (1, heads, n, n)) or (layers, heads, n, n). Raises TypeError for non-numbers and
    ValueError for another rank, non-square maps, NaN/inf, or rows that are not attention weights
    within ``atol`` (:func:`bertlib.checks.attention_rows`, the one rule the pictures use too).
    """
    A = as_array(attentions, "attentions").astype(np.float64)
    if A.ndim not in (2, 3, 4):
        raise ValueError("attentions must have rank 4 (layers, heads, n, n), 3 (heads, n, n) or "
                         f"2 (n, n); got rank {A.ndim}, shape {A.shape}")
    A = attention_stack(A.reshape((1,) * (4 - A.ndim) + A.shape), "attentions",
                        layout="(layers, heads, n, n)", why="(each map square, n >= 1)")
    return attention_rows(A, "attentions", atol, index="(layer, head, query)")


def _check_keys(A, keys) -> tuple[np.ndarray, np.ndarray]:
    """key_share's maps (..., n, n) and its keys: (n,) bool, or positions (checks.positions)."""
    A, bools = attention_stack(A), np.asarray(keys)
    if bools.dtype != bool:
        return A, positions(keys, "keys", A.shape[-1])
    has_shape(bools, "keys", (A.shape[-1],), "(n,)", "(one bool per key)")
    return A, bools


def token_classes(tokens: Sequence[str]) -> dict[str, np.ndarray]:
    """Boolean masks (n,) marking "[CLS]", "[SEP]" and "punctuation" (pieces made only of
    punctuation characters, such as "." "," "?" "'")."""
    tokens = labels(tokens, len(tokens), "tokens", "token_classes")
    return {
        "[CLS]": np.array([t == "[CLS]" for t in tokens]),
        "[SEP]": np.array([t == "[SEP]" for t in tokens]),
        "punctuation": np.array([bool(t) and set(t) <= _PUNCTUATION for t in tokens]),
    }


# --------------------------------------------------------------------------------------------
# Clark et al.'s measures
# --------------------------------------------------------------------------------------------
def to_token_shares(attentions, tokens: Sequence[str]) -> dict[str, np.ndarray]:
    """Share of attention each head gives to a kind of token, for one input (Clark et al. 2019).

    attentions: (layers, heads, n, n) (or rank 2/3, see :func:`check_maps`); tokens: n pieces.
    For a token class T in "[CLS]", "[SEP]", "punctuation":  share_T = (1/n) Σ_i Σ_{j∈T} α_ij
    (summed over the target tokens, averaged over the queries).
    "self" = (1/n) Σ_i α_ii;  "previous" = 1/(n−1) Σ_{i≥1} α_{i,i−1};
    "next" = 1/(n−1) Σ_{i≤n−2} α_{i,i+1} (averaged over the queries that have such a neighbour,
    so a perfect previous-token head scores 1; Clark et al.'s code divides by n instead, which
    gives such a head (n−1)/n). "punctuation" is any piece made only of punctuation characters;
    Clark et al. counted "." and "," only.
    Returns a dict of (layers, heads) arrays. Needs n >= 2. Each class's share is
    :func:`key_share` with the keys picked by token text (a real sentence pair has two [SEP]s,
    wherever the pieces fall); tiny.agreement.measure_on picks them by position.
    """
    A = check_maps(attentions)
    n = whole(A.shape[-1], "n (shares need at least 2 tokens)", 2)
    tokens = labels(tokens, n, "tokens", f"maps of size n = {n}")
    shares = {name: key_share(A, keys) for name, keys in token_classes(tokens).items()}
    shares["self"], shares["previous"], shares["next"] = (offset_share(A, k) for k in (0, -1, 1))
    return shares


def key_share(A, keys) -> np.ndarray:
    """share = (1/n) Σ_i Σ_{j ∈ keys} A[..., i, j]: the attention a head gives a set of keys,
    summed over the keys and averaged over the n queries (the one share to chosen keys).
    A: (..., n, n); keys: (n,) bool (e.g. a class of :func:`token_classes`) or positions in
    0..n−1 (checks.positions: 0 is [CLS], n − 1 a test row's one [SEP] in notebook 09).
    Returns (...)."""
    A, keys = _check_keys(A, keys)
    return A[..., keys].sum(-1).mean(-1)


def offset_share(A, offset: int) -> np.ndarray:
    """Mean of :func:`offset_weights`: (..., n, n) -> (...); −1: previous-token share, 0: self."""
    return offset_weights(A, offset).mean(-1)


def offset_weights(A, offset: int) -> np.ndarray:
    """A[..., i, i + offset]: each query i's weight to the token ``offset`` away (−1: previous,
    +1: next, 0: itself) where i + offset is in the sequence. (..., n, n) -> (..., n − |offset|)."""
    A = attention_stack(A)
    n = A.shape[-1]
    offset = whole(offset, "offset", -(n - 1), n - 1, why="(-1: previous token, +1: next)")
    return np.diagonal(A, offset=offset, axis1=-2, axis2=-1).copy()


def corpus_average(values: Sequence):
    """Mean over sentences of per-sentence statistics: arrays of one shape, or dicts of them.

    values: a list with one entry per sentence, e.g. ``[to_token_shares(r.attentions, r.tokens)
    for r in runs]``. Returns an array (or dict of arrays) of the entries' shape.
    Raises ValueError for zero sentences.
    """
    values = items(values, "values", "per-sentence statistics (zero sentences: is the corpus "
                   "empty?)")
    if isinstance(values[0], dict):
        return {key: np.mean([v[key] for v in values], axis=0) for key in values[0]}
    return np.mean(np.stack([np.asarray(v, dtype=np.float64) for v in values]), axis=0)


def attention_entropy(attentions, smoothing: float = 1e-4) -> np.ndarray:
    """Entropy of each head's attention in nats, averaged over the queries (Clark et al. 2019).

    α' = (1 − s)·α + s/n with s = ``smoothing`` (Clark's 0.9999·α + 0.0001/n, so log 0 never
    occurs);  H = −(1/n) Σ_i Σ_j α'_ij log α'_ij.
    attentions: (layers, heads, n, n) (or rank 2/3). Returns (layers, heads). A uniform head has
    the maximum, log n; a head that puts all weight on one token has about 0.
    """
    A = check_maps(attentions)
    number(smoothing, "smoothing", 0.0, 1.0)
    n = A.shape[-1]
    P = (1.0 - smoothing) * A + smoothing / n
    plogp = np.where(P > 0, P * np.log(np.where(P > 0, P, 1.0)), 0.0)
    return -plogp.sum(-1).mean(-1)


class PositionalHead(NamedTuple):
    """A head that mostly looks one token back ("previous") or ahead ("next")."""

    layer: int
    head: int
    direction: str
    share: float


def positional_heads(shares: dict[str, np.ndarray],
                     threshold: float = 0.5) -> list[PositionalHead]:
    """Heads whose average attention to the previous (or next) token exceeds ``threshold``.

    shares: a dict with "previous" and "next" arrays (layers, heads), e.g. from
    :func:`to_token_shares` averaged with :func:`corpus_average`. Returns a list of
    PositionalHead(layer, head, direction, share), largest share first (0-based numbering).
    """
    number(threshold, "threshold", 0.0, 1.0)
    found = [
        PositionalHead(int(layer), int(head), direction, float(shares[direction][layer, head]))
        for direction in ("previous", "next")
        for layer, head in np.argwhere(np.asarray(shares[direction]) > threshold)
    ]
    return sorted(found, key=lambda p: (-p.share, p.layer, p.head))


def attention_distance(attentions) -> np.ndarray:
    """Attention-weighted mean distance per head: (1/n) Σ_i Σ_j α_ij |i − j|, in tokens.

    attentions: (layers, heads, n, n) (or rank 2/3). Returns (layers, heads). A head that looks at
    its neighbours scores about 1; attention to [CLS] from far along the sentence counts as far.
    """
    A = check_maps(attentions)
    idx = np.arange(A.shape[-1])
    return (A * np.abs(idx[:, None] - idx[None, :])).sum(-1).mean(-1)


# --------------------------------------------------------------------------------------------
# Word-level maps
# --------------------------------------------------------------------------------------------
class WordMaps(NamedTuple):
    """Attention between words: labels (m,), maps (layers, heads, m, m), and for each word the
    indices of its word pieces."""

    words: list[str]
    attentions: np.ndarray
    groups: list[list[int]]


def word_ids_from_pieces(tokens: Sequence[str]) -> list[int | None]:
    """The word each piece belongs to, from WordPiece's "##" continuation marks.

    A piece starting with "##" continues the previous word; special tokens ([CLS], [SEP], [PAD])
    get None. The same grouping as a fast tokenizer's ``encoding.word_ids()`` for BERT (which
    also splits off punctuation as words of their own), except that in a pair the ids keep
    increasing into the second sentence where the tokenizer restarts them at 0.
    """
    tokens = labels(tokens, len(tokens), "tokens", "word_ids_from_pieces")
    ids: list[int | None] = []
    current = -1
    for t in tokens:
        if t in SPECIAL_TOKENS:
            ids.append(None)
        elif t.startswith("##") and current >= 0 and ids and ids[-1] is not None:
            ids.append(current)
        else:
            current += 1
            ids.append(current)
    return ids


def word_level_maps(attentions, tokens: Sequence[str],
                    word_ids: Sequence[int | None] | None = None) -> WordMaps:
    """Merge word pieces into words (Clark et al.'s convention).

    Attention *to* a split word is the sum over its pieces; attention *from* it is the mean over
    its pieces:  α'_ab = (1/|a|) Σ_{i∈a} Σ_{j∈b} α_ij, so rows still sum to 1.
    attentions: (layers, heads, n, n) (or rank 2/3); tokens: n pieces; word_ids: n entries, the
    word of each piece (None = a unit of its own, e.g. [CLS]); default from "##" marks via
    :func:`word_ids_from_pieces`, or ``encoding.word_ids()`` from a fast tokenizer. A None
    starts a new span, so equal ids on the two sides of a [SEP] (a pair, where the tokenizer
    restarts its numbering) stay different words.
    Returns WordMaps(words (m,), attentions (layers, heads, m, m), groups).
    """
    A = check_maps(attentions)
    n = A.shape[-1]
    tokens = labels(tokens, n, "tokens", f"maps of size n = {n}")
    word_ids = word_ids_from_pieces(tokens) if word_ids is None else list(word_ids)
    same_shape((len(word_ids),), (n,), ("word_ids", "tokens"))
    groups: list[list[int]] = []
    where: dict[tuple[int, int], int] = {}  # (span, word id) -> index of its group
    span = 0
    for i, w in enumerate(word_ids):
        if w is None:
            span += 1
            groups.append([i])
        elif (span, w) in where:
            groups[where[span, w]].append(i)
        else:
            where[span, w] = len(groups)
            groups.append([i])
    word_pool = np.zeros((len(groups), n))  # word_pool[a, j] = 1 if piece j belongs to word a
    for a, g in enumerate(groups):
        word_pool[a, g] = 1.0
    to_words = A @ word_pool.T  # (L, H, n, m): summed over the pieces of the target word
    # averaged over the query's pieces
    from_words = (word_pool / word_pool.sum(1, keepdims=True)) @ to_words
    words = [tokens[g[0]] + "".join(tokens[j].removeprefix("##") for j in g[1:]) for g in groups]
    return WordMaps(words, from_words, groups)


# --------------------------------------------------------------------------------------------
# Kovaleva et al.'s pattern classes
# --------------------------------------------------------------------------------------------
def pattern_features(attentions, tokens: Sequence[str],
                     token_type_ids: Sequence[int] | None = None) -> dict[str, np.ndarray]:
    """The numbers per head that :func:`pattern_labels` reads, for one input.

    "vertical": share to [CLS] and [SEP], (1/n) Σ_i Σ_{j special} α_ij (the vertical stripes).
    "diagonal": share to the query itself or its neighbours that are not special,
    (1/n) Σ_i Σ_{|i−j|≤1, j not special} α_ij (the band along the diagonal).
    The block features look only at the rest, the "far" keys: not special and |i−j| > 1, so
    a [CLS] stripe or a neighbour band cannot pass for a block. Over the non-special queries i:
    "far_mass": the mean of Σ_{j far} α_ij, how much attention is there to judge;
    "within_segment": the mean, over queries with far attention, of the part of it that stays
    in i's own sentence;
    "within_chance": the same part for a head spreading its far attention evenly (the share of
    i's far keys that are in its own sentence), the value to beat.
    The three block features are NaN for a single sentence (no token_type_ids, or one segment).
    attentions: (layers, heads, n, n) (or rank 2/3); tokens: n; token_type_ids: n (0/1).
    Returns a dict of (layers, heads) arrays.
    """
    A = check_maps(attentions)
    n = A.shape[-1]
    tokens = labels(tokens, n, "tokens", f"maps of size n = {n}")
    classes = token_classes(tokens)
    special = classes["[CLS]"] | classes["[SEP]"]
    near = band(np.arange(n), np.arange(n), 1)  # |i − j| ≤ 1
    features = {
        "vertical": key_share(A, special),
        "diagonal": (A * (near & ~special[None, :])).sum(-1).mean(-1),
    }
    for key in ("far_mass", "within_segment", "within_chance"):
        features[key] = np.full(A.shape[:2], np.nan)
    if token_type_ids is not None:
        seg = np.asarray(token_type_ids)
        same_shape(seg, special, ("token_type_ids", "tokens"))
        if len(np.unique(seg[~special])) == 2:
            queries = ~special
            far = ~near & ~special[None, :]  # (n, n): key j is far from query i
            same = far & (seg[:, None] == seg[None, :])
            to_far = (A * far).sum(-1)[..., queries]  # (layers, heads, queries)
            to_same = (A * same).sum(-1)[..., queries]
            frac = np.divide(to_same, to_far, out=np.full_like(to_same, np.nan),
                             where=to_far > 0)
            chance = same.sum(-1)[queries] / np.maximum(far.sum(-1)[queries], 1)
            features["far_mass"] = to_far.mean(-1)
            with warnings.catch_warnings():  # a head with no far attention at all gives NaN
                warnings.simplefilter("ignore", RuntimeWarning)
                features["within_segment"] = np.nanmean(frac, axis=-1)
            features["within_chance"] = np.full(A.shape[:2], chance.mean())
    return features


def pattern_labels(features: dict[str, np.ndarray],
                   thresholds: dict[str, float] | None = None) -> np.ndarray:
    """A pattern class per head, after Kovaleva et al. (2019), by these rules, tried in order:

    1. "vertical+diagonal" if vertical >= 0.3 and diagonal >= 0.3;
    2. "vertical" if vertical >= 0.5 (stripes down the [CLS]/[SEP] columns);
    3. "diagonal" if diagonal >= 0.5 (a band along the diagonal: self, previous, next);
    4. "block" if, for a pair, far_mass >= 0.2 (enough attention away from the band and the
       special tokens), within_segment >= 0.8 and within_segment >= within_chance + 0.2 (each
       sentence looks at itself, clearly more than an even spread would);
    5. "heterogeneous" otherwise.
    features: dict of equal-shape arrays "vertical", "diagonal", "far_mass", "within_segment",
    "within_chance" (see :func:`pattern_features`, usually averaged over a corpus); thresholds:
    override :data:`PATTERN_THRESHOLDS`. Returns an array of labels of the features' shape.
    """
    t = {**PATTERN_THRESHOLDS, **(thresholds or {})}
    v = np.asarray(features["vertical"], dtype=float)
    d = np.asarray(features["diagonal"], dtype=float)
    mass, w, chance = (np.nan_to_num(np.asarray(features[k], dtype=float), nan=0.0)
                       for k in ("far_mass", "within_segment", "within_chance"))
    conditions = [
        (v >= t["vertical+diagonal"]) & (d >= t["vertical+diagonal"]),
        v >= t["vertical"],
        d >= t["diagonal"],
        (mass >= t["block_mass"]) & (w >= t["block"]) & (w >= chance + t["block_over_chance"]),
    ]
    names = ["vertical+diagonal", "vertical", "diagonal", "block"]
    return np.select(conditions, names, default="heterogeneous")


def block_score(features: dict[str, np.ndarray]) -> np.ndarray:
    """How block-like each head is, graded: (within − chance) / (1 − chance).

    0 when a head's far attention stays in its own sentence no more than an even spread would
    (``within_chance``), 1 when all of it stays there, negative when it prefers the other
    sentence. features: "within_segment" and "within_chance" arrays of equal shape (see
    :func:`pattern_features`; NaN for single sentences stays NaN). Returns that shape.
    """
    w = np.asarray(features["within_segment"], dtype=float)
    chance = np.asarray(features["within_chance"], dtype=float)
    same_shape(w, chance, ("within_segment", "within_chance"))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(chance < 1, (w - chance) / (1 - chance), np.nan)


# --------------------------------------------------------------------------------------------
# Abnar & Zuidema's attention rollout
# --------------------------------------------------------------------------------------------
def attention_rollout(attentions, residual: float = 0.5) -> np.ndarray:
    """Attention rollout: how much each input token feeds each position after every layer.

    Per layer: A_l = residual·I + (1 − residual)·Ā_l, Ā_l layer l's maps averaged over heads, rows
    renormalised to sum to 1; then Ã_0 = A_0 and Ã_l = A_l · Ã_{l−1} (0-based layers).
    attentions: (layers, heads, n, n) (or rank 2/3). Returns Ã of shape (layers, n, n):
    Ã[l, i, j] is how much input token j flows into position i at the output of layer l.
    """
    A = check_maps(attentions)
    number(residual, "residual", 0.0, 1.0)
    n = A.shape[-1]
    mixed = residual * np.eye(n) + (1.0 - residual) * A.mean(axis=1)
    mixed = mixed / mixed.sum(-1, keepdims=True)
    rolled = np.empty_like(mixed)
    rolled[0] = mixed[0]
    for layer in range(1, len(mixed)):
        rolled[layer] = mixed[layer] @ rolled[layer - 1]
    return rolled
