"""Checkers of notebook 06: right answers pass, typical mistakes get a message naming the mistake."""

import numpy as np

from bertlib.exercises.nb06 import (
    check_band_bytes,
    check_feature_map,
    check_lsh_hash,
    check_window_mask,
)


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
    assert check_band_bytes(4096 * 257 * 4).ok
    assert "full n×n" in check_band_bytes(4096 * 4096 * 4).message
    assert "w + 1 keys" in check_band_bytes(4096 * 256 * 4).message
    assert "float64" in check_band_bytes(4096 * 257 * 8).message
    assert "number of bytes" in check_band_bytes("lots").message


def reference_phi(X, omega):
    return np.exp(X @ omega.T - 0.5 * (X**2).sum(1, keepdims=True)) / np.sqrt(len(omega))


def test_feature_map_right_answer_passes():
    fb = check_feature_map(reference_phi)
    assert fb.ok and "estimates exp" in fb.message


def test_feature_map_mistakes_are_named():
    assert "√m" in check_feature_map(lambda X, w: reference_phi(X, w) * np.sqrt(len(w))).message
    no_norm = check_feature_map(lambda X, w: np.exp(X @ w.T) / np.sqrt(len(w)))
    assert "‖x‖²/2" in no_norm.message
    assert "positive" in check_feature_map(lambda X, w: np.cos(X @ w.T)).message
    assert "raised ZeroDivisionError" in check_feature_map(lambda X, w: 1 / 0).message
    assert "(n, m)" in check_feature_map(lambda X, w: reference_phi(X, w).T).message


def test_lsh_hash_right_and_wrong():
    rng = np.random.default_rng(0)
    X, R = rng.standard_normal((20, 6)), rng.standard_normal((6, 2))
    xR = X @ R
    assert check_lsh_hash(np.concatenate([xR, -xR], 1).argmax(1), X, 4, R).ok
    assert "append −xR" in check_lsh_hash(xR.argmax(1), X, 4, R).message
    assert "one bucket per row" in check_lsh_hash(np.zeros(3), X, 4, R).message
    assert not check_lsh_hash(np.concatenate([-xR, xR], 1).argmax(1), X, 4, R).ok
