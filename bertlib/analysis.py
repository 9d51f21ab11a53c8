"""What the heads look at: statistics over BERT's attention maps, averaged over a corpus.

Everything here is numpy over maps of shape ``(layers, heads, n, n)`` where
``attentions[l, h, i, j]`` is how much query token i attends to key token j in head h of layer l
(each row sums to 1), except the head ablation at the end, which runs the real model.

The measures follow the papers that first made them:

- shares of attention to [CLS], [SEP], punctuation, self, previous and next token, and entropy
  per head: Clark, Khandelwal, Levy & Manning (2019), "What Does BERT Look At?";
- pattern classes (vertical, diagonal, vertical+diagonal, block, heterogeneous): Kovaleva,
  Romanov, Rogers & Rumshisky (2019), "Revealing the Dark Secrets of BERT";
- norms of what each token passes on through a head: Kobayashi, Kuribayashi, Yokoi & Inui
  (2020), "Attention is Not Only a Weight: Analyzing Transformers with Vector Norms";
- attention rollout: Abnar & Zuidema (2020), "Quantifying Attention Flow in Transformers";
- head ablation: Michel, Levy & Neubig (2019), "Are Sixteen Heads Really Better than One?".
"""

from __future__ import annotations

import string
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from typing import NamedTuple

import numpy as np

from bertlib.attention import check_finite

__all__ = [
    "SPECIAL_TOKENS",
    "PATTERN_THRESHOLDS",
    "ABLATION_MODES",
    "Corpus",
    "CorpusRuns",
    "PositionalHead",
    "WordMaps",
    "load_corpus",
    "run_corpus",
    "check_maps",
    "token_classes",
    "to_token_shares",
    "corpus_average",
    "attention_entropy",
    "positional_heads",
    "attention_distance",
    "value_norms",
    "word_ids_from_pieces",
    "word_level_maps",
    "pattern_features",
    "pattern_labels",
    "attention_rollout",
    "ablated_head",
    "sentence_vectors",
    "head_importance",
]

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

#: How :func:`ablated_head` replaces one head's weights.
ABLATION_MODES = ("uniform", "zero")

_PUNCTUATION = set(string.punctuation)


# --------------------------------------------------------------------------------------------
# The corpus
# --------------------------------------------------------------------------------------------
class Corpus(NamedTuple):
    """The sentences shipped in ``bertlib/data`` (see ``corpus.md`` there for their origin)."""

    sentences: list[str]
    pairs: list[tuple[str, str]]


def load_corpus() -> Corpus:
    """Corpus(sentences, pairs): 254 single sentences and 50 sentence pairs, written for bertlib."""
    folder = resources.files("bertlib") / "data"
    lines = (folder / "corpus_sentences.txt").read_text(encoding="utf-8").splitlines()
    sentences = [line.strip() for line in lines if line.strip()]
    pairs = []
    for line in (folder / "corpus_pairs.tsv").read_text(encoding="utf-8").splitlines():
        if line.strip():
            first, second = line.split("\t")
            pairs.append((first.strip(), second.strip()))
    return Corpus(sentences, pairs)


class CorpusRuns(NamedTuple):
    """BERT's runs over a corpus: the kept runs (``bertlib.models.BertRun``) and how many inputs
    were skipped because they are longer than the model's positions."""

    runs: list
    skipped: int


