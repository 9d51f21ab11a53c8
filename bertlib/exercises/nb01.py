"""Checkers for notebook 01's "Try it" exercises, on the toy sentence "The cat sat on the mat".

Each returns a :class:`~bertlib.exercises.Feedback` naming the mistake it recognises (a forgotten
1/√d_k, a softmax over the wrong axis, values swapped for keys, a mask after the softmax, ...);
an unanswered stub (``None``) gets "not answered yet", never an exception.

- :func:`check_causal_guess`: under a causal mask, which word "cat" attends to most (predict).
- :func:`check_attention_fn`: a learner's attention written with loops, on random inputs.
- :func:`check_design`: edit W_Q (and W_K) so that "mat" attends most to "cat", "cat" to "sat".
- :func:`check_window_weights`: the toy's weights when each word sees only its neighbours.
"""

from __future__ import annotations as _annotations

import math as _math
from collections.abc import Callable as _Callable

import numpy as _np

from bertlib.exercises import Feedback as _Feedback
from bertlib.exercises import as_answer_array as _as_answer_array
from bertlib.exercises import as_answer_word as _as_answer_word
from bertlib.exercises import attempt_note as _attempt_note
from bertlib.exercises import call_answer as _call_answer
from bertlib.exercises import calls_library as _calls_library
from bertlib.exercises import described as _described
from bertlib.exercises import explained_tries as _explained_tries
from bertlib.exercises import fitted_divisor as _fitted_divisor
from bertlib.exercises import form_error as _form_error
from bertlib.exercises import is_complex as _is_complex
from bertlib.exercises import not_answered as _not_answered
from bertlib.exercises import ragged_message as _ragged_message
from bertlib.exercises import toy_design as _design
from bertlib.exercises.watched import call_watched as _watch_call
from bertlib.paper import toy as _toy
from bertlib.paper.attention import band as _band
from bertlib.paper.attention import causal_mask as _causal_mask
from bertlib.paper.attention import scaled_dot_product_attention as _scaled_dot_product_attention
from bertlib.paper.attention import softmax as _softmax

#: Public: the checkers and the tolerances the lesson prints. What computes an answer (the window's
#: mask, the toy's Q, K, V) is private, so Tab on ``nb01.`` does not offer it.
__all__ = ["check_causal_guess", "check_attention_fn", "check_design", "check_window_weights",
           "ATOL", "PENCIL_ATOL"]

#: Absolute tolerance for a match: loose enough for float32 (torch) answers (~1e-7 relative on
#: weights of order 1), tight enough to tell every mistake below apart (they differ by > 0.01).
ATOL = 1e-5

_N = len(_toy.TOKENS)


def _close(a: _np.ndarray, b: _np.ndarray, atol: float = ATOL) -> bool:
    return a.shape == b.shape and bool(_np.allclose(a, b, rtol=0, atol=atol))


@_explained_tries("section 11 and the scores of 'cat' in section 5")
def check_causal_guess(word) -> _Feedback:
    """Predict-then-check: under a causal mask, which word (a str) does "cat" attend to most? The
    answer is computed here: the argmax of row "cat" of the causal softmax(Q Kᵀ / √d_k)."""
    if isinstance(word, int | _np.integer) and not isinstance(word, bool) and 0 <= word <= _N:
        return _form_error(_position_not_word(int(word)))
    word = _as_answer_word(word, "your guess", sorted(set(_toy.TOKENS)),
                           todo="replace None with a word in quotes, e.g. 'the'")
    if isinstance(word, _Feedback):
        return word
    Q, K, _ = _design.toy_qkv()
    i = _toy.TOKENS.index("cat")
    w = _softmax(Q @ K.T / _math.sqrt(Q.shape[1]), axis=-1, where=_causal_mask(_N))[i]
    best = _toy.TOKENS[int(w.argmax())]
    seen = _toy.TOKENS[:i + 1]
    if word == best:
        return _Feedback(True, f"right: 'cat' sees only {seen}; its query {Q[i].tolist()} scores "
                               f"{(Q[i] @ K[:i + 1].T).tolist()} against their keys, so it keeps "
                               f"{w[i]:.3f} of its attention for itself")
    if word not in seen:
        return _Feedback(False, f"{word!r} comes after 'cat': a causal row cannot see the "
                                "words after its own")
    return _Feedback(False, f"{word!r} is visible, but compare the scores: the query of 'cat' "
                            f"{Q[i].tolist()} against the keys 'cat' can see")


