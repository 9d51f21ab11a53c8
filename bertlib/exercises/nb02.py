"""Checkers for notebook 02 (multi-head attention).

- :func:`check_cost_guess`: predict, then check: how many times the parameters grow when every
  head gets the full model width d instead of d / h.
- :func:`check_split_heads`: a learner's ``split_heads``, for one sentence or a batch.
- :func:`check_w_o_swap`: design W_O so that the toy's output lists head 1, then head 0 backwards.
- :func:`check_det_noun_head`: find the real model's head that links "the" to its noun.

An unanswered stub (``None``) gets a "not answered yet" message, never an exception.
"""

from __future__ import annotations as _annotations

import re as _re
from collections.abc import Callable as _Callable

import numpy as _np

from bertlib.exercises import Feedback as _Feedback
from bertlib.exercises import as_answer_array as _as_answer_array
from bertlib.exercises import as_answer_number as _as_answer_number
from bertlib.exercises import attempt_note as _attempt_note
from bertlib.exercises import call_answer as _call_answer
from bertlib.exercises import calls_library as _calls_library
from bertlib.exercises import described as _described
from bertlib.exercises import explained_tries as _explained_tries
from bertlib.exercises import form_error as _form_error
from bertlib.exercises import is_complex as _is_complex
from bertlib.exercises import not_answered as _not_answered
from bertlib.exercises.watched import call_watched as _call_watched
from bertlib.hf.loading import load_bert as _load_bert
from bertlib.hf.models import check_layer_head as _check_layer_head
from bertlib.hf.models import run_bert as _run_bert
from bertlib.paper import toy as _toy
from bertlib.paper.attention import multi_head_attention as _multi_head_attention
from bertlib.paper.attention import split_heads as _split_heads

__all__ = ["DET_NOUN_SENTENCES", "check_cost_guess", "check_split_heads", "check_w_o_swap",
           "check_det_noun_head"]

#: Sentences for the determiner exercise, each with the noun that every "the" introduces, in
#: order. Adjectives sit between some pairs, so "look at the next token" is not enough.
DET_NOUN_SENTENCES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("The cat sat on the mat", ("cat", "mat")),
    ("The old cat sat on the soft mat", ("cat", "mat")),
    ("The little girl read the book to the dog", ("girl", "book", "dog")),
    ("The man in the red car waved at the children", ("man", "car", "children")),
)


#: What a batched split that hands the work to bertlib's own split_heads hears.
_USES_LIBRARY = ("your function calls bertlib's split_heads, which already handles batches; write "
                 "the split into heads yourself")


