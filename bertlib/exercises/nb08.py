"""Checkers for notebook 08 (custom attention): write a "same position" prior, then plug it in.

Each returns a :class:`Feedback` and never raises on a learner's mistake.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from bertlib import custom
from bertlib.attention import softmax
from bertlib.exercises import (
    Feedback,
    as_answer_array,
    as_answer_word,
    call_answer,
    not_answered,
)
from bertlib.loading import load_bert
from bertlib.models import encode

__all__ = ["reference_position_prior", "check_position_prior", "check_plugged_in",
           "PREDICT_SCORES", "PREDICT_PRIOR", "check_zero_prior_prediction", "check_prior_design"]

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
    for a, b in CHECK_PAIRS:
        want = reference_position_prior(a, b)
        tokens = _tokens(a, b)
        n = len(tokens)
        got, error = call_answer(fn, a, b, todo="write a function (sentence_a, sentence_b) -> S")
        got = as_answer_array(got, f"S for {a!r} / {b!r}", (n, n), why=", one row and column "
                              "per word piece of [CLS] a [SEP] b [SEP]") if error is None else error
        if isinstance(got, Feedback):
            return got
        if (got < 0).any():
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
    W = as_answer_array(weights, "the weights",
                        todo="run the model with your prior in layer 0")
    if isinstance(W, Feedback):
        return W
    a, b = CHECK_PAIRS[0]
    n = len(_tokens(a, b))
    h = model.model.config.num_attention_heads
    if W.shape == (h, n, n):
        return Feedback(False, f"these are {h} matrices, one per head, shape {W.shape}; the "
                               f"exercise asks for one (n, n) matrix, the average over the heads")
    W, prior = (as_answer_array(x, name, (n, n), why=" for this pair")
                for x, name in ((W, "the weights"), (prior, "the prior")))
    for x in (W, prior):
        if isinstance(x, Feedback):
            return x
    S = torch.as_tensor(prior, dtype=torch.float32)[None]
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
        return Feedback(False, "these are the standard weights, as if no prior were there: "
                               "your prior was not in play during that forward pass")
    return Feedback(False, f"not the layer-0 weights under your prior (max difference "
                           f"{np.abs(W - guided).max():.3f}): they differ from both the standard "
                           "and the guided head average of layer 0 for this pair")


#: The predict-then-check question: one query's scores for three keys, and its prior row.
PREDICT_SCORES = np.array([2.0, -1.0, 0.5])
PREDICT_PRIOR = np.array([1.0, 0.0, 0.0])
_KEYS = ("first", "second", "third")


def check_zero_prior_prediction(guess) -> Feedback:
    """Check the guess of which key's weight RISES most when the scores PREDICT_SCORES are
    multiplied by the prior PREDICT_PRIOR before the softmax ("first", "second" or "third")."""
    g = as_answer_word(guess, "your guess", _KEYS, todo='write "first", "second" or "third"')
    if isinstance(g, Feedback):
        return g
    before = softmax(PREDICT_SCORES)
    after = softmax(PREDICT_SCORES * PREDICT_PRIOR)
    change = after - before
    shown = ", ".join(f"{k} {c:+.3f}" for k, c in zip(_KEYS, change, strict=True))
    right = _KEYS[int(change.argmax())]
    if g == right:
        return Feedback(True, f"the {right} key: its score was negative, and × 0 raised it to 0 "
                              f"(changes in weight: {shown})")
    if g == "first":
        return Feedback(False, f"S = 1 keeps the first score as it is; what moves are the others "
                               f"(changes in weight: {shown}): a 0 in S sets a score to 0, and "
                               "e⁰ = 1 is not small")
    return Feedback(False, f"the third score was positive, so × 0 LOWERED it: its weight fell "
                           f"(changes in weight: {shown}); look at the key whose score was "
                           "negative")


def _mean_weight_to(model, enc, prior, query: int, keys: list[int]) -> float:
    """Layer 0's attention from ``query`` to ``keys`` (summed), averaged over heads."""
    with torch.no_grad():
        if prior is None:
            out = model.model(**enc, output_attentions=True)
        else:
            with custom.use_prior_attention(model, layers=[0]):
                out = model.model(**enc, prior=prior, output_attentions=True)
    return float(out.attentions[0][0][:, query, keys].sum(-1).mean())


def check_prior_design(S, factor: float = 2.0) -> Feedback:
    """Check a designed prior S (n, n) for CHECK_PAIRS[0]: with S in layer 0, 'cat' must put at
    least ``factor`` times its standard weight on the two pieces of 'feline' (head mean)."""
    if S is None:
        return not_answered("build an (n, n) array with values in [0, 1]")
    model = load_bert()
    if model.model.config._attn_implementation == custom.PRIOR_ATTENTION:
        return Feedback(False, "the shared model still has prior attention on: undo() it (or use "
                               "a `with` block) so other cells see standard BERT")
    a, b = CHECK_PAIRS[0]
    tokens = _tokens(a, b)
    n = len(tokens)
    S = as_answer_array(S, "S", (n, n), dtype=np.float32, why=": one row and column per word "
                        "piece of this pair, [CLS] and [SEP] included")
    if isinstance(S, Feedback):
        return S
    if S.min() < 0 or S.max() > 1:
        return Feedback(False, f"keep S in [0, 1] (a similarity), got values from {S.min():g} to "
                               f"{S.max():g}: above 1 would amplify scores, which is not this "
                               "lesson's prior")
    enc = encode(a, b)
    cat, feline = tokens.index("cat"), [tokens.index("fe"), tokens.index("##line")]
    standard = _mean_weight_to(model, enc, None, cat, feline)
    got = _mean_weight_to(model, enc, torch.from_numpy(S)[None], cat, feline)
    ratio = got / standard
    if ratio >= factor:
        return Feedback(True, f"'cat' now puts {got:.3f} on 'fe' + '##line' ({ratio:.1f}× the "
                              f"standard {standard:.3f}; the target was {factor:g}×)")
    if np.array_equal(S, np.ones_like(S)):
        return Feedback(False, "an all-ones prior changes nothing: every score stays as it is")
    if (S[cat] == 1).all():
        return Feedback(False, f"row {cat} ('cat', the query) is all ones, so cat's scores are "
                               f"unchanged ({got:.3f}, {ratio:.1f}× the standard): a prior acts "
                               "on the QUERY's row")
    return Feedback(False, f"'cat' puts {got:.3f} on 'fe' + '##line', {ratio:.2f}× the standard "
                           f"{standard:.3f}; the target is {factor:g}×. Multiplying can only pull "
                           "a score toward 0: which of cat's scores compete with feline's?")