def _position_not_word(i: int) -> str:
    """The causal guess given as a position i (0-based or 1-based): ask for the word."""
    read = [f"counted from {start}, {i} is {_toy.TOKENS[i - start]!r}" for start in (0, 1)
            if 0 <= i - start < _N]
    return (f"your guess is a number, {i}: answer with the word, not its position ("
            f"{'; '.join(read)}); write it in quotes, e.g. \"the\"")


def _a_not_softmax(A: _np.ndarray, Q: _np.ndarray, K: _np.ndarray) -> _Feedback:
    """What is wrong with an A (4, 5) that matches no known variant of softmax(Q Kᵀ / √d_k)."""
    S = Q @ K.T
    for axis, (what, why, loop) in enumerate((  # a key or a query that a loop stopped before
            ("key", "gets weight 0 from every query, yet e^s > 0 for every score s", "keys"),
            ("query", "has every weight 0, yet a row of weights sums to 1", "queries"))):
        if len(empty := _np.flatnonzero(~A.any(axis=axis))):
            j, last = int(empty[0]), A.shape[1 - axis] - 1
            return _Feedback(False, f"{'the last ' if j == last else ''}{what} ({what} {j}) "
                                    f"{why}: does your loop over the {loop} leave it out?")
    short = Q[:, :2] @ K[:, :2].T  # the sum over d_v = 2 products of q_i and k_j, not d_k = 3
    if any(_close(A, _softmax(short / c, axis=-1)) for c in (_math.sqrt(3), _math.sqrt(2))):
        return _Feedback(False, "each score q_i · k_j adds up only its first 2 products: your sum "
                                "runs over the width of a value vector (d_v = 2), but q_i and k_j "
                                "have d_k = 3 entries")
    if _close(A, S / S.sum(axis=1, keepdims=True)):
        return _Feedback(False, "your rows sum to 1, but A is the scores divided by their row sum: "
                                "softmax exponentiates first (e^s for each score s), then divides "
                                "by the row sum of those")
    if (c := _fitted_divisor(A, S, ATOL)) is not None:
        return _Feedback(False, _divisor_message(c))
    off = float(_np.abs(A - _softmax(S / _math.sqrt(3), axis=-1)).max())
    if off < 1e-2:
        return _Feedback(False, f"A is off by up to {off:.1e}, more than the {ATOL:g} "
                                "accepted: rounded values? Return A unrounded")
    if not _close(A.sum(axis=1), _np.ones(4)):
        return _Feedback(False, f"the rows of A must sum to 1 (within {ATOL:g}), yours sum "
                                f"to {_np.round(A.sum(axis=1), 6).tolist()}")
    if _close(A, _softmax(_softmax(S / _math.sqrt(3), axis=-1), axis=-1)):
        return _Feedback(False, "your scores and divisor are right, but A is the softmax of a "
                                "softmax: the softmax is applied once, to the scaled scores")
    return _Feedback(False, "A is not softmax(Q Kᵀ / √d_k), nor a slip this checker knows: check "
                            "the scores q_i · k_j, then each step after them")


