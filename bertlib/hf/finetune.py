"""Fine-tuning BERT on graded sentence pairs, with or without the prior, and its measure.

The project's pairs (bertlib/data/sts_pairs.tsv, scored 0..5) are read by :func:`load_pairs` and
batched with their similarity priors (:func:`bertlib.hf.custom.similarity_prior`) by
:func:`pair_batch`, so the same code trains and measures a standard BERT and one whose attention
is prior-guided (:func:`bertlib.hf.custom.use_prior_attention`): :func:`pair_cosines` reads each
pair jointly and compares the mean hidden states of its two sentences, :func:`fine_tune` trains
that cosine towards score / 5, and :func:`spearman` measures how well the cosines rank the pairs.
"""

from __future__ import annotations

import csv
import functools
import math
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from bertlib.checks import as_array, items, kind, one_of, same_shape, whole
from bertlib.hf.attention_interface import project_heads_torch, scaled_scores
from bertlib.hf.corpus import masked_mean
from bertlib.hf.custom import PRIOR_ATTENTION, prior_weights, similarity_prior, strip_punctuation
from bertlib.hf.loading import LoadedBert, bert_module, load_bert

__all__ = ["StsPair", "PairBatch", "load_pairs", "pair_batch", "pair_cosines", "eval_cosines",
           "fine_tune", "spearman", "LinkEffects", "link_effects", "batch_word_ids"]

_DATA = Path(__file__).resolve().parents[1] / "data"


class StsPair(NamedTuple):
    """One labelled sentence pair: score 0 (unrelated) .. 5 (same meaning)."""

    sentence_a: str
    sentence_b: str
    score: float
    split: str  # "train" or "test"
    group: int = -1  # pairs of one group share sentence_a (the split keeps a group together)


class PairBatch(NamedTuple):
    """A padded batch of sentence pairs, ready for ``model(**inputs, prior=prior)``.

    inputs: dict of (batch, n) int tensors input_ids, token_type_ids, attention_mask.
    prior: (batch, n, n) float32 tensor, 0 on padding.
    in_a, in_b: (batch, n) float32 flags, 1 on the word pieces of sentence a (resp. b), no
    specials (which sentence a piece is in; not an attention mask).
    """

    inputs: dict
    prior: object
    in_a: object
    in_b: object


