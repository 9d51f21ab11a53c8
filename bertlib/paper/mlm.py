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

from bertlib.checks import IGNORE_INDEX, has_shape, kind, number, vocab_ids

__all__ = ["MaskedInput", "mask_tokens", "mask_batch", "mlm_loss"]


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
    """BERT's corruption of one input (n,) (hf.params.mask_sentence's too): :func:`mask_batch`,
    just below, on one row. seed: the draw's seed; the rest as mask_batch. Returns (n,) arrays."""
    ids = vocab_ids(input_ids, "input_ids", vocab_size, 1, "a 1-D array")
    batch = mask_batch(ids[None], mask_id, vocab_size, special_ids, seed,
                       mask_prob, mask_frac, random_frac)  # a batch of one row
    return MaskedInput(*(a[0] for a in batch))  # that row, (n,) arrays


def mask_batch(input_ids, mask_id: int, vocab_size: int, special_ids=(), rng=None,
               mask_prob=0.15, mask_frac=0.8, random_frac=0.1) -> MaskedInput:
    """BERT's corruption of (B, n) ids, row by row; special ids are never chosen. Returns (B, n)."""
    ids, special, ordinary, rng, (p, f_m, f_r) = _check_masking(  # rng: Generator or seed
        input_ids, vocab_size, special_ids, rng, (mask_prob, mask_frac, random_frac))
    k = np.maximum(1, np.rint(p * (~special).sum(-1))) * (p > 0)  # max(1, round(p · m)) a row
    key, fate = rng.random((2, *ids.shape))  # per token: a key to choose by, a fate for 80/10/10
    chosen = np.where(special, np.inf, key).argsort(-1).argsort(-1) < k[:, None]  # k smallest
    action = np.select([~chosen, fate < f_m, fate < f_m + f_r], ["", "mask", "random"], "keep")
    out, labels = np.where(action == "mask", mask_id, ids), np.where(chosen, ids, IGNORE_INDEX)
    out[action == "random"] = rng.choice(ordinary, size=int((action == "random").sum()))
    return MaskedInput(out, labels, chosen, action)  # labels: the original id where chosen


def mlm_loss(logits, labels) -> torch.Tensor:
    """ℒ = −(1/|chosen|) Σ_{(b,t) ∈ chosen} log softmax(logits[b, t])[labels[b, t]], the loss
    (ℒ, not L: L counts layers). logits: (B, N, V) float tensor; labels: (B, N) int64, the
    original id where chosen, IGNORE_INDEX elsewhere (:func:`mask_batch`). Returns ℒ, a 0-d
    tensor that backpropagates."""
    kind(logits, "logits", torch.Tensor, "a (B, N, V) torch tensor")
    has_shape(labels, "labels", tuple(logits.shape[:-1]), "(B, N)", "(logits' first two axes)")
    chosen = labels != IGNORE_INDEX  # (B, N), the chosen positions
    log_p = torch.log_softmax(logits[chosen], dim=-1)  # (|chosen|, V)
    return -log_p.gather(-1, labels[chosen][:, None]).mean()


# ---------------------------------------------------------------- the checks, once at the edge


def _check_masking(input_ids, vocab_size: int, special_ids, rng, fractions
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.random.Generator, list]:
    """mask_batch's checks: (B, n) ids in the vocabulary, an ordinary token in every row, and
    three fractions (mask_prob, mask_frac, random_frac) in [0, 1] with mask_frac + random_frac
    <= 1. rng: a seed, a Generator, or None (seed 0).
    Returns (ids, special: bool of ids' shape, the ordinary ids (the vocabulary but special_ids),
    the Generator, the three fractions)."""
    ids = vocab_ids(input_ids, "input_ids", vocab_size, 2, "a 2-D (batch, n) array")
    special = np.isin(ids, np.asarray(list(special_ids), dtype=int))
    empty = np.flatnonzero(~(~special).any(axis=-1))  # rows of special tokens only
    if empty.size:
        where = "the input has" if len(ids) == 1 else f"row(s) {empty.tolist()} have"
        raise ValueError(f"{where} no ordinary tokens to mask (only special tokens)")
    fractions = [number(v, name, 0, 1) for v, name in
                 zip(fractions, ("mask_prob", "mask_frac", "random_frac"), strict=True)]
    if fractions[1] + fractions[2] > 1:
        raise ValueError(f"mask_frac + random_frac must be at most 1 (the rest is kept), got "
                         f"{fractions[1]} + {fractions[2]}")
    ordinary = np.setdiff1d(np.arange(vocab_size), np.asarray(list(special_ids), dtype=int))
    return ids, special, ordinary, np.random.default_rng(0 if rng is None else rng), fractions
