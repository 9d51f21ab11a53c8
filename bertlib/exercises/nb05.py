"""Checkers for notebook 05's "Try it" exercises: predicting what attention costs.

- :func:`check_memory_prediction`: the peak memory of ``bertlib.cost.naive_attention`` at
  n = 8192 (one head, float32), predicted before measuring. The notebook shows that the peak is
  two n × n matrices (the scores and the weights) alive together.
- :func:`check_crossover_prediction`: the sequence length past which BERT-base's attention
  matrices (12 heads) take more memory than its feed-forward activation (n × 3072).

Each names the mistake it recognises: linear instead of quadratic growth, one matrix instead of
two, float64 instead of float32, numbers instead of bytes, MiB instead of bytes, heads forgotten.
"""

from __future__ import annotations

import math

from bertlib.cost import attention_bytes
from bertlib.exercises import Feedback

__all__ = ["check_memory_prediction", "check_crossover_prediction", "RTOL"]

#: How close a prediction must be to count as right (relative).
RTOL = 0.05


def _as_number(answer, what: str) -> float | Feedback:
    if answer is None:
        return Feedback(False, f"replace None with your prediction of {what}")
    if isinstance(answer, bool) or not isinstance(answer, int | float) or math.isnan(answer):
        return Feedback(False, f"give {what} as a number, got {answer!r}")
    if answer <= 0 or math.isinf(answer):
        return Feedback(False, f"{what} must be a positive, finite number, got {answer!r}")
    return float(answer)


def _near(a: float, b: float) -> bool:
    return abs(a - b) <= RTOL * b


def check_memory_prediction(predicted_bytes, n: int = 8192) -> Feedback:
    """Is ``predicted_bytes`` the peak memory of naive attention at ``n`` (one head, float32)?

    The answer is 2 · n² · 4 bytes: the scores Q Kᵀ·s and the weights softmax(·), each n × n
    float32, alive together (512 MiB at n = 8192). Within :data:`RTOL` counts as right.
    """
    value = _as_number(predicted_bytes, "the peak memory in bytes")
    if isinstance(value, Feedback):
        return value
    one = attention_bytes(n)  # n² · 4
    answer = 2 * one
    if _near(value, answer):
        return Feedback(True, f"right: two {n} × {n} float32 matrices, 2 · {n}² · 4 = "
                              f"{answer:,} bytes ({answer / 2**20:,.0f} MiB)")
    if _near(value, one):
        return Feedback(False, f"{value:,.0f} bytes is ONE {n} × {n} float32 matrix (or twice "
                               f"the n = {n // 2} peak, as if memory grew linearly). Naive "
                               "attention holds two at its peak (scores and weights), and "
                               "doubling n multiplies each by four")
    if _near(value, 2 * answer):
        return Feedback(False, "that is twice the answer: 8 bytes per number is float64; torch "
                               "computes in float32 here, 4 bytes per number")
    if _near(value, answer / 4) or _near(value, one / 4):
        return Feedback(False, "you counted numbers, not bytes: each float32 number takes 4 bytes")
    if _near(value, answer / 2**20):
        return Feedback(False, f"that looks like MiB; give bytes ({value:,.0f} MiB = "
                               f"{value * 2**20:,.0f} bytes)")
    factor = value / answer
    return Feedback(False, f"off by a factor of {factor:.3g}: count the n × n matrices alive at "
                           f"once and the bytes of each (n² numbers of 4 bytes)")


def check_crossover_prediction(predicted_n, h: int = 12, d_ff: int = 3072) -> Feedback:
    """Is ``predicted_n`` the n past which h · n² (the attention matrices) exceeds n · d_ff (the
    feed-forward activation)? Equal at n = d_ff / h: 256 for BERT-base (h = 12, d_ff = 3072)."""
    value = _as_number(predicted_n, "the sequence length n")
    if isinstance(value, Feedback):
        return value
    answer = d_ff // h
    if _near(value, answer):
        return Feedback(True, f"right: h · n² = n · d_ff at n = d_ff / h = {d_ff} / {h} = "
                              f"{answer}; beyond it the attention matrices are the bigger")
    if _near(value, d_ff):
        return Feedback(False, f"that ignores the heads: each of the {h} heads has its own "
                               "n × n matrix, so compare h · n² with n · d_ff")
    if _near(value, math.sqrt(d_ff)) or _near(value, math.sqrt(d_ff / h)):
        return Feedback(False, "the FFN activation is n · d_ff (linear in n), not d_ff alone: "
                               "solve h · n² = n · d_ff")
    side = "large" if value > answer else "small"
    return Feedback(False, f"{value:g} is too {side}: at n = {value:g} the attention matrices "
                           f"take {value * h / d_ff:.2f}× the feed-forward activation's memory; "
                           "solve h · n² = n · d_ff for n")
