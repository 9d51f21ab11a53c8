"""bertlib.exercises: the one coercion of a learner's answer that every checker uses."""

import math

import numpy as np
import pytest
import torch

from bertlib.exercises import (
    NOT_ANSWERED,
    Feedback,
    as_answer_array,
    as_answer_number,
    as_answer_whole,
    as_answer_word,
    call_answer,
    not_answered,
)


def _message(result) -> str:
    assert isinstance(result, Feedback) and not result
    return result.message


def test_not_answered_is_the_learners_turn():
    fb = not_answered("write your guess")
    assert fb.message == f"{NOT_ANSWERED}: write your guess" and str(fb).startswith("✏️ ")


@pytest.mark.parametrize("coerce", [
    lambda a: as_answer_array(a, "A"), lambda a: as_answer_number(a, "x"),
    lambda a: as_answer_whole(a, "k"), lambda a: as_answer_word(a, "w", ("yes", "no")),
    lambda a: call_answer(a)[1],
])
def test_none_is_not_answered_yet_and_never_raises(coerce):
    assert _message(coerce(None)).startswith(NOT_ANSWERED)


def test_array_accepts_lists_and_tensors_and_names_each_mistake():
    np.testing.assert_array_equal(as_answer_array([[1, 2]], "A", (1, 2)), [[1.0, 2.0]])
    assert as_answer_array(torch.ones(2, 2), "A", (2, 2)).dtype == np.float64
    assert as_answer_array(np.eye(2, dtype=bool), "mask", dtype=None).dtype == bool
    assert "expected A as an array of numbers, got object" in _message(
        as_answer_array(object(), "A"))
    assert _message(as_answer_array(np.ones(3), "A", (3, 3), layout="(n, n)", why=", one row "
                    "per query")) == ("wrong shape: A should have shape (n, n) = (3, 3), one row "
                                      "per query; yours has (3,)")
    assert "A contains NaN or inf" in _message(as_answer_array([np.nan], "A"))


def test_number_names_the_kind_and_the_range():
    assert as_answer_number(np.float32(0.5), "p", 0, 1) == 0.5
    for bad in ("0.5", True, [1]):
        assert "p must be given as a number" in _message(as_answer_number(bad, "p", 0, 1))
    assert "p must be a finite number, got nan" in _message(as_answer_number(math.nan, "p", 0, 1))
    assert "p must be a number between 0 and 1, got 3" in _message(as_answer_number(3, "p", 0, 1))
    assert "positive, finite" in _message(as_answer_number(0, "b", 0, open_low=True))
    assert "positive, finite" in _message(as_answer_number(float("inf"), "b", 0, open_low=True))


def test_whole_takes_whole_floats_refuses_fractions_and_bools_and_says_the_range():
    assert as_answer_whole(np.int64(3), "k", 0, 5) == 3
    assert as_answer_whole(3.0, "k", 0, 5) == 3 and isinstance(as_answer_whole(3.0, "k", 0, 5), int)
    assert as_answer_whole(np.float32(4.0), "k", 0, 5) == 4  # a whole-number float is that number
    for bad in (3.5, float("nan"), float("inf"), True, "3"):
        assert "k must be a whole number in 0..5" in _message(as_answer_whole(bad, "k", 0, 5))
    assert "k must be a whole number >= 1, got 0" in _message(as_answer_whole(0, "k", low=1))


def test_word_ignores_case_and_spaces_and_lists_the_choices():
    assert as_answer_word(" Higher ", "guess", ("higher", "lower")) == "higher"
    assert 'guess: answer with "higher" or "lower", got 3' in _message(
        as_answer_word(3, "guess", ("higher", "lower")))
    assert '"a", "b" or "c"' in _message(as_answer_word("d", "guess", ("a", "b", "c")))


def test_call_answer_turns_a_learners_error_into_feedback():
    assert call_answer(lambda x: x + 1, 1) == (2, None)
    assert "with h = 2 your function raised ZeroDivisionError" in _message(
        call_answer(lambda: 1 / 0, when="with h = 2")[1])
    assert "expected a function, got int" in _message(call_answer(3)[1])
    assert "returns None" in _message(call_answer(lambda: None)[1])
