"""bertlib.exercises.nb05: each checker accepts the right answer and names each typical mistake."""

import pytest
import torch

from bertlib.cost import attention_bytes, ffn_bytes, measure, naive_attention
from bertlib.exercises import Feedback
from bertlib.exercises.nb05 import check_crossover_prediction, check_memory_prediction

N = 8192
ANSWER = 2 * N * N * 4  # computed by hand: scores + weights, float32


def test_memory_answer_matches_a_measurement_on_meta_tensors():
    # "meta" tensors have shapes and no data: the count needs no real memory
    def setup(n):
        return tuple(torch.empty(1, 1, n, 64, device="meta") for _ in range(3))

    (m,) = measure(naive_attention, [N], setup=setup, repeats=1, warmup=0, progress=False)
    assert m.peak_bytes == ANSWER
    assert check_memory_prediction(m.peak_bytes).ok


def test_memory_right_answer_and_tolerance():
    fb = check_memory_prediction(ANSWER)
    assert isinstance(fb, Feedback) and fb.ok and "512 MiB" in fb.message
    assert check_memory_prediction(ANSWER * 1.04).ok
    assert not check_memory_prediction(ANSWER * 1.2).ok


@pytest.mark.parametrize("attempt, words", [
    (N * N * 4, "ONE 8192 × 8192"),  # one matrix, or linear growth from n = 4096
    (2 * N * N * 8, "float64"),
    (2 * N * N, "numbers, not bytes"),
    (512, "MiB"),
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


def test_crossover_right_answer():
    assert attention_bytes(256, h=12) == ffn_bytes(256, 3072)
    fb = check_crossover_prediction(256)
    assert fb.ok and "3072 / 12 = 256" in fb.message
    assert check_crossover_prediction(64, h=2, d_ff=128).ok


@pytest.mark.parametrize("attempt, words", [
    (3072, "ignores the heads"),
    (55, "linear in n"),  # √3072
    (1000, "too large"),
    (100, "too small"),
    (None, "replace None"),
])
def test_crossover_mistakes_are_named(attempt, words):
    fb = check_crossover_prediction(attempt)
    assert not fb.ok and words in fb.message