def check_split_heads(fn: _Callable, batched: bool = False) -> _Feedback:
    """Check a learner's ``fn(X, h)`` that should turn X (n, d) into (h, n, d / h).

    Head i must hold feature columns i·d_k … (i+1)·d_k − 1 of every token (d_k = d / h), the
    layout of :func:`bertlib.paper.attention.split_heads`. Tried on X = 0, 1, 2, … in a (3, 8) array
    with h = 2 and h = 4, so every misplaced number shows. ``batched=True``: X is a batch of five
    sentences, (5, 3, 8), and the result must be (batch, h, n, d_k) = (5, h, 3, 8 / h); as that is
    the exercise of notebook 02, a function that hands the work to bertlib's own ``split_heads``
    is refused there.
    """
    if fn is None:
        return _not_answered()
    if batched and _calls_library(fn, _split_heads):
        return _Feedback(False, _USES_LIBRARY)
    lead, n, d = ((5,) if batched else ()), 3, 8
    X = _np.arange(int(_np.prod(lead + (n, d))), dtype=float).reshape(*lead, n, d)
    for h in (2, 4):
        d_k = d // h
        got, error, called = _call_watched(fn, _split_heads, X.copy(), h,
                                           when=f"with X of shape {X.shape} and h = {h}")
        if batched and called:  # imported in its own body, which calls_library cannot see
            return _Feedback(False, _USES_LIBRARY)
        if batched and (single := _one_sentence_only(fn, X, h, got, error)) is not None:
            return single
        if error is not None and (numpy_said := _numpy_error(error, X)) is not None:
            return numpy_said
        if error is None and not hasattr(got, "shape") and not isinstance(got, list | tuple):
            return _Feedback(False, f"with X of shape {X.shape} and h = {h} your function returned "
                                    f"{_described(got)}; it should return an array")
        got = _as_answer_array(got, "the result", dtype=None) if error is None else error
        if isinstance(got, _Feedback):
            return got
        want = _split_heads(X, h)
        if got.shape == lead + (n, h, d_k):
            return _Feedback(False, f"shape {got.shape} is {'(batch, ' if batched else '('}n, h, "
                                    "d_k): the features are cut into heads, but the result must "
                                    f"be {'(batch, ' if batched else '('}h, n, d_k), head axis "
                                    "first: which two axes are in the wrong order?")
        if batched and got.shape == (h, 5, n, d_k):
            return _Feedback(False, f"shape {got.shape}: the batch axis must stay first, "
                                    "(batch, h, n, d_k)")
        if got.shape != want.shape:
            return _Feedback(False, f"with X of shape {X.shape} and h = {h} the result should "
                                    "have shape "
                                    f"{'(batch, h, n, d / h)' if batched else '(h, n, d / h)'}"
                                    f" = {want.shape}, got {got.shape}"
                                    f"{_cut_elsewhere(fn, got, X, h)}")
        if _np.array_equal(got, want):
            continue
        first = want[(0,) * len(lead)][0]
        mine = got[(0,) * len(lead)][0]
        if _np.array_equal(got, X.reshape(want.shape)):
            return _Feedback(False, f"with h = {h}, head 0 holds {mine.tolist()} but should hold "
                                    f"columns 0..{d_k - 1} of every token, {first.tolist()}: a "
                                    f"direct reshape to {want.shape} regroups the numbers in "
                                    "memory order, so its rows mix pieces of several tokens")
        return _Feedback(False, f"with h = {h}, head 0 should hold columns 0..{d_k - 1} of every "
                                f"token, i.e. {first.tolist()}; yours holds {mine.tolist()}")
    X2 = _np.arange(96 if batched else 48, dtype=float).reshape(*((2,) if batched else ()), 4, 12)
    return _typed_sizes(*_call_answer(fn, X2.copy(), 3), X2, 3, X.shape)


def _numpy_error(error: _Feedback, X: _np.ndarray) -> _Feedback | None:
    """numpy's bare words for a shape that cannot be, explained: a shape typed in for one
    example, or a size computed with / (a float); None for any other error."""
    if "cannot reshape array" in error.message:
        return _Feedback(False, f"{error.message}: a shape typed in for one example? "
                                f"{_any_sizes(X)}")
    if "'float' object cannot be interpreted as an integer" in error.message:
        return _Feedback(False, f"{error.message}: a size computed with / is a float (8 / 2 = "
                                "4.0) even when it divides evenly, and a shape takes whole "
                                "numbers, as // gives them")
    return None


def _one_sentence_only(fn: _Callable, X: _np.ndarray, h: int, got, error: _Feedback | None
                       ) -> _Feedback | None:
    """The Feedback for a function written for one sentence that fails on the batch X (batch, n,
    d): it raised there or gave the wrong shape, yet on X[0] alone, (n, d), it splits right."""
    want = _split_heads(X, h)
    try:  # the right shape, or its axes in another order (heads before the batch): judged below
        if error is None and sorted(_np.shape(got)) == sorted(want.shape):
            return None
    except ValueError:  # a ragged list: judged below
        pass
    one, fail = _call_answer(fn, X[0].copy(), h)
    mine = _as_answer_array(one, "the result", dtype=None) if fail is None else fail
    if isinstance(mine, _Feedback) or not _np.array_equal(mine, want[0]):
        return None
    return _Feedback(False, f"your function splits one sentence, X of shape (n, d) = {X[0].shape}, "
                            f"right; but here X has a batch axis first, (batch, n, d) = {X.shape}"
                            f"{_attempt_note(error)}, and the result must be (batch, h, n, d_k) = "
                            f"{want.shape}: n and d are the last two axes of X")


