"""bertlib.exercises.nb05: each checker accepts the right answer and names each typical mistake."""

import pytest
import torch

from bertlib.cost import measure
from bertlib.exercises import Feedback
from bertlib.exercises.nb05 import (
    check_block_for_budget,
    check_memory_prediction,
    check_qkv_crossover,
)
from bertlib.kernels import naive_attention

N, H = 2048, 12
ANSWER = 2 * H * N * N * 4  # computed by hand: scores + weights of 12 heads, float32


def test_memory_answer_matches_a_measurement_on_meta_tensors():
    # "meta" tensors have shapes and no data: the count needs no real memory
    def setup(n):
        return tuple(torch.empty(1, H, n, 64, device="meta") for _ in range(3))

    (m,) = measure(naive_attention, [N], setup=setup, repeats=1, warmup=0, progress=False)
    assert m.peak_bytes == ANSWER
    assert check_memory_prediction(m.peak_bytes).ok


def test_memory_right_answer_and_tolerance():
    fb = check_memory_prediction(ANSWER)
    assert isinstance(fb, Feedback) and fb.ok and "384 MiB" in fb.message
    assert check_memory_prediction(ANSWER * 1.04).ok
    assert not check_memory_prediction(ANSWER * 1.2).ok


@pytest.mark.parametrize("attempt, words", [
    (H * N * N * 4, "ONE 2048 × 2048 matrix per head"),
    (2 * N * N * 4, "that is one head"),
    (N * N * 4, "one matrix of one head"),
    (2 * H * N * N * 8, "float64"),
    (2 * H * N * N, "numbers, not bytes"),
    (384, "MiB"),
    (ANSWER * 3, "factor of 3"),
])
def test_memory_mistakes_are_named(attempt, words):
    fb = check_memory_prediction(attempt)
    assert not fb.ok and words in fb.message


@pytest.mark.parametrize("attempt, words", [
    (None, "replace None"), ("512 MiB", "as a number"), (True, "as a number"),
    (float("nan"), "as a number"), (-1, "positive"), (float("inf"), "positive"),
])
def test_memory_bad_input_is_feedback_not_an_error(attempt, words):
    fb = check_memory_prediction(attempt)
    assert not fb.ok and words in fb.message


def test_qkv_crossover_right_answer_for_base_and_other_shapes():
    assert 12 * 193**2 > 3 * 193 * 768 and not 12 * 192**2 > 3 * 192 * 768  # by hand
    fb = check_qkv_crossover(193)
    assert fb.ok and "193" in fb.message
    assert check_qkv_crossover(97, h=8, d=256).ok  # 3 · 256 / 8 = 96


@pytest.mark.parametrize("attempt, words", [
    (192, "exactly equal"),
    (2304, "ignores the heads"),
    (65, "only one of Q, K and V"),
    (1000, "too large"),
    (100, "too small"),
    (None, "replace None"),
    ("193", "as a number"),
])
def test_qkv_crossover_mistakes_are_named(attempt, words):
    fb = check_qkv_crossover(attempt)
    assert not fb.ok and words in fb.message


def test_block_budget_right_answer_is_512_for_32_mib():
    fb = check_block_for_budget(512)
    assert fb.ok and "MiB" in fb.message


@pytest.mark.parametrize("attempt, words", [
    (1024, "over the"),
    (256, "twice as large fits too"),
    (300, "power of two"),
    (None, "replace None"),
    (0, "whole number"),
    (2.0, "whole number"),
])
def test_block_budget_mistakes_are_named(attempt, words):
    fb = check_block_for_budget(attempt)
    assert not fb.ok and words in fb.message
