"""Checkers for notebook 08 (custom attention): write a "same position" prior, then plug it in.

Each returns a :class:`Feedback` and never raises on a learner's mistake.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from bertlib import custom
from bertlib.exercises import Feedback
from bertlib.models import encode, load_bert

__all__ = ["reference_position_prior", "check_position_prior", "check_plugged_in"]

#: The pairs a learner's prior is tried on: a one-to-one pair, and one with split words and
#: sentences of different lengths.
CHECK_PAIRS = [("The cat sat on the mat", "A feline rested on the rug"),
               ("Felines nap.", "The cat sleeps on a rug today.")]


def reference_position_prior(sentence_a: str, sentence_b: str) -> np.ndarray:
    """The "same position" prior S (n, n) over the pieces of [CLS] a [SEP] b [SEP].

    S = 1 inside a sentence; across, S = 1 where the k-th word of a meets the k-th word of b
    (words as BERT's tokenizer splits them, punctuation included), else 0; [CLS]/[SEP] are 0
    across; every piece of a word carries the word's value.
    """
    enc = encode(sentence_a, sentence_b)
    segment = enc["token_type_ids"][0].numpy()
    seq = np.array([-1 if s is None else s for s in enc.sequence_ids(0)])
    word = np.array([-1 if w is None else w for w in enc.word_ids(0)])
    across = (seq[:, None] != seq[None, :]) & (seq[:, None] >= 0) & (seq[None, :] >= 0)
    same_word = (word[:, None] == word[None, :]) & across
    return np.where(segment[:, None] == segment[None, :], 1.0, same_word.astype(float))


def _tokens(a: str, b: str) -> list[str]:
    return load_bert().tokenizer.convert_ids_to_tokens(encode(a, b)["input_ids"][0])


def check_position_prior(fn: Callable[[str, str], np.ndarray] | None) -> Feedback:
    """Run ``fn(sentence_a, sentence_b)`` on :data:`CHECK_PAIRS`; compare with the reference."""
    if fn is None:
        return Feedback(False, "no answer yet: write a function (sentence_a, sentence_b) -> S")
    if not callable(fn):
        return Feedback(False, f"expected a function (sentence_a, sentence_b) -> S, got "
                               f"{type(fn).__name__}")
    for a, b in CHECK_PAIRS:
        want = reference_position_prior(a, b)
        tokens = _tokens(a, b)
        n = len(tokens)
        try:
            got = np.asarray(fn(a, b), dtype=float)
        except Exception as exc:  # a learner's bug is feedback, not a crash
            return Feedback(False, f"your function raised {type(exc).__name__}: {exc}")
        if got.shape != (n, n):
            return Feedback(False, f"for {a!r} / {b!r} S must be ({n}, {n}), one row and column "
                                   f"per word piece of [CLS] a [SEP] b [SEP]; got {got.shape}")
        if not np.isfinite(got).all() or (got < 0).any():
            return Feedback(False, "S must hold finite numbers >= 0")
        segment = encode(a, b)["token_type_ids"][0].numpy()
        inside = np.equal.outer(segment, segment)
        if not (got[inside] == 1).all():
            return Feedback(False, "inside each sentence S must be 1 (including [CLS] and [SEP] "
                                   "with their own sentence)")
        if np.array_equal(got, want):
            continue
        special = np.isin(tokens, ["[CLS]", "[SEP]"])
        if got[(special[:, None] | special[None, :]) & ~inside].any():
            return Feedback(False, "[CLS] and [SEP] must be 0 across the two sentences")
        i, j = np.argwhere(got != want)[0]
        hint = (" — the pieces of one word share the word's position" if
                tokens[i].startswith("##") or tokens[j].startswith("##") or
                (j + 1 < n and tokens[j + 1].startswith("##")) or
                (i + 1 < n and tokens[i + 1].startswith("##")) else
                " — count words, not word pieces")
        return Feedback(False, f"for {a!r} / {b!r}: S[{i}, {j}] ({tokens[i]!r} -> {tokens[j]!r}) "
                               f"should be {want[i, j]:g}, got {got[i, j]:g}{hint}")
    return Feedback(True, "your prior links the k-th word of each sentence, pieces included")


def check_plugged_in(weights, prior) -> Feedback:
    """Check layer-0 attention (n, n), averaged over heads, for CHECK_PAIRS[0] under ``prior``.

    weights: what the learner got from the bundled model with prior attention on in layer 0
    ("multiply" mode) and ``prior`` passed to the forward; prior: their (n, n) matrix.
    """
    model = load_bert()
    if model.model.config._attn_implementation == custom.PRIOR_ATTENTION:
        return Feedback(False, "the shared model still has prior attention on: undo() it (or use "
                               "a `with` block) so other cells see standard BERT")
    if weights is None:
        return Feedback(False, "no answer yet: run the model with your prior in layer 0")
    a, b = CHECK_PAIRS[0]
    n = len(_tokens(a, b))
    try:
        W = np.asarray(weights, dtype=float)
        S = torch.as_tensor(np.asarray(prior, dtype=np.float32))[None]
    except (TypeError, ValueError):
        return Feedback(False, "weights and prior must be arrays of numbers")
    if W.shape == (12, n, n):
        return Feedback(False, "average over the 12 heads: weights.mean(0)")
    if W.shape != (n, n) or tuple(S.shape) != (1, n, n):
        return Feedback(False, f"expected weights and prior of shape ({n}, {n}) for this pair, "
                               f"got {W.shape} and {tuple(S.shape[1:])}")
    enc = encode(a, b)
    with torch.no_grad():
        standard = model.model(**enc, output_attentions=True).attentions[0][0].mean(0).numpy()
        try:
            with custom.use_prior_attention(model, layers=[0]):
                guided = model.model(**enc, prior=S, output_attentions=True)
        except (TypeError, ValueError) as exc:
            return Feedback(False, f"your prior cannot be used: {exc}")
    guided = guided.attentions[0][0].mean(0).numpy()
    if np.allclose(W, guided, atol=1e-5):
        if np.allclose(guided, standard, atol=1e-5):
            return Feedback(True, "right, and with this prior layer 0 is unchanged")
        return Feedback(True, f"right: your prior moved layer 0's attention by up to "
                              f"{np.abs(guided - standard).max():.3f}")
    if np.allclose(W, standard, atol=1e-5):
        return Feedback(False, "these are the standard weights: turn prior attention on "
                               "(use_prior_attention) and pass prior= to the forward")
    return Feedback(False, f"not the layer-0 weights under your prior (max difference "
                           f"{np.abs(W - guided).max():.3f}): layer 0, head mean, this pair")
