"""Checkers for notebook 08 (custom attention): write a "same position" prior, then plug it in.

Each returns a :class:`Feedback` and never raises on a learner's mistake.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from bertlib.exercises import (
    Feedback,
    as_answer_array,
    as_answer_word,
    call_answer,
    not_answered,
)
from bertlib.hf import custom
from bertlib.hf.loading import load_bert
from bertlib.hf.models import encode
from bertlib.paper.attention import softmax

__all__ = ["reference_position_prior", "check_position_prior", "check_plugged_in",
           "PREDICT_SCORES", "PREDICT_PRIOR", "check_zero_prior_prediction", "check_prior_design"]

#: The pairs a learner's prior is tried on: a one-to-one pair, and one with split words and
#: sentences of different lengths.
CHECK_PAIRS = [("The cat sat on the mat", "A feline rested on the rug"),
               ("Felines nap.", "The cat sleeps on a rug today.")]


def reference_position_prior(sentence_a: str, sentence_b: str) -> np.ndarray:
    """The "same position" prior R (n, n) over the pieces of [CLS] a [SEP] b [SEP].

    R = 1 inside a sentence; across, R = 1 where the k-th word of a meets the k-th word of b
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


def _inside_mistake(got, inside, tokens) -> Feedback | None:
    """Feedback when R is not 1 everywhere inside a sentence, naming the first [SEP]'s rule."""
    if (got[inside] == 1).all():
        return None
    sep = tokens.index("[SEP]")
    rule = ("[CLS] and the first [SEP] belong to sentence a (token_type_ids 0), the last [SEP] "
            "to sentence b")
    others = np.ones(len(tokens), bool)
    others[sep] = False
    if (got[np.ix_(others, others)][inside[np.ix_(others, others)]] == 1).all():
        if not got[sep].any() and not got[:, sep].any():
            return Feedback(False, f"the first [SEP] (piece {sep}) is 0 with every piece: that is "
                                   "the lesson's lexicon rule (section 1), not this exercise's. "
                                   f"Here {rule}: it is 1 with every piece of [CLS] a [SEP]")
        with_b = (got[sep, ~inside[sep]] == 1).all() and not (got[sep, inside[sep]] == 1).all()
        return Feedback(False, f"the first [SEP] (piece {sep}) is not 1 with all of sentence a"
                               f"{' (you put it with b)' if with_b else ''}: {rule}")
    i, j = np.argwhere(inside & (got != 1))[0]
    return Feedback(False, f"inside each sentence R must be 1 ({rule}); R[{i}, {j}] "
                           f"({tokens[i]!r} -> {tokens[j]!r}) is {got[i, j]:g}")


def _across_mistake(got, want, tokens, word, seq) -> str:
    """What is wrong across the sentences (R already 1 inside, 0 at [CLS]/[SEP] across)."""
    across = (seq[:, None] >= 0) & (seq[None, :] >= 0) & (seq[:, None] != seq[None, :])
    odd = across & (got != 0) & (got != 1)
    if odd.any():
        i, j = np.argwhere(odd)[0]
        return (f"R[{i}, {j}] ({tokens[i]!r} -> {tokens[j]!r}) is {got[i, j]:g}: across, this "
                "prior says only 'same position or not', so every entry is 1 or 0")
    if not np.array_equal(got, got.T):
        i, j = np.argwhere(got != got.T)[0]
        return (f"R is not symmetric: R[{i}, {j}] ({tokens[i]!r} -> {tokens[j]!r}) is "
                f"{got[i, j]:g} but R[{j}, {i}] is {got[j, i]:g}; if word k of a matches word k "
                "of b, b's word matches a's too: fill both cross-sentence blocks")
    a_to_b = across & (seq[:, None] == 0) & (got == 1)
    offsets = set((word[None, :] - word[:, None])[a_to_b].tolist())
    if len(offsets) == 1 and abs(next(iter(offsets))) == 1:
        return (f"off by one: you link word k of a with word k{next(iter(offsets)):+d} of b. "
                "Count the words of each sentence from 0 (word_ids start again at 0 in b)")
    missing = across & (want == 1) & (got == 0)
    if missing.any() and all(tokens[i] in custom.STOP_WORDS or tokens[j] in custom.STOP_WORDS
                             for i, j in np.argwhere(missing)):
        return ("the stop words are missing: this prior has no stop-word list (unlike the "
                "lesson's), the k-th words are linked whatever they are")
    i, j = np.argwhere(got != want)[0]
    if any(tokens[k].startswith("##") for k in (i, j, min(i + 1, len(tokens) - 1),
                                                 min(j + 1, len(tokens) - 1))):
        hint = "the pieces of one word share the word's position"
    else:
        hint = ("across, R is 1 exactly where the two pieces' word numbers (counted in their "
                "own sentence) are equal")
    return (f"R[{i}, {j}] ({tokens[i]!r} -> {tokens[j]!r}) should be {want[i, j]:g}, got "
            f"{got[i, j]:g} — {hint}")