def run_corpus(texts: Sequence[str | tuple[str, str]], model=None,
               max_pieces: int | None = None, batch_size: int = 32) -> CorpusRuns:
    """Run BERT on every text (a sentence, or a pair ``(first, second)``), keeping the maps.

    Inputs longer than the model allows (``max_position_embeddings`` word pieces, 512 for BERT;
    or ``max_pieces`` if smaller) are skipped and counted, never truncated. The rest run in
    padded batches of ``batch_size`` (padding keys get weight 0, and each run is cut back to its
    own n tokens), so a few hundred sentences take seconds. Each run is a
    ``bertlib.models.BertRun``: tokens (n,), input_ids (n,), token_type_ids (n,),
    hidden_states (layers + 1, n, d), attentions (layers, heads, n, n), in the order of
    ``texts``. Raises ValueError for an empty corpus, for one where every text is skipped, and
    for empty or whitespace-only texts.
    """
    from bertlib.models import load_bert

    if isinstance(texts, str) or not isinstance(texts, Sequence):
        raise TypeError(f"texts must be a list of sentences or pairs, got {type(texts).__name__}")
    if len(texts) == 0:
        raise ValueError("the corpus has zero sentences: give at least one text")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a whole number >= 1, got {batch_size!r}")
    model = model or load_bert()
    limit = int(getattr(model.model.config, "max_position_embeddings", 512))
    if max_pieces is not None:
        if isinstance(max_pieces, bool) or not isinstance(max_pieces, int) or max_pieces < 3:
            raise ValueError(f"max_pieces must be a whole number >= 3, got {max_pieces!r}")
        limit = min(limit, max_pieces)
    parts = [_as_parts(text, k) for k, text in enumerate(texts)]
    lengths = [len(model.tokenizer(a, b, truncation=False, verbose=False)["input_ids"])
               for a, b in parts]
    kept = [k for k, n in enumerate(lengths) if n <= limit]
    if not kept:
        raise ValueError(
            f"all {len(texts)} texts are longer than {limit} word pieces and were skipped: "
            "give shorter sentences"
        )
    runs = {}
    for is_pair in (False, True):  # the tokenizer batches sentences and pairs separately
        group = sorted((k for k in kept if (parts[k][1] is not None) == is_pair),
                       key=lambda k: lengths[k])
        for start in range(0, len(group), batch_size):
            chunk = group[start:start + batch_size]
            runs.update(zip(chunk, _run_batch([parts[k] for k in chunk], model), strict=True))
    return CorpusRuns([runs[k] for k in kept], len(texts) - len(kept))


def _as_parts(text, k: int) -> tuple[str, str | None]:
    first, second = (text, None) if isinstance(text, str) else _as_pair(text, k)
    for part in (first, second):
        if part is not None and (not isinstance(part, str) or not part.strip()):
            raise ValueError(f"text {k} is empty or not a string: {text!r}")
    return first, second


def _run_batch(parts: list[tuple[str, str | None]], model) -> list:
    """One padded forward pass; each run cut back to its own tokens (see run_corpus)."""
    import torch

    from bertlib.models import BertRun

    firsts = [a for a, _ in parts]
    seconds = None if parts[0][1] is None else [b for _, b in parts]
    enc = model.tokenizer(firsts, seconds, padding=True, truncation=False, return_tensors="pt",
                          verbose=False)
    if "token_type_ids" not in enc:
        enc["token_type_ids"] = torch.zeros_like(enc["input_ids"])
    with torch.no_grad():
        out = model.model(**enc, output_attentions=True, output_hidden_states=True)
    attentions = torch.stack(out.attentions, 1).numpy()  # (B, L, H, N, N)
    hidden = torch.stack(out.hidden_states, 1).numpy()  # (B, L + 1, N, d)
    runs = []
    for b, real in enumerate(enc["attention_mask"].numpy().astype(bool)):
        ids = enc["input_ids"][b].numpy()[real]  # the real tokens, wherever the padding sits
        runs.append(BertRun(
            tokens=model.tokenizer.convert_ids_to_tokens(ids.tolist()),
            input_ids=ids,
            token_type_ids=enc["token_type_ids"][b].numpy()[real],
            hidden_states=hidden[b][:, real],
            attentions=attentions[b][:, :, real][..., real],
        ))
    return runs


def _as_pair(text, k: int) -> tuple[str, str]:
    if not isinstance(text, tuple | list) or len(text) != 2:
        raise TypeError(f"text {k} must be a string or a pair (first, second), got {text!r}")
    return text[0], text[1]