def _divisor_message(c: float) -> str:
    """A fitted divisor c ≠ √3: e raised to other bases (c = √3 / ln b), √(a whole number) a
    wrong divisor, anything else a factor."""
    base = next((b for b in (2, 10) if abs(c * _math.log(b) - _math.sqrt(3)) < 1e-6), None)
    if base is not None:
        return (f"your divisor √d_k is right, but you raised {base} to the scores: softmax uses e "
                "(np.exp), not another base")
    if abs(c * c - round(c * c)) > 1e-6 or c < 1:  # the scores were multiplied somewhere
        return (f"your scores are {_math.sqrt(3) / c:.2f} × the right ones (q_i · k_j / √d_k): "
                "check what you multiplied and what you divided by")
    named = {4: "; 4 is the number of queries", 5: "; 5 is the number of keys",  # learner 31:
             2: "; 2 is d_v here, and both d_k and d_v in the toy of sections 4–6: a size typed "
                "in, or the values' width?"}  # √2 typed and √d_v cannot be told apart
    return (f"your scores q_i · k_j are right, but the divisor is not: you divided them by "
            f"{c:.3f} (= √{c * c:.2f}{named.get(round(c * c), '')}). The divisor is √d_k, and "
            "d_k is the length of a query or key vector, the length each dot product q_i · k_j "
            "runs over: not d_v, the values' width, nor the number of queries or of keys")


def check_attention_fn(fn: _Callable) -> _Feedback:
    """Check a learner's ``fn(Q, K, V) -> (Z, A)``: A = softmax(Q Kᵀ / √d_k) per row, Z = A V.

    Tried on random Q (4, 3), K (5, 3), V (5, 2), so Z is (4, 2) and A (4, 5) (all sizes differ:
    a swapped axis or keys for values shows). A function that hands the work to bertlib's own
    ``scaled_dot_product_attention`` is refused (:func:`~bertlib.exercises.calls_library`).
    """
    if _calls_library(fn, _scaled_dot_product_attention):
        return _Feedback(False, "your function calls bertlib's scaled_dot_product_attention, the "
                                "answer itself; write the attention yourself, with loops")
    rng = _np.random.default_rng(1)
    Q, K, V = rng.normal(size=(4, 3)), rng.normal(size=(5, 3)), rng.normal(size=(5, 2))
    result, error = _call_watched(fn, Q.copy(), K.copy(), V.copy())
    if error is not None:
        return error
    if _pair(result) is None:
        return _Feedback(False, f"your function returned {_described(result)}: return two things, "
                                "(Z, A), the outputs and the weights")
    result = _pair(result)
    ragged = [m for r, name in zip(result, "ZA", strict=True) if (m := _ragged_message(r, name))]
    if ragged:
        return _Feedback(False, ragged[-1])  # A's problem first: Z is built from A
    if [_np.shape(r) for r in result] == [(4, 5), (4, 2)]:
        return _Feedback(False, "you returned the weights first: the order is (Z, A), outputs "
                                "then weights")
    if _np.shape(result[1]) in ((4, 4), (3, 5)):  # one key or one query short
        loop = "keys" if _np.shape(result[1])[1] == 4 else "queries"
        return _Feedback(False, f"A has shape {_np.shape(result[1])}, but there are 4 queries and "
                                f"5 keys: does your loop over the {loop} stop before the last one?")
    A = _as_answer_array(result[1], "A", (4, 5), layout="(n_q, n_k)", why=", one row per query",
                         todo="your function returns None for A, the second of (Z, A): compute it")
    Z = _as_answer_array(result[0], "Z", todo="your function returns None for Z, the first of "
                                              "(Z, A): compute it")
    if isinstance(form := A if isinstance(A, _Feedback) else Z, _Feedback):
        return form
    S = Q @ K.T
    fits = [(div, axis) for div in (_math.sqrt(3), 1.0, 3.0) for axis in (-1, 0)
            if _close(A, _softmax(S / div, axis=axis))]
    if not fits:
        return _a_not_softmax(A, Q, K)
    div, axis = fits[0]
    mistakes = ["your scores q_i · k_j are right, but they are not scaled"] * (div == 1) + [
        "you divided by d_k; the divisor is its square root, √d_k"] * (div == 3) + [
        "your softmax runs down the columns: each query's ROW must sum to 1"] * (axis == 0)
    if mistakes:
        return _Feedback(False, "; and ".join(mistakes))
    if Z.shape == (4, 3) and _close(Z, A @ K):
        return _Feedback(False, "A is right, but Z averages the keys; it must average the values")
    if Z.shape != (4, 2):
        return _Feedback(False, f"A is right; Z should be (n_q, d_v) = (4, 2), yours is {Z.shape}")
    if _close(Z, A[:, :-1] @ V[:-1]):
        return _Feedback(False, "A is right, but Z leaves out the last key's value: does your sum "
                                "over the keys stop before the last one?")
    if not _close(Z, A @ V):
        return _Feedback(False, "A is right, but Z is not Σ_j A[i, j] · V[j] for every query i")
    return _other_shape(fn)


