"""bertlib.exercises.nb05: each checker accepts the right answer and names each typical mistake."""

import numpy as np
import pytest
import torch

from bertlib.exercises import Feedback
from bertlib.exercises.nb05 import (
    check_block_for_budget,
    check_memory_prediction,
    check_qkv_crossover,
)
from bertlib.lab.cost import measure
from bertlib.paper.kernels import naive_attention

N, H = 3072, 12
ANSWER = 2 * H * N * N * 4  # computed by hand: scores + weights of 12 heads, float32
D_K = 64


def test_memory_answer_matches_a_measurement_on_meta_tensors():
    # "meta" tensors have shapes and no data: the count needs no real memory
    def setup(n):
        return tuple(torch.empty(1, H, n, 64, device="meta") for _ in range(3))

    (m,) = measure(naive_attention, [N], setup=setup, repeats=1, warmup=0, progress=False)
    assert m.peak_bytes == ANSWER
    assert check_memory_prediction(m.peak_bytes).ok


def test_memory_right_answer_and_tolerance():
    fb = check_memory_prediction(ANSWER)
    assert isinstance(fb, Feedback) and fb.ok and "864 MiB" in fb.message
    assert check_memory_prediction(int(ANSWER * 1.04)).ok
    assert not check_memory_prediction(ANSWER * 1.2).ok


@pytest.mark.parametrize("factor", [0.92, 0.95, 1.05, 1.08])
def test_memory_tolerance_is_symmetric(factor):
    fb = check_memory_prediction(ANSWER * factor)
    assert fb.ok and f"{abs(factor - 1):.0%} too {'high' if factor > 1 else 'low'}" in fb.message


@pytest.mark.parametrize("factor", [0.85, 1.15])
def test_memory_outside_the_band_says_which_way_and_how_far(factor):
    fb = check_memory_prediction(ANSWER * factor)
    assert not fb.ok and f"15% too {'high' if factor > 1 else 'low'}" in fb.message


def test_memory_honest_whole_peak_counts_pass():
    """Adding the output, or Q, K, V, or all four (n × d_k float32 per head each) still passes."""
    per_head = N * D_K * 4 * H
    for extra in (1, 3, 4):
        assert check_memory_prediction(ANSWER + extra * per_head).ok, extra


@pytest.mark.parametrize("attempt, words", [
    (H * N * N * 4, "ONE 3072 × 3072 matrix per head"),
    (2 * N * N * 4, "that is one head"),
    (N * N * 4, "one matrix of one head"),
    (2 * H * N * N * 8, "float64"),
    (2 * H * N * N, "numbers, not bytes"),
    (864, "MiB"),
    (ANSWER * 3, "3x the answer"),
    (ANSWER / 3, "1/3 of the answer"),
])
def test_memory_mistakes_are_named(attempt, words):
    fb = check_memory_prediction(attempt)
    assert not fb.ok and words in fb.message


@pytest.mark.parametrize("attempt, words", [
    (None, "replace None"), ("512 MiB", "as a number"), (True, "as a number"),
    (float("nan"), "a finite number"), (-1, "positive"), (float("inf"), "positive"),
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
    (2.5, "whole number"),
    (8192 * 4, "acts as 8192"),
])
def test_block_budget_mistakes_are_named(attempt, words):
    fb = check_block_for_budget(attempt)
    assert not fb.ok and words in fb.message


@pytest.mark.parametrize("whole", [512.0, np.float64(512)])
def test_block_budget_accepts_whole_number_floats_like_the_other_checkers(whole):
    assert check_block_for_budget(whole).ok
    assert check_qkv_crossover(193.0).ok
