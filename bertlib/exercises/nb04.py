"""Checkers for notebook 04 (what the heads look at).

Reproduce: :func:`check_share_to`, :func:`check_entropy`, :func:`check_rollout` call the
learner's function on small random attention maps whose answer is known from
:mod:`bertlib.lab.analysis`, and name the usual mistake when the result is wrong. A function that
gets its answer by calling the very :mod:`bertlib.lab.analysis` function the lesson used (seen while
it runs, however it was imported) is told to write the steps itself.
Predict, then check: :func:`check_sep_prediction` (does [SEP] get more attention in pairs?).
Design: :func:`check_block_map` (an attention map that the rules call "block"; says how close).
Every checker says "not answered yet" (without raising) for the unsolved stub.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from contextlib import contextmanager

import numpy as np

from bertlib.exercises import (
    Feedback,
    as_answer_array,
    as_answer_word,
    call_answer,
)
from bertlib.hf.corpus import load_corpus, run_corpus
from bertlib.lab.analysis import (
    PATTERN_THRESHOLDS,
    attention_entropy,
    attention_rollout,
    pattern_features,
    pattern_labels,
    to_token_shares,
)
from bertlib.lab.claims import spread

__all__ = ["TOKENS", "SEGMENTS", "check_share_to", "check_entropy", "check_rollout",
           "sep_shares", "check_sep_prediction", "check_block_map"]

#: The input every checker uses: a sentence pair, so [SEP] occurs twice.
TOKENS = ["[CLS]", "the", "owl", "called", ".", "[SEP]", "it", "was", "dark", "[SEP]"]
#: Their token types: sentence A up to the first [SEP], sentence B after it.
SEGMENTS = [0, 0, 0, 0, 0, 0, 1, 1, 1, 1]


def _maps(seed: int = 4, layers: int = 2, heads: int = 3) -> np.ndarray:
    """Random row-stochastic maps (layers, heads, n, n) with some exact zeros."""
    rng = np.random.default_rng(seed)
    n = len(TOKENS)
    x = rng.random((layers, heads, n, n)) ** 3
    x[x < 0.05] = 0.0
    x[..., 0] += 0.01  # no row is all zeros
    return x / x.sum(-1, keepdims=True)


@contextmanager
def _watch(library_fn: Callable | None):
    """Collects, in the yielded list, each call of ``library_fn`` made inside the block (seen by
    its code object, so any import route counts); the previous profiler is restored after."""
    seen: list[bool] = []
    if library_fn is None:
        yield seen
        return
    code = inspect.unwrap(library_fn).__code__
    previous = sys.getprofile()

    def profile(frame, event, arg):
        if event == "call" and frame.f_code is code:
            seen.append(True)

    sys.setprofile(profile)
    try:
        yield seen
    finally:
        sys.setprofile(previous)


def _call(fn: Callable, *args, nan_hint: str | None = None, library: Callable | None = None):
    """(result as an array, None) or (None, Feedback: not answered, raised, not an array, or
    the library function ``library`` called instead of the steps written out).

    nan_hint: the message for a result containing NaN, when the exercise has a usual cause."""
    with _watch(library) as seen:
        result, error = call_answer(fn, *args, todo="fill in the function so that it returns an "
                                                    "array, then run this cell again")
    if error is None and seen:
        return None, Feedback(False, f"your function calls bertlib's `{library.__name__}`, the one "
                                     "the lesson used: this exercise asks you to reproduce it, so "
                                     "write its steps yourself (the formula is in the lesson)")
    if error is None and nan_hint is not None and _has_nan(result):
        return None, Feedback(False, nan_hint)
    result = as_answer_array(result, "the result") if error is None else error
    return (None, result) if isinstance(result, Feedback) else (result, None)


def _has_nan(result) -> bool:
    """Whether ``result`` (array, tensor or nested list) holds a NaN; False if not numbers."""
    if hasattr(result, "detach"):
        result = result.detach().cpu().numpy()
    try:
        return bool(np.isnan(np.asarray(result, dtype=float)).any())
    except (TypeError, ValueError):
        return False


def check_share_to(fn: Callable) -> Feedback:
    """Check ``fn(attentions, tokens, target)`` -> (layers, heads): the share of attention to
    every piece equal to ``target``, (1/n) Σ_i Σ_{j: tokens[j] = target} α_ij (Clark et al.).

    Tried with target "[SEP]" on a sentence pair, where [SEP] occurs twice.
    """
    A = _maps()
    is_sep = np.array([t == "[SEP]" for t in TOKENS])
    got, error = _call(fn, A.copy(), list(TOKENS), "[SEP]", library=to_token_shares)
    if error is not None:
        return error
    want = A[..., is_sep].sum(-1).mean(-1)
    if got.shape != want.shape:
        return Feedback(False, f"the result should have one number per head, shape (layers, "
                               f"heads) = {want.shape}; got {got.shape}")
    if np.allclose(got, want, atol=1e-6):
        return Feedback(True, "right: summed over both [SEP] columns, averaged over the queries")
    n = len(TOKENS)
    if np.allclose(got, n * want, atol=1e-6):
        return Feedback(False, f"yours is n = {n} times too large: the queries were summed, so a "
                               "head that looks only at [SEP] would score n, not 1 (section 2's "
                               "formula averages over them)")
    if np.allclose(got, want / is_sep.sum(), atol=1e-6):
        return Feedback(False, "yours is half the share: the two [SEP] tokens were averaged, but "
                               "a head that splits its weight between them still gives [SEP] all "
                               "of it")
    if np.allclose(got, A[..., np.argmax(is_sep)].mean(-1), atol=1e-6):
        return Feedback(False, "yours counts only the first [SEP]; this is a pair, so [SEP] "
                               "occurs twice and the second one's attention is missing")
    if np.allclose(got, A[..., is_sep, :].sum(-1).mean(-1), atol=1e-6):
        return Feedback(False, "yours reads the attention *from* [SEP] (its rows, which always "
                               "sum to 1), not the attention *to* it")
    return Feedback(False, f"for layer 0, head 0 the share to [SEP] is {want[0, 0]:.4f}; yours "
                           f"is {got[0, 0]:.4f}")


def check_entropy(fn: Callable) -> Feedback:
    """Check ``fn(attentions)`` -> (layers, heads): Clark et al.'s entropy in nats,
    α' = 0.9999·α + 0.0001/n, H = −(1/n) Σ_i Σ_j α'_ij log α'_ij.

    The maps contain exact zeros, so forgetting the smoothing shows as NaN (0·log 0).
    """
    A = _maps(seed=7)
    got, error = _call(fn, A.copy(), nan_hint=(
        "NaN: some attention values are exactly 0, and 0·log 0 gives NaN in numpy; Clark et al. "
        "smooth them first (section 3), so no log of 0 is ever taken"), library=attention_entropy)
    if error is not None:
        return error
    want = attention_entropy(A)
    if got.shape != want.shape:
        return Feedback(False, f"the result should have shape (layers, heads) = {want.shape}, "
                               f"got {got.shape}")
    if np.allclose(got, want, atol=1e-6):
        return Feedback(True, "right: smoothed, natural log, summed over keys, averaged over "
                              "queries; a uniform head would score log n")
    n = A.shape[-1]
    if np.allclose(got, -want, atol=1e-6):
        return Feedback(False, "the sign is flipped: H = −Σ α' log α' is >= 0")
    if np.allclose(got, want / np.log(2), atol=1e-6):
        return Feedback(False, "you used log base 2 (bits); use the natural log (nats), so a "
                               "uniform head scores log n")
    if np.allclose(got, n * want, atol=1e-6):
        return Feedback(False, f"you summed over the queries; average over them (divide by "
                               f"n = {n})")
    if np.allclose(got, want / n, atol=1e-6):
        return Feedback(False, f"yours is n = {n} times too small: you averaged over the keys "
                               "instead of summing over them; a query's entropy is a sum over "
                               "its keys (only the queries are averaged)")
    if np.allclose(got, want / np.log(n), atol=1e-6):
        return Feedback(False, "you divided by log n (the entropy of a uniform head), so a "
                               "uniform head scores 1; give it in nats, where it scores log n")
    if np.allclose(got, attention_entropy(A, smoothing=0.0), atol=1e-6):
        return Feedback(False, "you left out the smoothing (0·log 0 counted as 0): Clark et al. "
                               "smooth first, α' = 0.9999·α + 0.0001/n")
    if np.allclose(got, want, atol=0.05):
        return Feedback(False, "close, but not equal: use Clark's smoothing exactly, "
                               "0.9999·α + 0.0001/n, before taking the log")
    return Feedback(False, f"for layer 0, head 0 the entropy is {want[0, 0]:.4f}; yours is "
                           f"{got[0, 0]:.4f}")


def check_rollout(fn: Callable) -> Feedback:
    """Check ``fn(attentions)`` -> (layers, n, n): attention rollout (Abnar & Zuidema 2020),
    A_l = 0.5·Ā_l + 0.5·I (Ā_l: layer l's maps averaged over the heads; rows renormalised),
    Ã_0 = A_0, Ã_l = A_l · Ã_{l−1}.
    """
    A = _maps(seed=11, layers=3)
    got, error = _call(fn, A.copy(), library=attention_rollout)
    if error is not None:
        return error
    want = attention_rollout(A)
    n = A.shape[-1]
    if got.shape == (n, n) and np.allclose(got, want[-1], atol=1e-6):
        return Feedback(False, "the top layer is right; return every layer, shape (layers, n, n)")
    if got.shape != want.shape:
        return Feedback(False, f"the result should have shape (layers, n, n) = {want.shape}, got "
                               f"{got.shape}")
    if np.allclose(got, want, atol=1e-6):
        return Feedback(True, "right: residual mixed in, heads averaged, multiplied up the layers")
    mixed = 0.5 * A.mean(1) + 0.5 * np.eye(n)
    if np.allclose(got, attention_rollout(A, residual=0.0), atol=1e-6):
        return Feedback(False, "you multiplied the raw head-averaged maps: add the residual "
                               "first, A_l = 0.5·Ā_l + 0.5·I (the skip connection carries each "
                               "token's own vector up)")
    if np.allclose(got, mixed, atol=1e-6):
        return Feedback(False, "you mixed in the residual but never multiplied through the "
                               "layers: Ã_l = A_l · Ã_{l−1}")
    wrong_order = [mixed[0]]
    for layer in range(1, len(mixed)):
        wrong_order.append(wrong_order[-1] @ mixed[layer])
    if np.allclose(got, np.stack(wrong_order), atol=1e-6):
        return Feedback(False, "the product is in the wrong order: the new layer goes on the "
                               "left, Ã_l = A_l · Ã_{l−1}")
    return Feedback(False, f"layer 0, row 0 should be {np.round(want[0, 0, :4], 4).tolist()} …; "
                           f"yours is {np.round(got[0, 0, :4], 4).tolist()} …. Check the three "
                           "steps: the mean over the heads Ā_l, then 0.5·Ā_l + 0.5·I with rows "
                           "renormalised, then the product with the new layer on the left")


def _sep_runs(model, count: int) -> tuple[list, list]:
    """The runs of the first ``count`` corpus sentences and the first ``count`` pairs."""
    corpus = load_corpus()
    return tuple(run_corpus(texts, model=model).runs
                 for texts in (corpus.sentences[:count], corpus.pairs[:count]))


def _sep_share(run) -> float:
    """Clark et al.'s share of attention to [SEP] in one run, the mean over every head."""
    return float(to_token_shares(run.attentions, run.tokens)["[SEP]"].mean())


def sep_shares(model=None, count: int = 16, per_text: bool = False):
    """(single sentences, pairs): the share of attention to [SEP], Clark et al.'s measure
    averaged over every head and over the first ``count`` sentences / pairs of the corpus.
    per_text=True returns two lists instead, one value per text (the mean over its heads)."""
    values = [[_sep_share(r) for r in runs] for runs in _sep_runs(model, count)]
    if per_text:
        return values[0], values[1]
    return float(np.mean(values[0])), float(np.mean(values[1]))


def check_sep_prediction(guess, model=None) -> Feedback:
    """Check a prediction, "higher" or "lower": is the share of attention to [SEP] higher in
    sentence pairs (two [SEP]) than in single sentences (one)? The message also gives what an
    even spread would give each ([SEP] count / n), so the reason can be checked, not only the
    word."""
    guess = as_answer_word(guess, "your prediction", ("higher", "lower"),
                           todo='write "higher" or "lower" in `prediction`, then run this cell '
                                "again")
    if isinstance(guess, Feedback):
        return guess
    runs = _sep_runs(model, 16)
    single, pair = (spread([_sep_share(r) for r in rs], precision=3) for rs in runs)
    even = [np.mean([r.tokens.count("[SEP]") / len(r.tokens) for r in rs]) for rs in runs]
    truth = "higher" if pair.mean > single.mean else "lower"
    apart = pair.lo > single.hi or single.lo > pair.hi
    numbers = (f"[SEP] gets {single} in single sentences, {pair} in pairs (per text, the mean "
               f"over every head); the two intervals {'do not' if apart else 'do'} overlap. An "
               f"even spread would give [SEP] 1/n = {even[0]:.3f} in the sentences and 2/n = "
               f"{even[1]:.3f} in the pairs (twice the [SEP]s, but more pieces to share with)")
    ratios = (f"By chance a pair's [SEP] share would be {even[1] / even[0]:.2f} times a "
              f"sentence's; measured, it is {pair.mean / single.mean:.2f} times")
    if guess == truth:
        return Feedback(True, f"right, {truth}: {numbers}. {ratios}: was your reason the "
                              "number of [SEP] tokens, or what the heads do with them?")
    return Feedback(False, f"it is {truth}: {numbers}. {ratios}: was your reason the number of "
                           "[SEP] tokens, or what the heads do with them?")


def check_block_map(A) -> Feedback:
    """Check a designed (n, n) attention map on TOKENS (a pair, token types SEGMENTS) that
    :func:`bertlib.lab.analysis.pattern_labels` labels "block"; otherwise say which rule fails and
    by how much. Rows must be probabilities: non-negative, summing to 1."""
    n = len(TOKENS)
    A = as_answer_array(A, "A", (n, n), layout="(n, n)", why=", one row per query of TOKENS",
                        todo=f"build a ({n}, {n}) array `A`, then run this cell again")
    if isinstance(A, Feedback):
        return A
    if (A < 0).any():
        return Feedback(False, "attention probabilities are non-negative")
    sums = A.sum(-1)
    if not np.allclose(sums, 1.0, atol=1e-6):
        worst = int(np.abs(sums - 1).argmax())
        return Feedback(False, f"every row must sum to 1 (a softmax); row {worst} "
                               f"({TOKENS[worst]!r}) sums to {sums[worst]:.3f}")
    f = {k: float(v[0, 0]) for k, v in pattern_features(A, TOKENS, SEGMENTS).items()}
    label = str(pattern_labels(f))
    t = PATTERN_THRESHOLDS
    numbers = (f"vertical {f['vertical']:.2f}, diagonal {f['diagonal']:.2f}, far mass "
               f"{f['far_mass']:.2f}, within its sentence {f['within_segment']:.2f} "
               f"(chance {f['within_chance']:.2f})")
    if label == "block":
        return Feedback(True, f"a block head: {numbers}")
    needs = []
    if f["vertical"] >= t["vertical"] or f["diagonal"] >= t["diagonal"] or (
            min(f["vertical"], f["diagonal"]) >= t["vertical+diagonal"]):
        needs.append(f"it is {label} first: move weight off [CLS]/[SEP] and the neighbour band")
    if not f["far_mass"] >= t["block_mass"]:
        needs.append(f"far mass {f['far_mass']:.2f} < {t['block_mass']}: put more weight on "
                     "words two or more places away")
    if np.isnan(f["within_segment"]):
        needs.append("within its sentence is undefined (nan): no query sends any weight to a "
                     "far word, so there is nothing to keep inside a sentence")
    elif not f["within_segment"] >= max(t["block"], f["within_chance"] + t["block_over_chance"]):
        over = f["within_segment"] - f["within_chance"]
        needs.append(f"within its sentence {f['within_segment']:.2f} is too low: it needs "
                     f"{t['block']} and {t['block_over_chance']} over chance (yours is "
                     f"{over:+.2f} over chance); keep that far weight inside the query's own "
                     "sentence")
    return Feedback(False, f"labelled {label} ({numbers}); " + "; ".join(needs))