def _call_watched(fn: _Callable, *args) -> tuple:
    """call_answer(fn, *args), refused when fn reaches bertlib's scaled_dot_product_attention
    during the call (an import in its own body, which calls_library cannot see beforehand)."""
    result, error, called = _watch_call(fn, _scaled_dot_product_attention, *args)
    if called:
        return None, _Feedback(False, "your function calls bertlib's scaled_dot_product_attention "
                                      "(it imports it), the answer itself; write the attention "
                                      "yourself")
    return result, error


def _pair(result) -> tuple | None:
    """(Z, A) from what a learner's function returned: a tuple or a list of two things."""
    return tuple(result) if isinstance(result, tuple | list) and len(result) == 2 else None


def _other_shape(fn: _Callable) -> _Feedback:
    """The verdict once (4, 5, 3, 2) passed: is fn also right with 6 queries, 7 keys, d_k = 2,
    d_v = 4? A size typed in (range(4), math.sqrt(3)) shows here."""
    rng = _np.random.default_rng(2)
    Q, K, V = rng.normal(size=(6, 2)), rng.normal(size=(7, 2)), rng.normal(size=(7, 4))
    A = _softmax(Q @ K.T / _math.sqrt(2), axis=-1)
    result, error = _call_answer(fn, Q.copy(), K.copy(), V.copy())
    pair = _pair(result) if error is None else None
    got = [_as_answer_array(r, "r") for r in pair] if pair else []
    if pair and all(not isinstance(g, _Feedback) and _close(g, w)
                    for g, w in zip(got, (A @ V, A), strict=True)):
        return _Feedback(True, "correct on random inputs with 4 queries, 5 keys, d_k = 3, d_v = 2 "
                               "and with 6 queries, 7 keys, d_k = 2, d_v = 4")
    why = _attempt_note(error)
    return _Feedback(False, f"right with 4 queries, 5 keys, d_k = 3, d_v = 2, but wrong with 6 "
                            f"queries, 7 keys, d_k = 2, d_v = 4{why}: a size typed in (4, 5, 3 or "
                            "2, as in range(4) or math.sqrt(3))? Read n_q, n_k and d_k from the "
                            "shapes of Q and K")


