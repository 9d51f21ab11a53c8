"""Checkers for notebook 02 (multi-head attention): ``split_heads`` and a determiner→noun head."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from bertlib.attention import split_heads
from bertlib.exercises import Feedback

__all__ = ["DET_NOUN_SENTENCES", "check_split_heads", "check_det_noun_head"]

#: Sentences for the determiner exercise, each with the noun that every "the" introduces, in
#: order. Adjectives sit between some pairs, so "look at the next token" is not enough.
DET_NOUN_SENTENCES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("The cat sat on the mat", ("cat", "mat")),
    ("The old cat sat on the soft mat", ("cat", "mat")),
    ("The little girl read the book to the dog", ("girl", "book", "dog")),
    ("The man in the red car waved at the children", ("man", "car", "children")),
)


def check_split_heads(fn: Callable) -> Feedback:
    """Check a learner's ``fn(X, h)`` that should turn X (n, d) into (h, n, d / h).

    Head i must hold feature columns i·d_k … (i+1)·d_k − 1 of every token (d_k = d / h), the
    layout of :func:`bertlib.attention.split_heads`. Tried on X = 0, 1, 2, … in a (3, 8) array
    with h = 2 and h = 4, so every misplaced number shows.
    """
    n, d = 3, 8
    X = np.arange(n * d, dtype=float).reshape(n, d)
    for h in (2, 4):
        d_k = d // h
        try:
            got = np.asarray(fn(X.copy(), h))
        except Exception as exc:  # a learner's bug becomes feedback, never a traceback
            return Feedback(False, f"with h = {h} your function raised {type(exc).__name__}: {exc}")
        want = split_heads(X, h)
        if got.shape == (n, h, d_k):
            return Feedback(False, f"shape {got.shape} is (n, h, d_k): the features are cut into "
                                   "heads, but the head axis must come first; swap axes 0 and 1")
        if got.shape != want.shape:
            return Feedback(False, f"with X of shape {X.shape} and h = {h} the result should have "
                                   f"shape (h, n, d / h) = {want.shape}, got {got.shape}")
        if np.array_equal(got, want):
            continue
        if np.array_equal(got, X.reshape(h, n, d_k)):
            return Feedback(False, "a direct reshape to (h, n, d_k) regroups the numbers in memory "
                                   "order, so a head receives pieces of several tokens' rows. "
                                   "Reshape to (n, h, d_k) first, then swap the first two axes")
        return Feedback(False, f"with h = {h}, head 0 should hold columns 0..{d_k - 1} of every "
                               f"token, i.e. {want[0].tolist()}; yours holds {got[0].tolist()}")
    return Feedback(True, "split_heads is right: head i holds columns i·d_k … (i+1)·d_k − 1 of "
                          "every token, for h = 2 and h = 4")


def _det_noun_scores() -> tuple[np.ndarray, list[tuple[str, int, int]]]:
    """(scores (layers, heads), pairs): mean weight that "the" gives to the noun it introduces.

    pairs: (text, i_the, j_noun) word-piece positions over all of DET_NOUN_SENTENCES.
    """
    from bertlib.models import run_bert

    per_pair, pairs = [], []
    for text, nouns in DET_NOUN_SENTENCES:
        run = run_bert(text)
        dets = [i for i, t in enumerate(run.tokens) if t == "the"]
        for i, noun in zip(dets, nouns, strict=True):
            j = run.tokens.index(noun, i)
            pairs.append((text, i, j))
            per_pair.append(run.attentions[:, :, i, j])
    return np.mean(per_pair, axis=0), pairs


def check_det_noun_head(layer, head) -> Feedback:
    """Is (layer, head) the head of the real BERT in which "the" gives its noun the most weight?

    The measure: attentions[layer, head, i_the, j_noun] averaged over every "the" in
    DET_NOUN_SENTENCES (the noun it introduces, not simply the next word). The right answer is the
    (layer, head) with the largest average, computed here; a wrong answer is told its average, its
    rank and where its "the" rows look instead.
    """
    from bertlib.models import check_layer_head, load_bert, run_bert

    try:
        layer, head = check_layer_head(load_bert(), layer, head, allow_mean=False)
    except (TypeError, ValueError) as exc:  # a wrong index is feedback, not a traceback
        return Feedback(False, str(exc))
    scores, pairs = _det_noun_scores()
    L, H = scores.shape
    best = np.unravel_index(int(scores.argmax()), scores.shape)
    mine = float(scores[layer, head])
    if (layer, head) == best:
        return Feedback(True, f"layer {layer}, head {head}: on average 'the' gives "
                              f"{mine:.2f} of its attention to its noun, more than in any other "
                              f"of the {L * H} heads")
    rank = int((scores > mine).sum()) + 1
    text, i, _ = pairs[-1]
    run = run_bert(text)
    top = run.tokens[int(run.attentions[layer, head, i].argmax())]
    return Feedback(False, f"in layer {layer}, head {head}, 'the' gives its noun only {mine:.3f} "
                           f"on average (rank {rank} of {L * H}); e.g. in {text!r} the last 'the' "
                           f"looks most at {top!r}. One head reaches "
                           f"{float(scores.max()):.2f}: keep looking")