def _typed_sizes(got, error: _Feedback | None, X: _np.ndarray, h: int, first: tuple) -> _Feedback:
    """The verdict on a second shape of X, once ``first`` passed: a size typed in shows here."""
    mine = error if error is not None else _as_answer_array(got, "the result", dtype=None)
    if not isinstance(mine, _Feedback) and _np.array_equal(mine, _split_heads(X, h)):
        return _Feedback(True, "correct: your function's head i holds columns i·d_k … (i+1)·d_k − 1"
                               f" of every token, for X of shape {first} (h = 2 and h = 4) and "
                               f"{X.shape} (h = {h})")
    why = _attempt_note(error)
    return _Feedback(False, f"right for X of shape {first} with h = 2 and 4, but not for X of "
                            f"shape {X.shape} with h = {h}{why}: a size typed in "
                            f"({' or '.join(map(str, first))})? {_any_sizes(X)}")


def _cut_elsewhere(fn: _Callable, got: _np.ndarray, X: _np.ndarray, h: int) -> str:
    """"" unless ``got``, of X's size and the right number of axes, is cut at other sizes than
    split_heads(X, h): then name h and d // h swapped (fn gives each h the other's shape), or ask
    whether h, or another size, was typed in."""
    want = _split_heads(X, h).shape
    if got.size != X.size or got.ndim != len(want):
        return ""
    other = next((k for k in (2, 4) if k != h and got.shape == _split_heads(X, k).shape), None)
    if other is not None and _shape_of(_call_answer(fn, X.copy(), other)[0]) == want:
        return (f", the shape for h = {other}, and with h = {other} yours has the shape for h = "
                f"{h}: the number of heads and the size of each head, d // h, traded places. "
                "Which axis of your result counts the heads?")
    if other is not None:
        return f", the shape for h = {other}: is h typed in? {_any_sizes(X)}"
    if sorted(got.shape) != sorted(want):  # not the right axes in another order: other sizes
        return f": a size typed in, or read from the wrong axis of X? {_any_sizes(X)}"
    return ""


def _shape_of(result) -> tuple | None:
    """np.shape of a learner's result, or None when it has none (a ragged list, None)."""
    try:
        return None if result is None else _np.shape(result)
    except ValueError:
        return None


def _any_sizes(X: _np.ndarray) -> str:
    """What a split typed in for one shape of ``X`` is told: it must work for every shape."""
    batch = "batch size, " if X.ndim == 3 else ""
    return (f"The function must work for any {batch}n, d and h: read the sizes from X.shape and "
            "from h")


def _det_noun_scores() -> tuple[_np.ndarray, _np.ndarray, list[tuple[str, int, int]]]:
    """(scores (layers, heads), per_pair (pairs, layers, heads), pairs): the weight that "the"
    gives to the noun it introduces, averaged and per pair.

    pairs: (text, i_the, j_noun) word-piece positions over all of DET_NOUN_SENTENCES.
    """
    per_pair, pairs = [], []
    for text, nouns in DET_NOUN_SENTENCES:
        run = _run_bert(text)
        dets = [i for i, t in enumerate(run.tokens) if t == "the"]
        for i, noun in zip(dets, nouns, strict=True):
            j = run.tokens.index(noun, i)
            pairs.append((text, i, j))
            per_pair.append(run.attentions[:, :, i, j])
    return _np.mean(per_pair, axis=0), _np.array(per_pair), pairs