# --------------------------------------------------------------------------------------------
# Checking maps
# --------------------------------------------------------------------------------------------
def check_maps(attentions, atol: float = 1e-3) -> np.ndarray:
    """The attention maps as a float64 array (layers, heads, n, n), after checking them.

    Accepts (n, n) for one head (returned as (1, 1, n, n)), (heads, n, n) for one layer
    (returned as (1, heads, n, n)) or (layers, heads, n, n). Raises TypeError for non-numbers and
    ValueError for another rank, non-square maps, NaN/inf, negative weights, or rows that do not
    sum to 1 within ``atol``.
    """
    if isinstance(attentions, np.ndarray) and attentions.dtype == bool:
        raise TypeError("attentions must hold numbers, got a boolean array")
    try:
        A = np.asarray(attentions, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"attentions must be an array of numbers, got {type(attentions).__name__}"
        ) from exc
    if A.ndim not in (2, 3, 4):
        raise ValueError(
            "attentions must have rank 4 (layers, heads, n, n), 3 (heads, n, n) or 2 (n, n); "
            f"got rank {A.ndim}, shape {A.shape}"
        )
    A = A.reshape((1,) * (4 - A.ndim) + A.shape)
    if A.shape[-1] != A.shape[-2] or A.shape[-1] == 0:
        raise ValueError(f"each map must be square (n, n) with n >= 1, got shape {A.shape}")
    check_finite(A, "attentions")
    if (A < -atol).any():
        first = tuple(int(i) for i in np.argwhere(A < -atol)[0])
        raise ValueError(f"attention weights must be >= 0; found {A[first]:.4g} at {first}")
    sums = A.sum(-1)
    bad = np.abs(sums - 1.0) > atol
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"every row of an attention map must sum to 1 (within {atol}); {int(bad.sum())} "
            f"row(s) do not, e.g. (layer, head, query) = {first} sums to {sums[first]:.4g}"
        )
    return A


def _check_tokens(tokens: Sequence[str], n: int) -> list[str]:
    if isinstance(tokens, str) or not isinstance(tokens, Sequence):
        raise TypeError(f"tokens must be a list of strings, got {type(tokens).__name__}")
    if len(tokens) != n:
        raise ValueError(f"{len(tokens)} tokens for maps of size n = {n}: need one per row")
    return list(tokens)