def check_design(W_Q, W_K=None) -> _Feedback:
    """Design task: edit the toy's W_Q (4, 2), and W_K (4, 2) if needed, so that "mat" attends most
    to "cat" (strictly more than to any other key) while "cat" still attends most to "sat". W_Q
    None or W_K None = the toy's own (not both). Says how close an answer is, whether "cat" lost
    "sat" (with either half), and, over stuck tries, asks about the keys no W_Q can get past, then
    names them, then says why: ties with, or multiples of, the key of "cat" (a step per new try:
    the same W_Q, W_K checked again gets the same hint, saying that the answer is unchanged)."""
    if W_Q is None and W_K is None:
        return _not_answered()
    arrays = _design_matrices(W_Q, W_K)
    if isinstance(arrays, _Feedback):
        return arrays
    if all(_np.allclose(a, b) for a, b in zip(arrays, _toy.projections()[:2], strict=True)):
        return _Feedback(False, "nothing changed yet: these are the toy's own W_Q and W_K; edit "
                                "some of their entries, then check again")
    Q, K, _ = _design.toy_qkv(*arrays)
    i_mat, i_cat = _toy.TOKENS.index("mat"), _toy.TOKENS.index("cat")
    A = _softmax(Q @ K.T / _math.sqrt(Q.shape[1]), axis=-1)
    w = A[i_mat]
    rival = max((j for j in range(_N) if j != i_cat), key=lambda j: w[j])
    lost = _design.lost_verb(A, Q, K, *arrays, atol=ATOL)  # named on either half
    if w[i_cat] <= w[rival] + ATOL:
        also = f". Your edit also broke the other half: {lost}" if lost else ""
        keys = _design.key_hint(K, i_cat, i_mat, W_K is not None, answer=arrays)
        return _Feedback(False, f"not yet: 'mat' gives 'cat' {w[i_cat]:.3f} but "
                                f"{_toy.TOKENS[rival]!r} {w[rival]:.3f} (query of 'mat' "
                                f"{_np.round(Q[i_mat], 3).tolist()}){keys}{also}")
    if lost:
        return _Feedback(False, f"'mat' now gives 'cat' {w[i_cat]:.3f}, but {lost}")
    s_mat = (Q @ K.T)[i_mat]  # tied by score, not by rounded weight
    tied = [_toy.TOKENS[j] for j in range(_N)
            if j != i_cat and abs(s_mat[j] - s_mat[rival]) <= 1e-9]
    runner = (f"{tied[0]!r} ({w[rival]:.3f})" if len(tied) == 1 else
              f"a tie of {', '.join(map(repr, tied[:-1]))} and {tied[-1]!r} "
              f"(tied at {w[rival]:.3f} each)")
    return _Feedback(True, f"'mat' now gives 'cat' {w[i_cat]:.3f}, ahead of {runner}, and 'cat' "
                           f"still attends most to 'sat'; the query of 'mat' is "
                           f"{_np.round(Q[i_mat], 3).tolist()}")


def _design_matrices(W_Q, W_K):
    """The design's (W_Q, W_K), each (4, 2) float, the toy's own where None; or a Feedback."""
    toy_Q, toy_K, _ = _toy.projections()
    arrays = []
    for name, W in (("W_Q", toy_Q if W_Q is None else W_Q), ("W_K", toy_K if W_K is None else W_K)):
        if isinstance(W, (bool, _np.bool_, str)) or _np.isscalar(W):
            return _Feedback(False, f"{name} is a single {type(W).__name__} ({W!r}); it should be "
                                    "a (4, 2) matrix of numbers: copy the toy's and edit entries")
        if _is_complex(W):
            return _Feedback(False, f"{name} has complex numbers; the toy's matrices are real: "
                                    "give real numbers only")
        a = _as_answer_array(W, name, (4, 2), layout="(d, d_k)", why=" (it must stay that shape)")
        if isinstance(a, _Feedback):
            return a
        arrays.append(a)
    return arrays


def _window_mask(n: int) -> _np.ndarray:
    """(n, n) bool mask, True where |i − j| ≤ 1: each word sees itself and its neighbours."""
    return _band(_np.arange(n), _np.arange(n), 1)


#: Tolerance for the window weights (worked by pencil): 3 decimals are off by <= 0.0005, so 1e-3,
#: widened by what a pencil's e and √d_k move them (:func:`_pencil_weights`); slips differ > 0.01.
PENCIL_ATOL = 1e-3


