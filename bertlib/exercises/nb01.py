"""Checkers for notebook 01's "Try it" exercises, on the toy sentence "The cat sat on the mat".

Each checker takes the learner's array and returns a :class:`~bertlib.exercises.Feedback` that
names the mistake it recognises: a wrong shape, a forgotten 1/√d_k, division by √d (the model
width) instead of √d_k, softmax over the wrong axis (columns summing to 1 instead of rows), keys
used where values belong, a mask applied after the softmax or the wrong way round.
"""

from __future__ import annotations

import math

import numpy as np

from bertlib import toy
from bertlib.attention import causal_mask, softmax
from bertlib.exercises import Feedback

__all__ = ["check_weights", "check_output", "check_causal_weights", "ATOL"]

#: Absolute tolerance for a match: loose enough for float32 (torch) answers, tight enough to
#: tell every mistake below apart (the closest two differ by more than 0.01).
ATOL = 1e-5

_N = len(toy.TOKENS)


def _toy_qkv() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X = toy.embeddings()
    W_Q, W_K, W_V = toy.projections()
    return X @ W_Q, X @ W_K, X @ W_V


def _weights(divisor: float, axis: int = -1, mask: np.ndarray | None = None) -> np.ndarray:
    """softmax(Q Kᵀ / divisor) over ``axis`` of the toy, optionally masked: (6, 6)."""
    Q, K, _ = _toy_qkv()
    return softmax(Q @ K.T / divisor, axis=axis, where=mask)


def _as_array(answer, what: str) -> np.ndarray | Feedback:
    """The answer as a float array, or a Feedback saying why it is not one."""
    if answer is None:
        return Feedback(False, f"expected {what}, got None (did you forget to assign it?)")
    if hasattr(answer, "detach"):  # a torch tensor
        answer = answer.detach().cpu().numpy()
    try:
        return np.asarray(answer, dtype=float)
    except (TypeError, ValueError):
        return Feedback(False, f"expected {what} as an array of numbers, got "
                               f"{type(answer).__name__}")


def _checked(answer, expected_shape: tuple[int, ...], what: str) -> np.ndarray | Feedback:
    """The answer as a finite float array of ``expected_shape``, or a Feedback saying why not."""
    a = _as_array(answer, what)
    if isinstance(a, Feedback):
        return a
    if a.shape != expected_shape:
        return Feedback(False, f"wrong shape: {what} should have shape {expected_shape}, "
                               f"yours has {a.shape}")
    if not np.isfinite(a).all():
        return Feedback(False, f"your {what} contains NaN or inf; check for a division by zero "
                               "or exp of a huge score")
    return a


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.allclose(a, b, rtol=0, atol=ATOL))


def _divisors() -> dict[str, float]:
    """Divisor name -> value for the toy (d_k = 2, d = 4): the right one and two mistakes."""
    Q, _, _ = _toy_qkv()
    return {"√d_k": math.sqrt(Q.shape[1]), "none": 1.0, "√d": math.sqrt(toy.embeddings().shape[1])}


_SCALE_MISTAKES = {
    "none": "you forgot the scaling: your weights equal softmax(Q Kᵀ) without dividing the "
            "scores by √d_k = √2",
    "√d": "you divided by √d = √4 = 2 (the model width) instead of √d_k = √2 (the width of a "
          "head)",
}
_AXIS_MISTAKE = ("softmax over the wrong axis: your columns sum to 1 instead of your rows; "
                 "each query's row must sum to 1 (use axis=-1)")


def _diagnose_scale_and_axis(a: np.ndarray, mask: np.ndarray | None) -> list[str] | None:
    """The list of mistakes (scale, axis) whose combination reproduces ``a``; [] = correct."""
    for scale_name, divisor in _divisors().items():
        for axis in (-1, 0):
            if _close(a, _weights(divisor, axis, mask)):
                mistakes = [_SCALE_MISTAKES[scale_name]] if scale_name in _SCALE_MISTAKES else []
                return mistakes + ([_AXIS_MISTAKE] if axis == 0 else [])
    return None


def _first_wrong_row(a: np.ndarray, expected: np.ndarray) -> str:
    i = int(np.argmax(np.abs(a - expected).max(axis=1)))
    return (f"row {i} (query {toy.TOKENS[i]!r}) should be {np.round(expected[i], 3).tolist()}, "
            f"yours is {np.round(a[i], 3).tolist()}")