@_explained_tries("section 8 and the exercise (average each head over all pairs, take the largest)")
def check_det_noun_head(layer, head) -> _Feedback:
    """Is (layer, head) the head of the real BERT in which "the" gives its noun the most weight?

    The measure: attentions[layer, head, i_the, j_noun] averaged over every "the" in
    DET_NOUN_SENTENCES (the noun it introduces, not simply the next word). The right answer is the
    (layer, head) with the largest average, computed here. A wrong answer is told where its "the"
    rows look instead (counts of kinds of key), never a measured share, a rank or a hint that
    points at one other head, so that a loop over the heads learns only right or wrong.
    """
    for name, value in (("layer", layer), ("head", head)):
        if isinstance(value, tuple | list | _np.ndarray):
            items = list(value.ravel()) if isinstance(value, _np.ndarray) else list(value)
            items = [x.item() if isinstance(x, _np.generic) else x  # 2, not int64(2)
                     for x in items]
            shown = (items if len(items) == 2 and all(isinstance(x, int) for x in items)
                     else ["…", "…"])
            plain = tuple(items) if isinstance(value, tuple) else items
            return _form_error(f"give layer and head separately, one whole number each "
                               f"(layer = {shown[0]}, head = {shown[1]}), not both in "
                               f"`{name}` as {type(value).__name__} {plain!r}")
    if layer is None and head is None:
        return _not_answered("replace None with two whole numbers: layer, head")
    if layer is None or head is None:
        return _not_answered("one of layer, head is still None: give both, as whole numbers")
    layer, head = (int(x) if isinstance(x, float | _np.floating) and float(x).is_integer() else x
                   for x in (layer, head))  # 2.0 is the whole number 2
    scores, _, pairs = _det_noun_scores()
    L, H = scores.shape
    best = tuple(int(x) for x in _np.unravel_index(int(scores.argmax()), scores.shape))
    try:
        layer, head = _check_layer_head(_load_bert(), layer, head, allow_mean=False)
    except (TypeError, ValueError) as exc:  # a wrong index is feedback, not a traceback
        swapped = _whole(layer, head) and 0 <= head < L <= layer < H  # (head, layer) in range
        return _form_error(f"{exc} (layers and heads are counted from 0"
                           f"{'; the order is layer, then head' * swapped})")
    if (layer, head) == best:
        return _Feedback(True, f"layer {layer}, head {head}: on average 'the' gives "
                               f"{float(scores[layer, head]):.2f} of its attention to its noun, "
                               f"more than in any other of the {L * H} heads")
    return _Feedback(False, _det_noun_miss(layer, head, pairs))


def _whole(*values) -> bool:
    """True when every value is a whole number (an int or a numpy integer, not a bool)."""
    return all(isinstance(x, int | _np.integer) and not isinstance(x, bool) for x in values)


def _det_noun_miss(layer: int, head: int, pairs) -> str:
    """What a wrong head does: how often "the" looks most at its noun, itself, [CLS] or [SEP]
    (counted apart from the neighbours), the next word, the word before, ... there (what the
    learner's own rows show); never a share, a rank or another head. The piece after "the" starts
    the next word, the one before it ends the word before: "word" is right for both."""
    kinds = []
    for text, i, j in pairs:
        run = _run_bert(text)
        k = int(run.attentions[layer, head, i].argmax())
        # [CLS]/[SEP] apart, before the neighbours: a sentence-initial "the" (position 1) has
        # [CLS] as the piece before, and looking there is not a previous-word pattern
        special = run.tokens[k] in ("[CLS]", "[SEP]")
        kinds.append("its noun" if k == j else "itself" if k == i else repr(run.tokens[k])
                     if special else "the next word" if k == i + 1 else "the word before"
                     if k == i - 1 else "another word")
    counts = sorted({kind: kinds.count(kind) for kind in kinds}.items(), key=lambda kv: -kv[1])
    looks = ", ".join(f"{kind} {'once' if n == 1 else f'{n} times'}" for kind, n in counts)
    return (f"not layer {layer}, head {head}: there, over the {len(pairs)} pairs, 'the' looks "
            f"most at: {looks}. Average each head's weight from 'the' to its noun over all "
            f"{len(pairs)} pairs and take the largest (layers and heads count from 0, the first "
            "layer is layer 0; the answer is (layer, head), in that order)")


