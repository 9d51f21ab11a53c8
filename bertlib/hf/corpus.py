"""BERT over a corpus: the sentences shipped with bertlib, run in padded batches.

Notebook 04 averages its statistics (:mod:`bertlib.lab.analysis`) over a few hundred sentences and
sentence pairs. This module loads them, runs the real model on all of them in padded batches
(one :class:`bertlib.hf.models.BertRun` per text, cut back to its own tokens), and gives the
model's sentence vectors, the last hidden states mean-pooled over the real tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from typing import NamedTuple

import numpy as np
import torch

from bertlib.checks import items, text, whole, within_positions
from bertlib.hf.loading import load_bert, max_positions
from bertlib.hf.models import batch_runs

__all__ = ["Corpus", "CorpusRuns", "load_corpus", "load_paraphrases", "run_corpus",
           "tokenize_batch", "masked_mean", "mean_pool", "sentence_vectors"]

Text = str | tuple[str, str]


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


def load_paraphrases() -> list[tuple[str, str]]:
    """24 pairs (sentence, the same said in other words), written for bertlib.

    A yardstick for how much a sentence vector moves when the meaning stays and the wording
    changes (``bertlib/data/paraphrase_pairs.tsv``; origin in ``corpus.md``).
    """
    folder = resources.files("bertlib") / "data"
    lines = (folder / "paraphrase_pairs.tsv").read_text(encoding="utf-8").splitlines()
    return [tuple(part.strip() for part in line.split("\t")) for line in lines if line.strip()]


class CorpusRuns(NamedTuple):
    """BERT's runs over a corpus: the kept runs (``bertlib.hf.models.BertRun``) and how many inputs
    were skipped because they are longer than the model's positions."""

    runs: list
    skipped: int


def _check_texts(texts: Sequence[Text]) -> list[tuple[str, str | None]]:
    """Each text as (first, second or None), after checking the list once."""
    parts = []
    for k, entry in enumerate(items(texts, "texts", "sentences or pairs (first, second)")):
        pair = (entry, None) if isinstance(entry, str) else tuple(entry) if isinstance(
            entry, tuple | list) else ()
        if len(pair) != 2:
            raise TypeError(f"text {k} must be a string or a pair (first, second), got {entry!r}")
        text(pair[0], f"text {k}")
        if pair[1] is not None:
            text(pair[1], f"the second sentence of text {k}")
        parts.append(pair)
    return parts


def _tokenize(parts: list[tuple[str, str | None]], model) -> dict:
    """One padded batch (B, N) of torch tensors; all sentences or all pairs."""
    seconds = None if parts[0][1] is None else [b for _, b in parts]
    enc = model.tokenizer([a for a, _ in parts], seconds, padding=True, truncation=False,
                          return_tensors="pt", verbose=False)
    if "token_type_ids" not in enc:
        enc["token_type_ids"] = torch.zeros_like(enc["input_ids"])
    return enc


def run_corpus(texts: Sequence[Text], model=None, max_pieces: int | None = None,
               batch_size: int = 32) -> CorpusRuns:
    """Run BERT on every text (a sentence, or a pair ``(first, second)``), keeping the maps.

    Inputs longer than the model allows (:func:`bertlib.hf.loading.max_positions`, 512 for BERT;
    or ``max_pieces`` if smaller) are skipped and counted, never truncated. The rest run in
    padded batches of ``batch_size`` (padding keys get weight 0, and each run is cut back to its
    own n tokens), so a few hundred sentences take seconds. Each run is a
    ``bertlib.hf.models.BertRun``: tokens (n,), input_ids (n,), token_type_ids (n,),
    hidden_states (layers + 1, n, d), attentions (layers, heads, n, n), in the order of
    ``texts``. Raises ValueError for an empty corpus, for one where every text is skipped, and
    for empty or whitespace-only texts.
    """
    parts = _check_texts(texts)
    whole(batch_size, "batch_size", 1)
    model = model or load_bert()
    limit = max_positions(model)
    if max_pieces is not None:
        limit = min(limit, whole(max_pieces, "max_pieces", 3))
    lengths = [len(model.tokenizer(a, b, truncation=False, verbose=False)["input_ids"])
               for a, b in parts]
    kept = [k for k, n in enumerate(lengths) if n <= limit]
    if not kept:
        raise ValueError(f"all {len(texts)} texts are longer than {limit} word pieces and were "
                         "skipped: give shorter sentences")
    runs = {}
    for is_pair in (False, True):  # the tokenizer batches sentences and pairs separately
        group = sorted((k for k in kept if (parts[k][1] is not None) == is_pair),
                       key=lambda k: lengths[k])
        for start in range(0, len(group), batch_size):
            chunk = group[start:start + batch_size]
            enc = _tokenize([parts[k] for k in chunk], model)
            runs.update(zip(chunk, batch_runs(enc, model), strict=True))
    return CorpusRuns([runs[k] for k in kept], len(texts) - len(kept))


def tokenize_batch(texts: Sequence[Text], model=None) -> dict:
    """Check the texts (N sentences, or N pairs) and tokenize them as one padded batch.

    Returns the tokenizer's torch tensors (N, n_max): input_ids, token_type_ids, attention_mask.
    Raises TypeError / ValueError for an empty list or an empty text, a mix of sentences and
    pairs, or an input longer than the model's positions (run_corpus skips those instead).
    """
    parts = _check_texts(texts)
    model = model or load_bert()
    if len({b is None for _, b in parts}) > 1:
        raise ValueError("give either only sentences or only pairs in one call")
    enc = _tokenize(parts, model)
    within_positions(enc["input_ids"].shape[1], max_positions(model),
                     "leave it out (run_corpus skips such inputs)", "an input")
    return enc


def masked_mean(hidden, flags):
    """v = Σ_i f_i h_i / Σ_i f_i: the mean of the pieces flagged 1, the one masked mean pooling.
    hidden: (N, n, d) tensor; flags: (N, n) tensor, 1 = pooled (a real token, or one sentence of
    a pair), 0 = left out. Returns (N, d) in hidden's float type, differentiable (fine-tuning's
    pair_cosines trains through it; mean_pool reads it out as numpy)."""
    real = flags.unsqueeze(-1).to(hidden.dtype)
    return (hidden * real).sum(1) / real.sum(1)


def mean_pool(hidden, attention_mask) -> np.ndarray:
    """v = (1/n) Σ_i h_i over the real tokens (:func:`masked_mean`), as numpy. hidden: (N, n, d)
    tensor; attention_mask: (N, n) (1 = real, 0 = padding). Returns (N, d) float64."""
    return masked_mean(hidden, attention_mask).double().numpy()


def sentence_vectors(texts: Sequence[Text], model=None) -> np.ndarray:
    """The model's sentence vectors: the last hidden states mean-pooled over the real tokens.

    v = (1/n) Σ_i h_i^(L) (all-MiniLM-L6-v2 is trained to be used this way; it has no MLM head).
    texts: N sentences or N pairs, run as one padded batch (not cached, so it sees an
    :func:`bertlib.hf.ablation.ablated_head` block). Returns (N, d) float64.
    """
    model = model or load_bert()
    enc = tokenize_batch(texts, model)
    with torch.no_grad():
        hidden = model.model(**enc).last_hidden_state
    return mean_pool(hidden, enc["attention_mask"])