def token_classes(tokens: Sequence[str]) -> dict[str, np.ndarray]:
    """Boolean masks (n,) marking "[CLS]", "[SEP]" and "punctuation" (pieces made only of
    punctuation characters, such as "." "," "?" "'")."""
    tokens = _check_tokens(tokens, len(tokens))
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
    Returns a dict of (layers, heads) arrays. Needs n >= 2.
    """
    A = check_maps(attentions)
    n = A.shape[-1]
    tokens = _check_tokens(tokens, n)
    if n < 2:
        raise ValueError(f"shares need at least 2 tokens, got n = {n}")
    shares = {name: A[..., mask].sum(-1).mean(-1) for name, mask in token_classes(tokens).items()}
    shares["self"] = np.diagonal(A, axis1=-2, axis2=-1).mean(-1)
    shares["previous"] = np.diagonal(A, offset=-1, axis1=-2, axis2=-1).mean(-1)
    shares["next"] = np.diagonal(A, offset=1, axis1=-2, axis2=-1).mean(-1)
    return shares


def corpus_average(values: Sequence):
    """Mean over sentences of per-sentence statistics: arrays of one shape, or dicts of them.

    values: a list with one entry per sentence, e.g. ``[to_token_shares(r.attentions, r.tokens)
    for r in runs]``. Returns an array (or dict of arrays) of the entries' shape.
    Raises ValueError for zero sentences.
    """
    if len(values) == 0:
        raise ValueError("cannot average over zero sentences: the corpus is empty")
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
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"smoothing must be in [0, 1), got {smoothing}")
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
    for key in ("previous", "next"):
        if key not in shares:
            raise KeyError(f"shares needs a {key!r} entry (layers, heads); has {sorted(shares)}")
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be in [0, 1], got {threshold}")
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


def value_norms(hidden_states, model=None, output_projection: bool = True) -> np.ndarray:
    """Length of what each token can add through each head, per layer (Kobayashi et al. 2020).

    Head h of a layer writes Σ_j α_ij f_h(x_j) into the residual stream, with
    f_h(x_j) = (x_j W_V^h + b_V^h) W_O^h: the token's value vector v_j^h = x_j W_V^h + b_V^h
    (d_k numbers) mapped by the head's slice W_O^h (d_k × d) of the output projection. Weight on
    a token whose ‖f_h(x_j)‖ is small adds little, however large α_ij is (Kobayashi, Kuribayashi,
    Yokoi & Inui 2020, "Attention is Not Only a Weight: Analyzing Transformers with Vector Norms").
    output_projection=True returns ‖f_h(x_j)‖ (their measure); False returns ‖v_j^h‖ alone.
    hidden_states: (layers + 1, n, d), the input of each layer (``BertRun.hidden_states``;
    index l is what layer l reads). model: a LoadedBert (default the bundled one).
    Returns (layers, heads, n).
    """
    from bertlib.models import load_bert

    model = model or load_bert()
    layers = model.model.encoder.layer
    X = np.asarray(hidden_states, dtype=np.float32)
    d = int(model.model.config.hidden_size)
    if X.ndim != 3 or X.shape[0] != len(layers) + 1 or X.shape[-1] != d:
        raise ValueError(
            f"hidden_states must have shape (layers + 1, n, d) = ({len(layers) + 1}, n, {d}), "
            f"got {X.shape}"
        )
    check_finite(X, "hidden_states")
    H = int(model.model.config.num_attention_heads)
    d_k = d // H
    norms = []
    for layer, x in zip(layers, X[:-1], strict=True):
        value = layer.attention.self.value
        V = x @ value.weight.detach().numpy().T + value.bias.detach().numpy()  # (n, d)
        V = V.reshape(len(x), H, d_k).transpose(1, 0, 2)  # (H, n, d_k): v_j^h
        if output_projection:
            W_O = layer.attention.output.dense.weight.detach().numpy().T  # (d, d), x @ W_O
            V = V @ W_O.reshape(H, d_k, d)  # (H, n, d): f_h(x_j) = v_j^h W_O^h
        norms.append(np.linalg.norm(V, axis=-1))  # (H, n)
    return np.stack(norms).astype(np.float64)


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
    tokens = _check_tokens(tokens, len(tokens))
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
    its pieces:  W[a, b] = (1/|a|) Σ_{i∈a} Σ_{j∈b} α_ij, so rows still sum to 1.
    attentions: (layers, heads, n, n) (or rank 2/3); tokens: n pieces; word_ids: n entries, the
    word of each piece (None = a unit of its own, e.g. [CLS]); default from "##" marks via
    :func:`word_ids_from_pieces`, or ``encoding.word_ids()`` from a fast tokenizer. A None
    starts a new span, so equal ids on the two sides of a [SEP] (a pair, where the tokenizer
    restarts its numbering) stay different words.
    Returns WordMaps(words (m,), attentions (layers, heads, m, m), groups).
    """
    A = check_maps(attentions)
    n = A.shape[-1]
    tokens = _check_tokens(tokens, n)
    word_ids = word_ids_from_pieces(tokens) if word_ids is None else list(word_ids)
    if len(word_ids) != n:
        raise ValueError(f"{len(word_ids)} word ids for n = {n} tokens: need one per token")
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
    M = np.zeros((len(groups), n))  # M[a, j] = 1 if piece j belongs to word a
    for a, g in enumerate(groups):
        M[a, g] = 1.0
    to_words = A @ M.T  # (L, H, n, m): summed over the pieces of the target word
    from_words = (M / M.sum(1, keepdims=True)) @ to_words  # averaged over the query's pieces
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
    tokens = _check_tokens(tokens, n)
    classes = token_classes(tokens)
    special = classes["[CLS]"] | classes["[SEP]"]
    idx = np.arange(n)
    near = np.abs(idx[:, None] - idx[None, :]) <= 1
    features = {
        "vertical": A[..., special].sum(-1).mean(-1),
        "diagonal": (A * (near & ~special[None, :])).sum(-1).mean(-1),
    }
    for key in ("far_mass", "within_segment", "within_chance"):
        features[key] = np.full(A.shape[:2], np.nan)
    if token_type_ids is not None:
        seg = np.asarray(token_type_ids)
        if seg.shape != (n,):
            raise ValueError(f"token_type_ids must have shape ({n},), got {seg.shape}")
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
    for key in ("vertical", "diagonal", "far_mass", "within_segment", "within_chance"):
        if key not in features:
            raise KeyError(f"features needs a {key!r} entry; has {sorted(features)}")
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


