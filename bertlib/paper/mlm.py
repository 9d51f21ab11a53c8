"""How BERT was pre-trained: the masked-language-model corruption and its loss.

Devlin et al. 2019, section 3.1: choose 15 % of the input's tokens for prediction; of those,
replace 80 % by [MASK], 10 % by a random token, and keep 10 % unchanged. The model must predict
the original token at every chosen position (and only there). As in Google's original
``create_pretraining_data.py``, the number chosen is round(0.15 · n) (at least 1) over the
non-special tokens, and each chosen token then draws its fate independently (80 / 10 / 10).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from bertlib.checks import has_shape, kind, number, vocab_ids
from bertlib.hf.loading import load_bert
from bertlib.hf.models import encode

__all__ = ["IGNORE_INDEX", "MaskedInput", "mask_tokens", "mask_batch", "mlm_loss",
           "mask_sentence"]

#: Label of the positions the loss ignores (the PyTorch / transformers convention).
IGNORE_INDEX = -100


class MaskedInput(NamedTuple):
    """One corrupted input. All arrays have shape (n,).

    input_ids: the ids BERT sees (some replaced). labels: the original id at chosen positions,
    IGNORE_INDEX elsewhere. chosen: bool, the 15 % to predict. action: 'mask', 'random', 'keep'
    at chosen positions, '' elsewhere.
    """

    input_ids: np.ndarray
    labels: np.ndarray
    chosen: np.ndarray
    action: np.ndarray


def mask_tokens(input_ids, mask_id: int, vocab_size: int, special_ids=(), seed: int = 0,
                mask_prob=0.15, mask_frac=0.8, random_frac=0.1) -> MaskedInput:
    """[MASK] corruption (masked-LM) of one input: k = max(1, round(mask_prob · m)) of its m
    non-special tokens chosen, each then [MASK] (mask_frac), random (random_frac) or kept.

    input_ids: (n,) ints; mask_id: [MASK]'s id; vocab_size: ids are 0..vocab_size−1; special_ids:
    never chosen nor drawn ([CLS], [SEP], [PAD]); seed: the draw's seed. Returns (n,) arrays.
    """
    ids, special, rng, (p, mask_frac, random_frac) = _check_masking(
        input_ids, 1, vocab_size, special_ids, seed, (mask_prob, mask_frac, random_frac))
    chosen = _choose(special, p, rng)  # k = max(1, round(p · m)) of the m ordinary tokens
    return _corrupt(ids, chosen, rng, mask_id, vocab_size, special_ids, mask_frac, random_frac)


def mask_batch(input_ids, mask_id: int, vocab_size: int, special_ids=(), rng=None,
               mask_prob=0.15, mask_frac=0.8, random_frac=0.1) -> MaskedInput:
    """[MASK] corruption (masked-LM) of each row of a padded (B, n) batch: k = max(1, round(p · m))
    of the row's m non-special tokens chosen (p = mask_prob), then [MASK] / random / kept with
    probabilities mask_frac / random_frac / the rest, as :func:`mask_tokens`.
    rng: numpy Generator (default seed 0); padding counts as special. Returns (B, n) arrays."""
    ids, special, rng, (p, mask_frac, random_frac) = _check_masking(
        input_ids, 2, vocab_size, special_ids, rng, (mask_prob, mask_frac, random_frac))
    chosen = _choose(special, p, rng)  # k = max(1, round(p · m)) of each row's m ordinary tokens
    return _corrupt(ids, chosen, rng, mask_id, vocab_size, special_ids, mask_frac, random_frac)


def mlm_loss(logits, labels) -> torch.Tensor:
    """L = −(1/|M|) Σ_{(b,t) ∈ M} log softmax(logits[b, t])[labels[b, t]], M = the chosen positions.

    logits: (B, N, V) float tensor (the model's scores over the vocabulary); labels: (B, N) int64,
    the original id at the chosen positions and IGNORE_INDEX elsewhere (:func:`mask_batch`).
    Returns the mean cross-entropy over the chosen positions only, a 0-d tensor that backpropagates.
    """
    kind(logits, "logits", torch.Tensor, "a (B, N, V) torch tensor")
    has_shape(labels, "labels", tuple(logits.shape[:-1]), "(B, N)", "(logits' first two axes)")
    chosen = labels != IGNORE_INDEX  # M, (B, N)
    log_p = torch.log_softmax(logits[chosen], dim=-1)  # (|M|, V)
    return -log_p.gather(-1, labels[chosen][:, None]).mean()


def mask_sentence(text: str, text_pair: str | None = None, model=None,
                  seed: int = 0) -> tuple[list[str], list[str], MaskedInput]:
    """:func:`mask_tokens` on a sentence (or pair) tokenised by the model's tokenizer; [CLS],
    [SEP] and [PAD] are never chosen. Returns (tokens before, tokens after, MaskedInput)."""
    loaded = load_bert() if model is None else model
    tok = loaded.tokenizer
    ids = encode(text, text_pair, loaded)["input_ids"][0].numpy()
    masked = mask_tokens(ids, tok.mask_token_id, len(tok), tok.all_special_ids, seed)
    return (tok.convert_ids_to_tokens(ids.tolist()),
            tok.convert_ids_to_tokens(masked.input_ids.tolist()), masked)


# ---------------------------------------------------------------- below the public functions: the
# checks once at the edge, and the 80/10/10 both corruptions share

def _check_masking(input_ids, ndim: int, vocab_size: int, special_ids, rng, fractions
                   ) -> tuple[np.ndarray, np.ndarray, np.random.Generator, list[float]]:
    """The checks mask_tokens and mask_batch share: ids of ``ndim`` dims in the vocabulary, an
    ordinary token in every row, and three fractions (mask_prob, mask_frac, random_frac) in
    [0, 1] with mask_frac + random_frac ≤ 1. rng: a seed, a Generator, or None (seed 0).
    Returns (ids, special: bool of ids' shape, the Generator, the three fractions)."""
    what = "a 1-D array" if ndim == 1 else "a 2-D (batch, n) array"
    ids = vocab_ids(input_ids, "input_ids", vocab_size, ndim, what)
    special = np.isin(ids, np.asarray(list(special_ids), dtype=int))
    empty = np.flatnonzero(~np.atleast_2d(~special).any(axis=-1))  # rows of special tokens only
    if empty.size:
        where = "the input has" if ndim == 1 else f"row(s) {empty.tolist()} have"
        raise ValueError(f"{where} no ordinary tokens to mask (only special tokens)")
    fractions = [number(v, name, 0, 1) for v, name in
                 zip(fractions, ("mask_prob", "mask_frac", "random_frac"), strict=True)]
    if fractions[1] + fractions[2] > 1:
        raise ValueError(f"mask_frac + random_frac must be at most 1 (the rest is kept), got "
                         f"{fractions[1]} + {fractions[2]}")
    return ids, special, np.random.default_rng(0 if rng is None else rng), fractions


def _choose(special: np.ndarray, mask_prob: float, rng: np.random.Generator) -> np.ndarray:
    """Per row, k = max(1, round(mask_prob · m)) of its m non-special positions, uniformly (bool of
    special's shape; none if mask_prob = 0). A batch ranks uniform keys, one input uses rng.choice:
    their seeded draws differ, and notebooks 03 and 09 print what each draws, so both stay."""
    m = (~special).sum(-1)  # ordinary tokens per row
    k = np.maximum(1, np.rint(mask_prob * m).astype(int)) if mask_prob > 0 else np.zeros_like(m)
    if special.ndim == 2:  # a batch: rank uniform keys in each row, special tokens last
        rank = np.where(special, np.inf, rng.random(special.shape)).argsort(-1).argsort(-1)
        return rank < k[:, None]
    chosen = np.zeros(special.shape, dtype=bool)  # one input
    chosen[rng.choice(np.flatnonzero(~special), size=int(k), replace=False)] = True
    return chosen


def _corrupt(ids: np.ndarray, chosen: np.ndarray, rng: np.random.Generator, mask_id: int,
             vocab_size: int, special_ids, mask_frac: float, random_frac: float) -> MaskedInput:
    """BERT's 80/10/10 on the chosen positions (any shape): each becomes [MASK] with probability
    mask_frac, a random ordinary id with probability random_frac, and stays itself otherwise."""
    fate = rng.random(ids.shape)
    action = np.full(ids.shape, "", dtype=object)
    action[chosen & (fate < mask_frac)] = "mask"
    action[chosen & (fate >= mask_frac) & (fate < mask_frac + random_frac)] = "random"
    action[chosen & (fate >= mask_frac + random_frac)] = "keep"
    ordinary = np.setdiff1d(np.arange(vocab_size), np.asarray(list(special_ids), dtype=int))
    out = ids.copy()
    out[action == "mask"] = mask_id
    out[action == "random"] = rng.choice(ordinary, size=int((action == "random").sum()))
    labels = np.where(chosen, ids, IGNORE_INDEX)
    return MaskedInput(out, labels, chosen, action.astype(str))