@_explained_tries("section 6 (write each count in terms of h·d_k)")
def check_cost_guess(guess, h: int = 12) -> _Feedback:
    """Predict-then-check: parameters of h heads of full width d, divided by h heads of d / h.

    The attention layer holds 3·d·(h·d_k) + (h·d_k)·d weights (biases left out), so it depends on
    h·d_k only: with d_k = d the count is h times that with d_k = d / h. guess: a number, or a
    str that reads as one ("12", as check_causal_guess reads " Cat"); a whole one is echoed whole.
    """
    guess = _as_answer_number(_read_number(guess), "your guess", todo="replace None with a number")
    if isinstance(guess, _Feedback):
        return guess
    guess = int(guess) if guess.is_integer() else guess  # "not 4", not "not 4.0"
    if guess == h:
        return _Feedback(True, f"right: every count depends on h·d_k, which grows from d to "
                               f"{h}·d: {h} times the parameters and the multiply-adds")
    if guess == 1:
        return _Feedback(False, "that is the case d_k = d / h (the same as one big head); here "
                                "every head gets all d features")
    if guess > 1000:  # an absolute count of weights, not how many times
        return _Feedback(False, f"{guess} looks like a number of parameters: a ratio is wanted, "
                                "how many times more parameters the full-width heads hold")
    if abs(guess - 1 / h) < 0.01:
        return _Feedback(False, f"{guess:.3g} is the ratio upside down: the heads of width d / h "
                                "over the full-width ones; the question asks how many times MORE "
                                "the full-width heads hold")
    if guess == h * h:
        return _Feedback(False, "too many: each count is linear in h·d_k, not in its square")
    if guess < 0:
        return _Feedback(False, "a count of parameters cannot be negative, and neither can a ratio "
                                "of two counts")
    return _Feedback(False, f"not {guess}: write each count in terms of h·d_k, then work out "
                            "h·d_k for d_k = d and for d_k = d / h")


def _read_number(answer):
    """A str that reads as a number (" 12 ", "0.5") as that float; any other answer as it is."""
    try:
        return float(answer) if isinstance(answer, str) else answer
    except ValueError:
        return answer


#: The W_O design task's target: output column c carries concatenated column _W_O_ORDER[c], i.e.
#: [head 1 | head 0 backwards]. Not its own transpose, so a W_O read the wrong way round fails.
_W_O_ORDER = (2, 3, 1, 0)


