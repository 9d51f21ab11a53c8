"""Checkers of notebook 06: right answers pass, typical mistakes get a message naming the mistake."""

import numpy as np

from bertlib.exercises.nb06 import check_band_bytes, check_window_design, check_window_mask
from bertlib.paper.approximations import relative_error
from bertlib.paper.attention import scaled_dot_product_attention
from bertlib.paper.variants import sliding_window_attention


def offsets(n):
    i = np.arange(n)
    return np.abs(i[:, None] - i[None, :])


def test_window_mask_right_answer_passes():
    fb = check_window_mask(offsets(10) <= 2, n=10, w=4)
    assert fb.ok and "5 keys" in fb.message


def test_window_mask_mistakes_are_named():
    assert "w/2 = 2 on each side" in check_window_mask(offsets(10) <= 4, 10, 4).message
    assert "boolean" in check_window_mask((offsets(10) <= 2).astype(int), 10, 4).message
    assert "(10, 10)" in check_window_mask(np.ones((9, 9), bool), 10, 4).message
    assert "itself" in check_window_mask((offsets(10) <= 2) & (offsets(10) > 0), 10, 4).message
    assert not check_window_mask(offsets(10) <= 1, 10, 4).ok


def test_band_bytes_right_and_wrong():
    assert check_band_bytes(8192 * 129 * 4).ok
    assert "full n×n" in check_band_bytes(8192 * 8192 * 4).message
    assert "w + 1 keys" in check_band_bytes(8192 * 128 * 4).message
    assert "float64" in check_band_bytes(8192 * 129 * 8).message
    assert "number of bytes" in check_band_bytes("lots").message
    assert "too low" in check_band_bytes(1000).message
    assert "×" not in check_band_bytes(6291456).message  # no formula in the message


def test_unanswered_stubs_say_so_without_raising():
    assert "not answered yet" in check_window_mask(None).message
    assert "not answered yet" in check_band_bytes(None).message
    assert "not answered yet" in check_window_design(None, *qkv()).message


def qkv(n=24, d=8, seed=0):
    rng = np.random.default_rng(seed)
    Q = rng.standard_normal((n, d))
    return Q, Q + 0.3 * rng.standard_normal((n, d)), rng.standard_normal((n, d))


def smallest_window(Q, K, V, target):
    full = scaled_dot_product_attention(Q, K, V)[0]
    return next(w for w in range(2, 2 * len(Q), 2)
                if relative_error(sliding_window_attention(Q, K, V, w), full) <= target)


def test_window_design_right_answer_and_named_mistakes():
    Q, K, V = qkv()
    best = smallest_window(Q, K, V, 0.22)  # the checker's default target
    assert check_window_design(best, Q, K, V).ok
    assert check_window_design(float(best), Q, K, V).ok
    assert "find the smallest" in check_window_design(best + 2, Q, K, V).message
    if best > 2:
        assert "widen the window" in check_window_design(best - 2, Q, K, V).message
    assert "even whole number" in check_window_design(5, Q, K, V).message
    assert "even whole number" in check_window_design(True, Q, K, V).message
    assert "in 2..48" in check_window_design(10**9, Q, K, V).message
