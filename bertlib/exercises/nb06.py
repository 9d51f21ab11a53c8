"""Checkers for notebook 06 (efficient attention). Each returns a Feedback saying what is wrong.

- :func:`check_window_mask`: build Longformer's (n, n) sliding-window mask by hand.
- :func:`check_band_bytes`: predict the bytes of the band of scores, then check.
- :func:`check_window_design` (design): the smallest window whose output stays within a target
  error of full attention on a real head.
"""

from __future__ import annotations

import numpy as np

from bertlib.exercises import (
    Feedback,
    as_answer_array,
    as_answer_number,
    as_answer_whole,
    how_far,
)
from bertlib.paper.approximations import relative_error
from bertlib.paper.attention import band, scaled_dot_product_attention
from bertlib.paper.variants import sliding_window_attention, sliding_window_pattern

__all__ = ["check_window_mask", "check_band_bytes", "check_window_design"]


def check_window_mask(mask, n: int = 10, w: int = 4) -> Feedback:
    """Exercise: build Longformer's (n, n) sliding-window mask, True where |i − j| ≤ w/2."""
    mask = as_answer_array(mask, "the mask", (n, n), layout="(n, n)", dtype=None,
                           todo=f"replace None with your ({n}, {n}) bool mask")
    if isinstance(mask, Feedback):
        return mask
    if mask.dtype != bool:
        return Feedback(False, f"use a boolean mask (True = may attend), got dtype {mask.dtype}: "
                               "the mask answers a yes-or-no question for each pair (i, j)")
    expected = sliding_window_pattern(n, w)
    if np.array_equal(mask, expected):
        return Feedback(True, f"each token sees itself and {w // 2} neighbours on each side: "
                              f"{int(expected[n // 2].sum())} keys in a middle row")
    if not mask.diagonal().all():
        return Feedback(False, "a token must be allowed to attend to itself (the diagonal)")
    if not np.array_equal(mask, mask.T):
        return Feedback(False, "the window is symmetric: if i may see j, j may see i")
    row = int(mask[n // 2].sum())
    if np.array_equal(mask, band(np.arange(n), np.arange(n), w)):
        return Feedback(False, f"your band reaches w = {w} on each side; Longformer's window w "
                               f"is split, w/2 = {w // 2} on each side")
    return Feedback(False, f"a middle row keeps {row} keys; it should keep w + 1 = {w + 1} "
                           f"(itself and {w // 2} on each side)")


def check_band_bytes(n_bytes, n: int = 8192, w: int = 128, dtype_bytes: int = 4) -> Feedback:
    """Exercise: bytes of the (n, w + 1) band of scores, vs the n² of full attention. The feedback
    names the usual slips and otherwise says only too high or too low, and by roughly how much."""
    value = as_answer_number(n_bytes, "the number of bytes", 0,
                             todo="replace None with your number of bytes")
    if isinstance(value, Feedback):
        return value
    expected = n * (w + 1) * dtype_bytes
    if value == expected:
        full = n * n * dtype_bytes
        return Feedback(True, f"{expected:,} bytes, {full / expected:.1f}× less than the "
                              f"{full:,} of the full n×n scores")
    edges = sum(min(i + w // 2, n - 1) - max(i - w // 2, 0) + 1 for i in range(n)) * dtype_bytes
    hints = {
        n * n * dtype_bytes: "that is the full n×n matrix; the band keeps only w + 1 keys a row",
        n * w * dtype_bytes: "close: a row holds w + 1 keys (w/2 each side and the token itself)",
        n * (w + 1): f"count bytes, not numbers: each float32 takes {dtype_bytes} bytes",
        n * (w + 1) * 8: f"these scores are float32 ({dtype_bytes} bytes each), not float64",
        edges: "you counted the shorter rows near the two ends exactly; a band stored as one "
               "array keeps the same number of slots in every row (the edge rows padded)",
    }
    if value in hints:
        return Feedback(False, hints[value])
    for unit, size in (("MiB", 2**20), ("MB", 10**6), ("KiB", 2**10), ("kB", 10**3)):
        if abs(value * size - expected) <= 0.01 * expected:
            return Feedback(False, f"that looks like the size in {unit}; give it in bytes")
    shown = f"{value:,.0f}" if value.is_integer() and value < 1e15 else f"{value:.6g}"
    return Feedback(False, f"{shown} bytes is {how_far(value, expected)}: how many scores "
                           "does one row keep, how many rows are there, and how many bytes is one "
                           "float32?")


def check_window_design(w, Q, K, V, global_idx=(), target: float = 0.22) -> Feedback:
    """Design task: the smallest even window w whose sliding-window attention (with these global
    tokens) has a relative output error ≤ ``target`` against full attention on one head.

    Q, K: (n, d_k); V: (n, d_v), e.g. one head of the real BERT. The feedback gives the error of
    the chosen w and whether w − 2 would already do.
    """
    w = as_answer_whole(w, "w (an even whole number)", low=2, high=2 * len(Q),
                        todo="replace None with your window w (an even number)")
    if isinstance(w, Feedback):
        return w
    if w % 2:
        return Feedback(False, f"w must be an even whole number in 2..{2 * len(Q)}, got {w}")
    full = scaled_dot_product_attention(Q, K, V)[0]

    def error(width):
        return relative_error(sliding_window_attention(Q, K, V, width, global_idx), full)

    got = error(w)
    if got > target:
        return Feedback(False, f"w = {w}: error {got:.4f} > target {target:g}; widen the window")
    if w > 2 and error(w - 2) <= target:
        return Feedback(False, f"w = {w}: error {got:.4f} meets the target {target:g}, but "
                               f"w = {w - 2} does too: find the smallest")
    return Feedback(True, f"w = {w}: error {got:.4f} ≤ {target:g}, and w = {w - 2} would not "
                          f"do: {w + 1} keys a row of the {Q.shape[0]}")
