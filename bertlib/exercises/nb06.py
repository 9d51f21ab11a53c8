"""Checkers for notebook 06 (efficient attention). Each returns a Feedback saying what is wrong."""

from __future__ import annotations

import numpy as np

from bertlib.exercises import Feedback
from bertlib.variants import performer_features, sliding_window_pattern

__all__ = ["check_window_mask", "check_band_bytes", "check_feature_map", "check_lsh_hash"]


def _array(x, name: str):
    try:
        return np.asarray(x), None
    except Exception as exc:  # a learner's object that numpy cannot read
        return None, Feedback(False, f"{name} could not be read as an array: {exc}")


def check_window_mask(mask, n: int = 10, w: int = 4) -> Feedback:
    """Exercise: build Longformer's (n, n) sliding-window mask, True where |i − j| ≤ w/2."""
    mask, bad = _array(mask, "your mask")
    if bad:
        return bad
    if mask.shape != (n, n):
        return Feedback(False, f"the mask should be (n, n) = ({n}, {n}), got shape {mask.shape}")
    if mask.dtype != bool:
        return Feedback(False, f"use a boolean mask (True = may attend), got dtype {mask.dtype}; "
                               "a comparison such as np.abs(i - j) <= w // 2 gives one")
    expected = sliding_window_pattern(n, w)
    if np.array_equal(mask, expected):
        return Feedback(True, f"each token sees itself and {w // 2} neighbours on each side: "
                              f"{int(expected[n // 2].sum())} keys in a middle row")
    if not mask.diagonal().all():
        return Feedback(False, "a token must be allowed to attend to itself (the diagonal)")
    if not np.array_equal(mask, mask.T):
        return Feedback(False, "the window is symmetric: if i may see j, j may see i")
    row = int(mask[n // 2].sum())
    if np.array_equal(mask, np.abs(np.subtract.outer(np.arange(n), np.arange(n))) <= w):
        return Feedback(False, f"your band reaches w = {w} on each side; Longformer's window w "
                               f"is split, w/2 = {w // 2} on each side")
    return Feedback(False, f"a middle row keeps {row} keys; it should keep w + 1 = {w + 1} "
                           f"(itself and {w // 2} on each side)")


def check_band_bytes(n_bytes, n: int = 4096, w: int = 256, dtype_bytes: int = 4) -> Feedback:
    """Exercise: bytes of the (n, w + 1) band of scores, vs the n² of full attention."""
    try:
        value = float(n_bytes)
    except (TypeError, ValueError):
        return Feedback(False, f"give a number of bytes, got {n_bytes!r}")
    expected = n * (w + 1) * dtype_bytes
    if value == expected:
        full = n * n * dtype_bytes
        return Feedback(True, f"{expected:,} bytes, {full / expected:.1f}× less than the "
                              f"{full:,} of the full n×n scores")
    hints = {
        n * n * dtype_bytes: "that is the full n×n matrix; the band keeps only w + 1 keys a row",
        n * w * dtype_bytes: "close: a row holds w + 1 keys (w/2 each side and the token itself)",
        n * (w + 1): f"count bytes, not numbers: each float32 takes {dtype_bytes} bytes",
        n * (w + 1) * 8: f"these scores are float32 ({dtype_bytes} bytes each), not float64",
    }
    return Feedback(False, hints.get(value, f"{value:,.0f} is not it: n rows × (w + 1) keys × "
                                            f"{dtype_bytes} bytes"))


def check_feature_map(phi, d: int = 4, m: int = 4096, seed: int = 0) -> Feedback:
    """Exercise: write φ(X, ω) for FAVOR+ so that φ(q)·φ(k) estimates exp(q·k).

    phi(X (n, d), omega (m, d)) -> (n, m). The reference: exp(ωᵀx − ‖x‖²/2) / √m.
    """
    rng = np.random.default_rng(seed)
    X = rng.normal(scale=0.3, size=(5, d))
    omega = rng.standard_normal((m, d))
    expected = performer_features(X, omega)
    try:
        got = np.asarray(phi(X, omega), dtype=float)
    except Exception as exc:  # the learner's function failed
        return Feedback(False, f"phi(X, omega) raised {type(exc).__name__}: {exc}")
    if got.shape != expected.shape:
        return Feedback(False, f"phi should return (n, m) = {expected.shape}, got {got.shape}")
    if np.allclose(got, expected):
        approx = got @ got.T
        exact = np.exp(X @ X.T)
        gap = np.abs(approx - exact).max() / exact.max()
        return Feedback(True, f"φ(X)φ(X)ᵀ estimates exp(X Xᵀ) to {gap:.1%} with m = {m}")
    if np.any(got < 0):
        return Feedback(False, "FAVOR+ features must be positive (use exp, not sin/cos): "
                               "negative features make the softmax estimate unstable")
    if np.allclose(got, expected * np.sqrt(m)):
        return Feedback(False, "divide by √m, so the m features average rather than add up")
    if np.allclose(got, np.exp(X @ omega.T) / np.sqrt(m)):
        return Feedback(False, "missing the exp(−‖x‖²/2) factor: without it φ(q)·φ(k) "
                               "estimates exp(q·k + ‖q‖²/2 + ‖k‖²/2)")
    return Feedback(False, "not φ(x) = exp(ωᵀx − ‖x‖²/2)/√m; check each factor")


def check_lsh_hash(buckets, X, n_buckets: int, R) -> Feedback:
    """Exercise: angular LSH h(x) = argmax([xR; −xR]) for X (n, d), R (d, n_buckets/2)."""
    X = np.asarray(X, dtype=float)
    R = np.asarray(R, dtype=float)
    got, bad = _array(buckets, "your buckets")
    if bad:
        return bad
    if got.shape != (X.shape[0],):
        return Feedback(False, f"one bucket per row of X: expected shape ({X.shape[0]},), "
                               f"got {got.shape}")
    xR = X @ R
    expected = np.concatenate([xR, -xR], axis=1).argmax(axis=1)
    if np.array_equal(got, expected):
        spread = np.bincount(expected, minlength=n_buckets)
        return Feedback(True, f"bucket sizes {spread.tolist()}: similar directions share one")
    if np.array_equal(got, xR.argmax(axis=1)):
        return Feedback(False, "you used argmax(xR) only: append −xR too, so the n_buckets/2 "
                               "directions give n_buckets buckets")
    if got.size and (got.min() < 0 or got.max() >= n_buckets):
        return Feedback(False, f"bucket ids must be in 0..{n_buckets - 1}")
    agree = float(np.mean(got == expected))
    return Feedback(False, f"{agree:.0%} of the buckets match argmax([xR; −xR]); check the order "
                           "of the halves (xR first, then −xR)")