def _pencil_weights(raw: _np.ndarray, root: float, mask: _np.ndarray) -> tuple[_np.ndarray, float]:
    """(softmax(raw / root) in the window, its tolerance: PENCIL_ATOL plus the most that a pencil's
    e ≈ 2.7 or 2.72 and root to 1 or 2 decimals move a weight, as an answer with them is right)."""
    w = {(e, r): _softmax(raw * _math.log(e) / r, axis=-1, where=mask)
         for e in (2.7, 2.72, _math.e) for r in (round(root, 1), round(root, 2), root)}
    return w[_math.e, root], PENCIL_ATOL + max(float(_np.abs(v - w[_math.e, root]).max())
                                               for v in w.values())


def _window_row_message(a: _np.ndarray, right: _np.ndarray, mask, tol: float) -> _Feedback:
    i = int(_np.argmax(_np.abs(a - right).max(axis=1) > tol))  # the first wrong row
    window = [j for j in range(_N) if mask[i, j]]
    given = [j for j in range(_N) if abs(a[i, j]) > PENCIL_ATOL]
    where = f"row {i} (query {_toy.TOKENS[i]!r})"
    if given != window:
        note = " (a word also sees itself)" * (i not in given)
        return _Feedback(False, f"{where} gives weight to positions {given}, but its window is "
                                f"positions {window}{note}")
    if abs(a[i].sum() - 1) > tol:
        hundred = "percentages? " * bool(abs(a[i].sum() - 100) < 1)
        return _Feedback(False, f"{where} puts weight on the right positions {window} but sums to "
                                f"{a[i].sum():.3f}: {hundred}a softmax row sums to 1")
    off = float(_np.abs(a[i] - right[i]).max())  # below 0.01 a rounding-size miss: never a try
    return _Feedback(False, f"{where} puts weight on the right positions {window}, but its values "
                     f"are off by up to {off:.4f} (accepted: {tol:.4f}): " + (
                         "a rounding-size miss: keep 3 decimals in every step (not counted as a "
                         "try)" if off < 0.01 else "recompute them from that row's scaled scores "
                         "Q Kᵀ / √d_k, then their softmax"), form=off < 0.01)


def _window_slip(a: _np.ndarray, Q: _np.ndarray, K: _np.ndarray, mask: _np.ndarray) -> str | None:
    """The message for the known wrong weights (a mask, a scaling, an axis) that ``a`` equals."""
    X, d_k = _toy.embeddings(), Q.shape[1]
    S, d = Q @ K.T / _math.sqrt(d_k), X.shape[1]
    also = f" (or by d_k = {d_k} itself, equal to √d here)" * _math.isclose(d_k, _math.sqrt(d))
    slips = ((_softmax(S, axis=-1) * mask, "you zeroed the far words after the softmax, so rows no "
              "longer sum to 1; set their scores to -inf BEFORE the softmax"),
             (_softmax(_np.where(mask, S, 0.0), axis=-1), "you set the far words' scores to 0, not "
              "to -inf: a score of 0 still gets weight e^0 = 1 before normalising, so those words "
              "keep some attention"),
             (_softmax(Q @ K.T, axis=-1, where=mask), "the window is right, but the scores are "
              "not scaled: which scores does section 6 put into the softmax?"),
             (_softmax(Q @ K.T / _math.sqrt(d), axis=-1, where=mask), "the window is right, but "
              f"you divided the scores by √d = √{d} (d = {d}, the width of X, a common "
              f"pitfall){also}; a head divides by √d_k, with d_k the width of its queries and "
              "keys"),
             *((_softmax(X @ X.T / c, axis=-1, where=mask), "the window is right, but these are "
                    "the scores X Xᵀ of section 3 (each word's vector against the others'): a head "
                    "scores queries against keys, Q Kᵀ") for c in (1.0, _math.sqrt(d_k))),
             (_softmax(S, axis=-1, where=mask).T, "that is the right matrix transposed: row i must "
              "be query i's weights over the keys (each row sums to 1), not column i"),
             (_softmax(S.T, axis=-1, where=mask), "the window is right, but your scores are "
              "transposed, K Qᵀ: row i, column j must be q_i · k_j (query i against key j), "
              "not k_i · q_j"),
             (_softmax(S, axis=0, where=mask), "the window is right, but your softmax runs down "
              "the columns: each query's ROW must sum to 1"),
             (_softmax(S, axis=-1), "no mask applied: these are the full bidirectional weights"),
             (_softmax(S, axis=-1, where=_causal_mask(_N)), "that is the causal mask; the window "
              "lets a word see one word on EACH side"))
    return next((message for wrong, message in slips if _close(a, wrong, PENCIL_ATOL)), None)