def load_pairs(split: str | None = None) -> list[StsPair]:
    """The project's graded sentence pairs (bertlib/data/sts_pairs.tsv), optionally one split.

    split: None for all 162 pairs, or "train" / "test" (the split is by group of pairs sharing
    their first sentence, so no sentence a of the test pairs is seen in training; each pair's
    ``group`` says which, for intervals that resample whole groups).
    """
    one_of(split, "split", (None, "train", "test"))
    with open(_DATA / "sts_pairs.tsv", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    pairs = [StsPair(r["sentence_a"], r["sentence_b"], float(r["score"]), r["split"],
                     int(r["group"])) for r in rows]
    return [p for p in pairs if split is None or p.split == split]


def pair_batch(pairs: Sequence[tuple[str, str]] | Sequence[StsPair], source: str = "lexicon",
               model: LoadedBert | None = None, **prior_options) -> PairBatch:
    """Tokenize sentence pairs into one padded batch with their priors (see :class:`PairBatch`).

    pairs: a non-empty list of (sentence_a, sentence_b) (StsPair works too).
    prior_options: passed to :func:`similarity_prior` (``punctuation``, ``stop_words``,
    ``first_sep``, ``lexicon``); with punctuation="remove" (the default) BERT reads the pairs
    without punctuation too, as in the authors' code.
    Shapes: inputs (batch, n) with n the longest pair; prior (batch, n, n), 0 on padding rows
    and columns; in_a / in_b (batch, n). Errors as in :func:`similarity_prior`.
    """
    pairs = items(pairs, "pairs", "(sentence_a, sentence_b)")
    model = model or load_bert()
    priors = [similarity_prior(p[0], p[1], source, model, **prior_options) for p in pairs]
    punctuation_kept = prior_options.get("punctuation", "remove") == "keep"
    texts = [(p[0], p[1]) if punctuation_kept else (strip_punctuation(p[0]),
                                                    strip_punctuation(p[1])) for p in pairs]
    inputs = model.tokenizer([a for a, _ in texts], [b for _, b in texts], padding=True,
                             return_tensors="pt", return_special_tokens_mask=True)
    special = inputs.pop("special_tokens_mask").bool()
    n = inputs["input_ids"].shape[1]
    prior = torch.zeros(len(pairs), n, n)
    for k, R in enumerate(priors):
        prior[k, : len(R), : len(R)] = torch.from_numpy(R)
    real = inputs["attention_mask"].bool() & ~special
    second = inputs["token_type_ids"].bool()
    return PairBatch(dict(inputs), prior, (real & ~second).float(), (real & second).float())


def pair_cosines(model, batch: PairBatch):
    """cos(u, v) per pair (batch,): u, v = mean of the last hidden states over a's and b's pieces.

    The pair is read jointly as [CLS] a [SEP] b [SEP] (so the prior can link the sentences);
    the prior is passed only when prior attention is on. Differentiable (no torch.no_grad here).
    The cosine is torch's ``cosine_similarity``, the torch twin of the one numpy cosine,
    :func:`bertlib.paper.attention.cosine` (norms clamped at eps: a zero vector gives 0, not an
    error, so training never stops on one).
    """
    bert = bert_module(model)
    extra = {"prior": batch.prior} if bert.config._attn_implementation == PRIOR_ATTENTION else {}
    hidden = bert(**batch.inputs, **extra).last_hidden_state  # (batch, n, d)
    u, v = masked_mean(hidden, batch.in_a), masked_mean(hidden, batch.in_b)  # means over a's, b's
    return torch.nn.functional.cosine_similarity(u, v, dim=-1)


def eval_cosines(model, batch: PairBatch, chunk: int = 16) -> np.ndarray:
    """:func:`pair_cosines` for measuring, not training: (batch,) float32 numpy, no gradients.

    The pairs run in chunks of ``chunk`` pairs of about one length (sorted by length), each cut
    to its longest pair, so little padding is computed; padding changes no real piece's state,
    so the cosines are pair_cosines' own (up to float rounding, about 1e-7).
    """
    whole(chunk, "chunk", 1)
    lengths = batch.inputs["attention_mask"].sum(1)
    order = torch.argsort(lengths, stable=True)
    cosines = torch.empty(len(order))
    with torch.inference_mode():
        for rows in order.split(chunk):
            n = int(lengths[rows].max())
            part = PairBatch({key: value[rows, :n] for key, value in batch.inputs.items()},
                             batch.prior[rows, :n, :n], batch.in_a[rows, :n], batch.in_b[rows, :n])
            cosines[rows] = pair_cosines(model, part)
    return cosines.numpy()


def fine_tune(model, pairs: Sequence[StsPair], epochs: int = 2, batch_size: int = 16,
              lr: float = 5e-5, seed: int = 0, train_embeddings: bool = False,
              prior_options: dict | None = None) -> list[float]:
    """Train ``model`` (in place) so cos(u, v) matches score / 5; returns the loss of each step.

    Loss: mean squared error between :func:`pair_cosines` and the gold score / 5 (the cosine
    similarity loss of sentence-BERT). AdamW over every parameter except, by default, the
    embeddings (12 of the 23 million parameters: frozen for the run, with ``requires_grad`` off so
    no gradient is computed for them, which keeps the "embedding" prior fixed; switched back on
    afterwards); a learned gate is trained too. prior_options: passed to :func:`pair_batch`.
    Dropout on; the pairs shuffled each epoch by a generator seeded with ``seed``; torch's seed
    and deterministic algorithms are set for the run (torch's random state and the previous
    setting are restored afterwards, so the caller's random numbers go on as if the call had not
    happened). Leaves the model in eval mode.
    """
    pairs = items(pairs, "pairs", "labelled pairs")
    whole(epochs, "epochs", 1)
    bert = bert_module(model)
    rng = np.random.default_rng(seed)
    encoded = _encoded_batches(pairs, batch_size, prior_options or {})
    frozen = [] if train_embeddings else [p for p in bert.embeddings.parameters()
                                          if p.requires_grad]
    for p in frozen:  # no gradient is computed for them at all (saves time and memory)
        p.requires_grad_(False)
    # fused=True: one fused kernel per parameter, so the update needs no temporaries the size
    # of the whole model (a small peak memory) and costs about a quarter of the per-parameter
    # loop's CPU time (AdamW's arithmetic; rounded in another order). The fused kernel does not
    # move torch's version counters, which run_bert's cache reads: each step moves them itself.
    trained = [p for p in bert.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trained, lr=lr, fused=True)
    losses = []
    bert.train()
    was_deterministic = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    caller_rng = torch.get_rng_state()  # put back afterwards: the caller's random stream
    torch.manual_seed(seed)  # dropout's masks, the same for the same seed
    try:
        for _ in range(epochs):
            for k in rng.permutation(len(encoded)):
                batch, target = encoded[k]
                loss = torch.nn.functional.mse_loss(pair_cosines(bert, batch), target)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                torch.autograd.graph.increment_version(trained)
                losses.append(loss.item())
    finally:
        bert.eval()
        for p in frozen:
            p.requires_grad_(True)
        torch.use_deterministic_algorithms(was_deterministic)
        torch.set_rng_state(caller_rng)
    return losses


def _encoded_batches(pairs: Sequence[StsPair], batch_size: int, prior_options: dict) -> list:
    """fine_tune's batches, in order: (pair_batch of each run of ``batch_size`` pairs, its targets
    score / 5). Computed once per pairs, size, options and default model, then reused (notebook 08
    fine-tunes six models on the same pairs): they depend on nothing else, and training only
    reads them. Options that cannot be a key (a lexicon dict) are encoded afresh each time."""
    key = (tuple(pairs), batch_size, tuple(sorted(prior_options.items())))
    try:
        hash(key)
    except TypeError:
        return _encode_batches(key[0], batch_size, prior_options, load_bert())
    return _cached_batches(key, load_bert())


@functools.lru_cache(maxsize=4)
def _cached_batches(key: tuple, default: LoadedBert) -> list:
    pairs, batch_size, options = key
    return _encode_batches(pairs, batch_size, dict(options), default)


def _encode_batches(pairs, batch_size: int, prior_options: dict, default: LoadedBert) -> list:
    batches = [pairs[k: k + batch_size] for k in range(0, len(pairs), batch_size)]
    return [(pair_batch(b, model=default, **prior_options), torch.tensor([p.score / 5 for p in b]))
            for b in batches]


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 0..n-1 with ties given their average rank: (number below + number at or below − 1)
    / 2, both counted in one sort (half-integers, exact in float64)."""
    ordered = np.sort(x)
    return (np.searchsorted(ordered, x, "left") + np.searchsorted(ordered, x, "right") - 1) / 2


def spearman(x, y) -> float:
    """Spearman's rank correlation: Pearson's r of the ranks (ties get their average rank).

    x, y: (m,) arrays of finite numbers, m >= 2, neither constant (a single value is constant).
    Returns a float in [-1, 1].
    """
    x, y = as_array(x, "x", 1), as_array(y, "y", 1)
    same_shape(x, y, ("x", "y"))
    rx, ry = _ranks(x) - (len(x) - 1) / 2, _ranks(y) - (len(y) - 1) / 2
    denom = math.sqrt(float(rx @ rx) * float(ry @ ry))
    if denom == 0:
        raise ValueError("Spearman's correlation is undefined when x or y is constant")
    return float(rx @ ry) / denom


class LinkEffects(NamedTuple):
    """Layer 0 of BERT with the prior, measured at every lexicon link of a set of pairs.

    A link is a word of sentence a and a word of b with a prior R > 0 across (read from the
    word's first piece as query, to all pieces of the linked word as keys). All arrays are (m,),
    one entry per link, weights summed over the linked word's pieces and averaged over the heads:
    standard (no prior), prior (the prior in layer 0), control (the prior with this one link set
    to 0); negative_heads: the share of heads whose scores to the linked word are all < 0;
    zeroed_positive: the share of the query's scores to keys of b that R sets to 0 which are > 0
    (all heads); pair: the index (in ``pairs``) of the pair the link is in, so an interval can
    resample whole pairs or groups of pairs rather than links, which are not independent.
    zero_negative: over all pairs, the share of scores at R = 0 that are < 0.
    """

    words: list
    standard: np.ndarray
    prior: np.ndarray
    control: np.ndarray
    negative_heads: np.ndarray
    zeroed_positive: np.ndarray
    pair: np.ndarray
    zero_negative: float


def link_effects(model, pairs: Sequence[StsPair] | Sequence[tuple[str, str]],
                 **prior_options) -> LinkEffects:
    """Measure what the prior does in layer 0 at every link of ``pairs`` (see LinkEffects).

    model: LoadedBert (its layer 0 read directly: embeddings, then Q and K; no forward hooks).
    pairs: a non-empty list of (sentence_a, sentence_b); prior_options as in :func:`pair_batch`.
    """
    kind(model, "model", LoadedBert, "the LoadedBert that load_bert() returns")
    pairs = items(pairs, "pairs", "(sentence_a, sentence_b)")
    bert, rows, pair_of, negatives, total = bert_module(model), [], [], 0, 0
    layer = bert.encoder.layer[0].attention.self
    h = bert.config.num_attention_heads
    for index, (a, b) in enumerate((p[0], p[1]) for p in pairs):
        batch = pair_batch([(a, b)], model=model, **prior_options)
        words = batch_word_ids(model, a, b, prior_options)
        with torch.no_grad():
            X = bert.embeddings(input_ids=batch.inputs["input_ids"],
                                token_type_ids=batch.inputs["token_type_ids"])[0]
            # kept in torch float32, as BERT's layer computes them: the signs counted here are
            # the model's own (the numpy project_heads gives float64, so other scores)
            Q, K = (project_heads_torch(X, f, h) for f in (layer.query, layer.key))  # (h, n, d_k)
            scores = scaled_scores(Q, K)  # (h, n, n), as eager_attention's
        R = batch.prior[0]
        negatives += int((scores[:, R == 0] < 0).sum())
        total += int((R == 0).sum()) * h
        pieces = model.tokenizer.convert_ids_to_tokens(batch.inputs["input_ids"][0])
        found = _links_of(scores, R, words, batch.in_b[0].bool(), pieces)
        rows, pair_of = rows + found, pair_of + [index] * len(found)
    return LinkEffects([r[0] for r in rows], *(np.array([r[k] for r in rows]) for k in range(1, 6)),
                       np.array(pair_of, dtype=int), negatives / total)


def batch_word_ids(model, a: str, b: str, prior_options: dict) -> list:
    """(sentence, word) of each piece of the pair as :func:`pair_batch` reads it (None: special)."""
    if prior_options.get("punctuation", "remove") == "remove":
        a, b = strip_punctuation(a), strip_punctuation(b)
    enc = (model or load_bert()).tokenizer(a, b)
    return [None if s is None else (s, w) for s, w in zip(enc.sequence_ids(0), enc.word_ids(0),
                                                          strict=True)]


def _links_of(scores, R, words, in_b, pieces) -> list:
    """One row (words, standard, prior, control, negative_heads, zeroed_positive) per link."""
    rows = []
    firsts = {w: p for p, w in reversed(list(enumerate(words))) if w is not None and w[0] == 0}
    for wa, q in sorted(firsts.items()):
        for wb in sorted({words[k] for k in range(len(words)) if in_b[k] and R[q, k] > 0}):
            keys = [k for k in range(len(words)) if words[k] == wb]
            control = R[q].clone()
            control[keys] = 0
            weights = [prior_weights(scores[:, q], row)[:, keys].sum(-1).mean().item()
                       for row in (torch.ones_like(R[q]), R[q], control)]
            zeroed = in_b & (R[q] == 0)
            text = ["".join(pieces[k].removeprefix("##") for k in range(len(words))
                            if words[k] == w) for w in (wa, wb)]
            negative = (scores[:, q, keys] < 0).all(-1).float().mean().item()
            rows.append((tuple(text), *weights, negative,
                         (scores[:, q, zeroed] > 0).float().mean().item()))
    return rows