# --------------------------------------------------------------------------------------------
# Abnar & Zuidema's attention rollout
# --------------------------------------------------------------------------------------------
def attention_rollout(attentions, residual: float = 0.5) -> np.ndarray:
    """Attention rollout: how much each input token feeds each position after every layer.

    Per layer: A_l = residual·I + (1 − residual)·W_l with W_l the mean over heads, rows
    renormalised to sum to 1; then Ã_0 = A_0 and Ã_l = A_l · Ã_{l−1} (0-based layers).
    attentions: (layers, heads, n, n) (or rank 2/3). Returns Ã of shape (layers, n, n):
    Ã[l, i, j] is how much input token j flows into position i at the output of layer l.
    """
    A = check_maps(attentions)
    if not 0.0 <= residual <= 1.0:
        raise ValueError(f"residual must be in [0, 1], got {residual}")
    n = A.shape[-1]
    mixed = residual * np.eye(n) + (1.0 - residual) * A.mean(axis=1)
    mixed = mixed / mixed.sum(-1, keepdims=True)
    rolled = np.empty_like(mixed)
    rolled[0] = mixed[0]
    for layer in range(1, len(mixed)):
        rolled[layer] = mixed[layer] @ rolled[layer - 1]
    return rolled


# --------------------------------------------------------------------------------------------
# Head ablation on the real model (through transformers' AttentionInterface, no patching)
# --------------------------------------------------------------------------------------------
_ABLATION_NAME = "bertlib_head_ablation"


def _ablation_attention(layer: int, head: int, mode: str):
    """An attention function for transformers' AttentionInterface: eager attention, except that
    head ``head`` of layer ``layer`` gets uniform weights over the real keys, or zeros."""
    import torch

    def attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                  **kwargs):
        scaling = query.shape[-1] ** -0.5 if scaling is None else scaling
        scores = torch.matmul(query, key.transpose(2, 3)) * scaling
        if attention_mask is not None:
            scores = scores + attention_mask
        weights = torch.softmax(scores, dim=-1)
        if module.layer_idx == layer:
            weights = weights.clone()
            if mode == "zero":
                weights[:, head] = 0.0
            else:
                real = torch.ones_like(weights[:, head])
                if attention_mask is not None:
                    real = (attention_mask[:, 0] > torch.finfo(scores.dtype).min / 2).expand_as(
                        real).to(weights.dtype)
                weights[:, head] = real / real.sum(-1, keepdim=True)
        output = torch.matmul(weights, value).transpose(1, 2).contiguous()
        return output, weights

    return attention


@contextmanager
def ablated_head(layer: int, head: int, mode: str = "uniform", model=None) -> Iterator:
    """Within the ``with`` block, ``model`` runs with one head disabled; yields the LoadedBert.

    mode "uniform": the head's weights become 1/n over the real (non-padding) tokens, as in
    Kovaleva et al. (2019); "zero": the head's weights become 0, so it adds nothing (like
    Michel et al.'s mask ξ_h = 0). Uses a custom function registered with
    ``transformers.AttentionInterface`` (and ``AttentionMaskInterface`` with the eager additive
    mask, so padding is still masked) and ``model.set_attn_implementation``; the previous
    implementation is restored on exit, even after an error. The weights are never changed.
    ``bertlib.models.run_bert`` sees the ablation too: its cache key holds the registered
    attention.
    """
    from bertlib.models import check_layer_head, load_bert, register_attention

    model = model or load_bert()
    layer, head = check_layer_head(model, layer, head, allow_mean=False)
    if mode not in ABLATION_MODES:
        raise ValueError(f"mode must be one of {ABLATION_MODES}, got {mode!r}")
    previous = model.model.config._attn_implementation
    if previous == _ABLATION_NAME:
        raise ValueError("ablated_head blocks cannot be nested: one head at a time")
    register_attention(_ABLATION_NAME, _ablation_attention(layer, head, mode))
    model.model.set_attn_implementation(_ABLATION_NAME)
    try:
        yield model
    finally:
        model.model.set_attn_implementation(previous)