@_explained_tries("section 6 (the scaled scores and their softmax) and section 11 (a mask sets "
                  "scores to -inf before the softmax, and e^-inf = 0)")
def check_window_weights(weights) -> _Feedback:
    """Exercise: the toy's (6, 6) weights when word i sees only words i−1, i, i+1: softmax over
    each row of Q Kᵀ / √d_k, the scores outside the window set to −∞ first. Answers within
    ``PENCIL_ATOL`` (3 decimals), widened by a pencil's e ≈ 2.7 and √2 ≈ 1.4, count as right."""
    if weights is not None and (ragged := _ragged_message(weights, "your weight matrix")):
        return _form_error(ragged)
    if _is_complex(weights):
        return _form_error("your weight matrix has complex numbers; attention weights are "
                           "real numbers between 0 and 1")
    given = weights.detach().numpy() if hasattr(weights, "detach") else _np.asarray(weights)
    if given.dtype.kind == "f" and given.shape == (_N, _N) and _np.isneginf(given).any():
        return _Feedback(False, "these look like the windowed scores (-inf outside the window), "
                                "not the weights: apply the softmax to each row")
    a = _as_answer_array(weights, "your weight matrix", (_N, _N), why=", one row per query")
    if isinstance(a, _Feedback):
        return a
    if not a.any():  # the np.zeros placeholder: a form, never a try
        return _form_error("every row of your weights sums to 0 (all zeros: still the "
                           "placeholder?): each row is one query's softmax weights, summing to 1")
    if (a < -PENCIL_ATOL).any():
        i, j = (int(x) for x in _np.argwhere(a < -PENCIL_ATOL)[0])
        return _form_error(f"row {i} gives position {j} the weight {a[i, j]:.3f}: softmax weights "
                           "are never negative (each is e^s / Σ e^s, between 0 and 1)")
    Q, K, _ = _design.toy_qkv()
    S, mask = Q @ K.T / _math.sqrt(Q.shape[1]), _window_mask(_N)
    right, tol = _pencil_weights(Q @ K.T, _math.sqrt(Q.shape[1]), mask)
    if _close(a, right, tol):
        return _Feedback(True, f"correct (each weight within {tol:.4f}): every word spreads its "
                               "attention over itself and its neighbours only (two in the middle, "
                               "one at either end)")
    if _close(a / 100, right, tol):  # the right weights, written as percentages
        return _form_error("your rows sum to 100: percentages? A softmax weight is a fraction, "
                           "so each row sums to 1")
    if (slip := _window_slip(a, Q, K, mask)) is not None:
        return _Feedback(False, slip)
    raw = [_np.where(mask, S, 0.0), _np.where(mask, Q @ K.T, 0.0), S, Q @ K.T]
    if not _close(a.sum(axis=1), _np.ones(_N), PENCIL_ATOL) and any(
            _close(a, r, PENCIL_ATOL) for r in raw):
        return _Feedback(False, "these are scores, not weights: the rows don't sum to 1. Did you "
                                "apply the softmax?")
    outside = _np.abs(a) * ~mask > PENCIL_ATOL
    if outside.any():
        i, j = (int(x) for x in _np.argwhere(outside)[0])
        return _Feedback(False, f"query {_toy.TOKENS[i]!r} (position {i}) gives {a[i, j]:.3f} to "
                                f"position {j}, more than one word away")
    return _window_row_message(a, right, mask, tol)