def check_position_prior(fn: Callable[[str, str], np.ndarray] | None) -> Feedback:
    """Run ``fn(sentence_a, sentence_b)`` on :data:`CHECK_PAIRS`; compare with the reference
    (n, n); name the first mistake found (range, inside, [CLS]/[SEP], values, symmetry, offset)."""
    for a, b in CHECK_PAIRS:
        want, tokens = reference_position_prior(a, b), _tokens(a, b)
        n = len(tokens)
        got, error = call_answer(fn, a, b, todo="write a function (sentence_a, sentence_b) -> R")
        got = as_answer_array(got, f"R for {a!r} / {b!r}", (n, n), why=", one row and column "
                              "per word piece of [CLS] a [SEP] b [SEP], punctuation included"
                              ) if error is None else error
        if isinstance(got, Feedback):
            return got
        if (got < 0).any() or (got > 1).any():
            return Feedback(False, f"R must hold numbers from 0 to 1 (a similarity: every entry "
                                   f"at most 1, section 2); yours go from {got.min() + 0.0:g} to "
                                   f"{got.max() + 0.0:g}")
        enc = encode(a, b)
        segment = enc["token_type_ids"][0].numpy()
        inside = np.equal.outer(segment, segment)
        mistake = _inside_mistake(got, inside, tokens)
        if mistake is not None:
            return mistake
        if np.array_equal(got, want):
            continue
        special = np.isin(tokens, ["[CLS]", "[SEP]"])
        if got[(special[:, None] | special[None, :]) & ~inside].any():
            return Feedback(False, "[CLS] and [SEP] must be 0 across the two sentences")
        seq = np.array([-1 if s is None else s for s in enc.sequence_ids(0)])
        word = np.array([-1 if w is None else w for w in enc.word_ids(0)])
        return Feedback(False, f"for {a!r} / {b!r}: "
                               f"{_across_mistake(got, want, tokens, word, seq)}")
    return Feedback(True, "your prior links the k-th word of each sentence, pieces included")


def _squeeze_one(x):
    """A (1, n, n) array or tensor as (n, n); anything else unchanged."""
    shape = getattr(x, "shape", None)
    return x[0] if shape is not None and len(shape) == 3 and shape[0] == 1 else x


def _prior_mistake(prior, a: str, b: str, model) -> Feedback | None:
    """Feedback when ``prior`` (n, n) is not the same-position prior of exercise 1 for a / b."""
    want = reference_position_prior(a, b)
    if np.array_equal(prior, want):
        return None
    lexicon = custom.similarity_prior(a, b, model=model)
    if lexicon.shape == prior.shape and np.allclose(prior, lexicon):
        return Feedback(False, "this is the lesson's lexicon prior, whose layer-0 attention "
                               "section 2 already computed: plug in YOUR same-position prior, "
                               "the one your exercise-1 function returns for this pair")
    i, j = np.argwhere(prior != want)[0]
    return Feedback(False, f"this is not the same-position prior of exercise 1 (at R[{i}, {j}] "
                           f"it has {prior[i, j]:g}, that prior has {want[i, j]:g}): plug in what "
                           "your exercise-1 function returns for this pair, once its checker "
                           "passes")