@_explained_tries("section 4 (what concat @ W_O puts in one output column)")
def check_w_o_swap(W_O) -> _Feedback:
    """Design task: a (4, 4) W_O for the toy's two heads that outputs [head 1 | head 0 backwards].

    With the concatenation C = [head 0 | head 1] (6, 4), the output C W_O must hold head 1's two
    columns first, then head 0's second, then its first. Says which output columns are right and
    what a known slip does (W_O's two indices mixed up), never the edit."""
    if _is_complex(W_O):
        return _form_error("your W_O has complex numbers; W_O is a real matrix")
    if (order := _column_order(W_O)) is not None:  # learner 30: [2, 3, 1, 0] or "3,4,2,1"
        return _form_error(f"your W_O is {order}, a column order, not a matrix: W_O must be "
                           "(4, 4). Write the order as a matrix: which entry W_O[j, c] carries "
                           "concatenated column j into output column c, and what value should "
                           "it hold?")
    W = _as_answer_array(W_O, "W_O", (4, 4), why=" (it maps the concatenation (n, 4) to the "
                         "output (n, 4))")
    if isinstance(W, _Feedback):
        return W
    X = _toy.embeddings()
    W_Q, W_K, W_V, I = _toy.two_head_projections()
    concat, _ = _multi_head_attention(X, W_Q, W_K, W_V, I, 2)  # W_O = I: the concatenation
    target = _np.eye(4)[:, list(_W_O_ORDER)]  # column c holds a 1 in row _W_O_ORDER[c]
    want, got = concat @ target, concat @ W
    right = [c for c in range(4) if _np.allclose(got[:, c], want[:, c], atol=1e-9)]
    if len(right) == 4:
        return _Feedback(True, "correct: output columns 0-1 carry head 1, columns 2-3 head 0 "
                               "backwards; each column of your W_O holds one 1, which picks the "
                               "one concatenated column that lands there")
    if _np.allclose(got, concat, atol=1e-9):
        return _Feedback(False, "this W_O leaves the order as it was ([head 0 | head 1]): it acts "
                                "like the identity")
    if _np.allclose(got, concat @ target.T, atol=1e-9):
        return _Feedback(False, "each head lands in the right pair of output columns, but both "
                                "come out in the other order from the one asked (head 1 "
                                "backwards, head 0 forwards). Write output column 0 of concat @ "
                                "W_O as a sum: which index of W_O runs over the concatenated "
                                "columns, and which over the output columns?")
    slip = _swap_slip(W, got, want)
    if slip is not None:
        return _Feedback(False, slip)
    scale = _column_scales(got, want)
    if all(s is not None for s in scale):
        return _Feedback(False, "each output column holds the right concatenated column, but "
                                f"multiplied by {[round(s, 3) for s in scale]}: moving a column "
                                "must leave its values as they are")
    which = f"output columns {right} are right" if right else "no output column is right yet"
    return _Feedback(False, f"{which}; write out what concat @ W_O puts in one output column, "
                            "say column 0, as a sum over the entries of W_O")


def _column_order(W_O) -> str | None:
    """W_O given as a column order (4 whole numbers, in a list or a str), shown; else None."""
    if isinstance(W_O, str):
        numbers = _re.fullmatch(r"[\s\[(]*(\d+)[\s,]+(\d+)[\s,]+(\d+)[\s,]+(\d+)[\s\])]*", W_O)
        return repr(W_O) if numbers else None
    try:
        order = _np.asarray(W_O, dtype=float)
    except (TypeError, ValueError):
        return None
    whole = order.shape == (4,) and bool(_np.all(_np.isfinite(order) & (order == _np.round(order))))
    return str([int(x) for x in order]) if whole else None


def _swap_slip(W: _np.ndarray, got: _np.ndarray, want: _np.ndarray) -> str | None:
    """A named slip of the W_O design task: zero columns, or one head's two columns in the other
    order than the target's."""
    zero = [c for c in range(4) if _np.allclose(W[:, c], 0, atol=1e-12)]
    if zero:
        return (f"column(s) {zero} of your W_O are all 0, so output column(s) {zero} are 0 "
                "whatever the heads say")
    for head, block in ((1, [0, 1]), (0, [2, 3])):  # output columns 0-1 carry head 1, 2-3 head 0
        rest = [c for c in range(4) if c not in block]
        if (_np.allclose(got[:, rest], want[:, rest], atol=1e-9)
                 and _np.allclose(got[:, block], want[:, block[::-1]], atol=1e-9)):
            order = "forwards" if head == 1 else "backwards"
            return (f"output columns {rest} are right; columns {block} carry head {head}, but "
                    f"not in the order asked (head {head} {order}): which concatenated column "
                    f"must output column {block[0]} carry?")
    return None


def _column_scales(got: _np.ndarray, want: _np.ndarray) -> list[float | None]:
    """Per column c of (n, m) arrays: s when got[:, c] = s · want[:, c], else None."""
    scales = []
    for g, w in zip(got.T, want.T, strict=True):
        s = float(g @ w / (w @ w)) if w @ w > 0 else 0.0
        scales.append(s if _np.allclose(g, s * w, atol=1e-9) else None)
    return scales