def check_weights(weights) -> Feedback:
    """Exercise 1: the toy's bidirectional attention weights softmax(Q Kᵀ / √d_k), shape (6, 6).

    Row i = query i, column j = key j; every row sums to 1.
    """
    a = _checked(weights, (_N, _N), "the weight matrix (one row per query, one column per key)")
    if isinstance(a, Feedback):
        return a
    mistakes = _diagnose_scale_and_axis(a, None)
    if mistakes == []:
        return Feedback(True, "correct: each row is one query's softmax over the six keys")
    if mistakes:
        return Feedback(False, "; and ".join(mistakes))
    expected = _weights(_divisors()["√d_k"])
    if _close(a.T, expected):
        return Feedback(False, "rows and columns are swapped: row i must be query i "
                               "(transpose your matrix)")
    Q, K, _ = _toy_qkv()
    if _close(a, Q @ K.T / math.sqrt(Q.shape[1])):
        return Feedback(False, "these are the scaled scores; apply the softmax to each row")
    if not _close(a.sum(axis=1), np.ones(_N)):
        return Feedback(False, f"rows must sum to 1, yours sum to {np.round(a.sum(1), 3)}")
    return Feedback(False, "not the expected weights: " + _first_wrong_row(a, expected))


def check_output(output, query: str = "mat") -> Feedback:
    """Exercise 2: the attention output z_i = Σ_j w_ij v_j of one toy query, shape (d_v,) = (2,).

    w_i: row i of softmax(Q Kᵀ / √d_k) (6,); v_j: row j of V = X W_V (6, 2).
    """
    if query not in toy.TOKENS:
        return Feedback(False, f"query must be one of {toy.TOKENS}, got {query!r}")
    i = toy.TOKENS.index(query)
    Q, K, V = _toy_qkv()
    d_v = V.shape[1]
    what = f"the output for {query!r}"
    a = _as_array(output, what)
    if isinstance(a, Feedback):
        return a
    if a.shape == (_N,):
        return Feedback(False, f"wrong shape: you gave {_N} numbers, one per key; that looks "
                               f"like the weights of {query!r}. The output is weights @ V, "
                               f"shape ({d_v},)")
    if a.shape == (_N, d_v):
        return Feedback(False, f"wrong shape: that is the output of all {_N} queries, shape "
                               f"{(_N, d_v)}; take row {i} for {query!r}, shape ({d_v},)")
    a = _checked(a, (d_v,), what)
    if isinstance(a, Feedback):
        return a
    for scale_name, divisor in _divisors().items():
        for axis in (-1, 0):
            w = _weights(divisor, axis)[i]
            if _close(a, w @ V):
                mistakes = [_SCALE_MISTAKES[scale_name]] if scale_name in _SCALE_MISTAKES else []
                if axis == 0:
                    mistakes.append(_AXIS_MISTAKE)
                if not mistakes:
                    return Feedback(True, f"correct: the output of {query!r} is its weighted "
                                          "average of the value vectors")
                return Feedback(False, "; and ".join(mistakes))
            if _close(a, w @ K):
                return Feedback(False, "you averaged the keys (weights @ K); the output averages "
                                       "the values (weights @ V)")
    expected = _weights(_divisors()["√d_k"])[i] @ V
    return Feedback(False, f"not the expected output: it should be "
                           f"{np.round(expected, 3).tolist()}, yours is {np.round(a, 3).tolist()}")


def check_causal_weights(weights) -> Feedback:
    """Exercise 3: the toy's causal (GPT-style) weights, shape (6, 6).

    softmax over each row of Q Kᵀ / √d_k, with the scores of later keys (j > i) excluded before
    the softmax, so row i spreads over keys 0..i and sums to 1.
    """
    a = _checked(weights, (_N, _N), "the causal weight matrix")
    if isinstance(a, Feedback):
        return a
    mask = causal_mask(_N)
    mistakes = _diagnose_scale_and_axis(a, mask)
    if mistakes == []:
        return Feedback(True, "correct: every word sees itself and the words before it only")
    if mistakes:
        return Feedback(False, "; and ".join(mistakes))
    divisor = _divisors()["√d_k"]
    bidirectional = _weights(divisor)
    if _close(a, bidirectional):
        return Feedback(False, "no mask applied: these are the bidirectional weights; "
                               "'the' (row 0) still gives weight to words after it")
    if _close(a, _weights(divisor, mask=mask.T)):
        return Feedback(False, "the mask is the wrong way round: each word sees itself and the "
                               "words AFTER it; keep keys j <= i (lower triangle)")
    if _close(a, bidirectional * mask):
        return Feedback(False, "you zeroed the future after the softmax, so rows no longer sum "
                               "to 1; exclude the future scores (set them to -inf) BEFORE the "
                               "softmax")
    future = np.triu(np.abs(a), k=1) > ATOL
    if future.any():
        i, j = (int(x) for x in np.argwhere(future)[0])
        return Feedback(False, f"query {toy.TOKENS[i]!r} (position {i}) gives weight "
                               f"{a[i, j]:.3f} to {toy.TOKENS[j]!r} (position {j}), which comes "
                               "later: a causal row may not look ahead")
    return Feedback(False, "not the expected weights: "
                           + _first_wrong_row(a, _weights(divisor, mask=mask)))