def _encode_batch(texts: Sequence[str | tuple[str, str]], model) -> dict:
    """Check the texts and tokenize them as one padded batch of torch tensors (B, N)."""
    if isinstance(texts, str) or not isinstance(texts, Sequence) or len(texts) == 0:
        raise ValueError("texts must be a non-empty list of sentences or pairs")
    parts = [_as_parts(t, k) for k, t in enumerate(texts)]
    seconds = [b for _, b in parts]
    if len({b is None for b in seconds}) > 1:
        raise ValueError("give either only sentences or only pairs in one call")
    limit = int(getattr(model.model.config, "max_position_embeddings", 512))
    enc = model.tokenizer([a for a, _ in parts], None if seconds[0] is None else seconds,
                          padding=True, truncation=False, return_tensors="pt", verbose=False)
    if enc["input_ids"].shape[1] > limit:
        raise ValueError(
            f"an input is {enc['input_ids'].shape[1]} word pieces long but the model has {limit} "
            "positions: leave it out (run_corpus skips such inputs)"
        )
    return enc


def _mean_pool(hidden, attention_mask) -> np.ndarray:
    real = attention_mask.unsqueeze(-1).to(hidden.dtype)
    return ((hidden * real).sum(1) / real.sum(1)).double().numpy()


def sentence_vectors(texts: Sequence[str | tuple[str, str]], model=None) -> np.ndarray:
    """The model's sentence vectors: the last hidden states mean-pooled over the real tokens.

    v = (1/n) Σ_i h_i^(L) (all-MiniLM-L6-v2 is trained to be used this way; it has no MLM head).
    texts: N sentences or N pairs, run as one padded batch (not cached, so it sees an
    :func:`ablated_head` block). Returns (N, d) float64.
    """
    import torch

    from bertlib.models import load_bert

    model = model or load_bert()
    enc = _encode_batch(texts, model)
    with torch.no_grad():
        hidden = model.model(**enc).last_hidden_state
    return _mean_pool(hidden, enc["attention_mask"])


def _cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def head_importance(texts: Sequence[str | tuple[str, str]], mode: str = "uniform",
                    model=None) -> np.ndarray:
    """How much the sentence vector changes when one head is disabled, for every head.

    importance[l, h] = 1 − mean_s cos(v_s, v_s^(l,h)), with v_s the sentence vector of text s
    (:func:`sentence_vectors`) and v_s^(l,h) the same with head h of layer l ablated (``mode``
    as in :func:`ablated_head`). texts: N sentences (or N pairs). Returns (layers, heads);
    0 means the head could go without any change.
    Ablating a head of layer l cannot change the layers below it, so each ablated run starts
    from the unchanged hidden states entering layer l and runs only layers l..L−1.
    """
    import torch

    from bertlib.models import load_bert

    model = model or load_bert()
    if mode not in ABLATION_MODES:
        raise ValueError(f"mode must be one of {ABLATION_MODES}, got {mode!r}")
    enc = _encode_batch(texts, model)
    with torch.no_grad():
        out = model.model(**enc, output_hidden_states=True)
    base = _mean_pool(out.last_hidden_state, enc["attention_mask"])
    dtype = out.last_hidden_state.dtype
    # the additive key mask eager attention expects: 0 for real tokens, very negative for padding
    key_mask = (1.0 - enc["attention_mask"][:, None, None, :].to(dtype)) * torch.finfo(dtype).min
    layers = model.model.encoder.layer
    importance = np.zeros((len(layers), int(model.model.config.num_attention_heads)))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # many tiny passes: one thread is as fast, and immune to a busy CPU
    try:
        for layer, head in np.ndindex(importance.shape):
            with ablated_head(layer, head, mode, model), torch.no_grad():
                hidden = out.hidden_states[layer]
                for block in layers[layer:]:
                    hidden = block(hidden, key_mask)
            changed = _mean_pool(hidden, enc["attention_mask"])
            importance[layer, head] = 1.0 - _cosine(base, changed).mean()
    finally:
        torch.set_num_threads(threads)
    return importance