def check_plugged_in(A, prior) -> Feedback:
    """Check layer-0 attention (n, n), averaged over heads, for CHECK_PAIRS[0] under ``prior``.

    A: the attention the learner got from the bundled model with prior attention on in layer 0
    ("multiply" mode) and ``prior`` passed to the forward; prior: their same-position prior of
    exercise 1 for that pair, (n, n) or (1, n, n) as fed to the model.
    """
    model = load_bert()
    if model.model.config._attn_implementation == custom.PRIOR_ATTENTION:
        return Feedback(False, "the shared model still has prior attention on: undo() it (or use "
                               "a `with` block) so other cells see standard BERT")
    A = as_answer_array(_squeeze_one(A), "the attention",
                        todo="run the model with your prior in layer 0")
    if isinstance(A, Feedback):
        return A
    a, b = CHECK_PAIRS[0]
    n = len(_tokens(a, b))
    h = model.model.config.num_attention_heads
    if A.shape == (h, n, n):
        return Feedback(False, f"these are {h} matrices, one per head, shape {A.shape}; the "
                               f"exercise asks for one (n, n) matrix, the average over the heads")
    A, prior = (as_answer_array(_squeeze_one(x), name, (n, n), why=" for this pair")
                for x, name in ((A, "the attention"), (prior, "the prior")))
    for x in (A, prior):
        if isinstance(x, Feedback):
            return x
    mistake = _prior_mistake(prior, a, b, model)
    if mistake is not None:
        return mistake
    R = torch.as_tensor(prior, dtype=torch.float32)[None]
    enc = encode(a, b)
    with torch.no_grad():
        standard = model.model(**enc, output_attentions=True).attentions[0][0].mean(0).numpy()
        with custom.use_prior_attention(model, layers=[0]):
            guided = model.model(**enc, prior=R, output_attentions=True)
    guided = guided.attentions[0][0].mean(0).numpy()
    if np.allclose(A, guided, atol=1e-5):
        return Feedback(True, f"right: your prior moved layer 0's attention by up to "
                              f"{np.abs(guided - standard).max():.3f}")
    if np.allclose(A, standard, atol=1e-5):
        return Feedback(False, "this is the standard attention, as if no prior were there: "
                               "your prior was not in play during that forward pass")
    return Feedback(False, f"not the layer-0 attention under your prior (max difference "
                           f"{np.abs(A - guided).max():.3f}): they differ from both the standard "
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
        return Feedback(False, f"R = 1 keeps the first score as it is; what moves are the others "
                               f"(changes in weight: {shown}): a 0 in R sets a score to 0, and "
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


#: By how much both pieces of 'feline' must exceed every other key in cat's row of a design.
STAND_OUT = 0.5


def _design_mistake(R, tokens, cat: int, feline: list[int]) -> Feedback | None:
    """Feedback when R does not single out 'feline' in cat's row (the query's row), else None."""
    if np.array_equal(R, np.ones_like(R)):
        return Feedback(False, "an all-ones prior changes nothing: every score stays as it is")
    if (R[cat] == 1).all():
        return Feedback(False, f"row {cat} ('cat', the query) is all ones, so cat's scores are "
                               "unchanged: a prior acts on the QUERY's row")
    others = [j for j in range(len(tokens)) if j not in feline]
    rival = others[int(np.argmax(R[cat, others]))]
    if R[cat, feline].min() >= R[cat, rival] + STAND_OUT:
        return None
    uniform = len(feline) / len(tokens)
    return Feedback(False, f"your prior does not single out 'feline' in cat's row: "
                           f"{tokens[rival]!r} gets {R[cat, rival]:g}, and 'fe' / '##line' get "
                           f"{R[cat, feline[0]]:g} / {R[cat, feline[1]]:g}. Any weight gained "
                           "that way is not the link's: with cat's row all 0 every score is 0 "
                           f"and the attention uniform, {uniform:.3f} on feline's {len(feline)} "
                           f"pieces ({len(feline)} of {len(tokens)} keys), with no knowledge of "
                           f"cats. Give feline's pieces at least {STAND_OUT:g} more than every "
                           "other key in cat's row (the lexicon's weakest link is 0.5)")


def check_prior_design(R, factor: float = 2.0) -> Feedback:
    """Check a designed prior R (n, n) for CHECK_PAIRS[0]: R must single out 'feline' in cat's
    row (both pieces at least STAND_OUT above every other key), and with R in layer 0, 'cat'
    must put at least ``factor`` times its standard weight on feline's two pieces (head mean)."""
    if R is None:
        return not_answered("build an (n, n) array with values in [0, 1]")
    model = load_bert()
    if model.model.config._attn_implementation == custom.PRIOR_ATTENTION:
        return Feedback(False, "the shared model still has prior attention on: undo() it (or use "
                               "a `with` block) so other cells see standard BERT")
    a, b = CHECK_PAIRS[0]
    tokens = _tokens(a, b)
    n = len(tokens)
    R = as_answer_array(R, "R", (n, n), dtype=np.float32, why=": one row and column per word "
                        "piece of this pair, [CLS] and [SEP] included")
    if isinstance(R, Feedback):
        return R
    if R.min() < 0 or R.max() > 1:
        return Feedback(False, f"keep R in [0, 1] (a similarity), got values from {R.min():g} to "
                               f"{R.max():g}: above 1 would amplify scores, which is not this "
                               "lesson's prior")
    cat, feline = tokens.index("cat"), [tokens.index("fe"), tokens.index("##line")]
    mistake = _design_mistake(R, tokens, cat, feline)
    if mistake is not None:
        return mistake
    enc = encode(a, b)
    standard = _mean_weight_to(model, enc, None, cat, feline)
    got = _mean_weight_to(model, enc, torch.from_numpy(R)[None], cat, feline)
    ratio, uniform = got / standard, len(feline) / n
    if ratio < factor:
        return Feedback(False, f"'cat' puts {got:.3f} on 'fe' + '##line', {ratio:.2f}× the "
                               f"standard {standard:.3f}; the target is {factor:g}×. Multiplying "
                               "can only pull a score toward 0: which of cat's scores compete "
                               "with feline's?")
    versus = ("above it: in the mean over heads the link itself adds weight" if got > uniform
              else "below it: the link helps only in the heads where cat's scores to feline are "
              "positive (section 2), and wiping cat's row would do better")
    return Feedback(True, f"'cat' now puts {got:.3f} on 'fe' + '##line' ({ratio:.1f}× the "
                          f"standard {standard:.3f}; the target was {factor:g}×). For comparison, "
                          f"cat's row all 0 (no link, uniform attention) gives {uniform:.3f}: "
                          f"yours is {versus}")
