"""bertlib.exercises.ladder: a hint ladder climbs on a new wrong answer only; the same answer
checked again keeps its step (and is told so); answers are compared by value, never raising."""

import math

import numpy as np
import pytest
import torch

from bertlib.exercises import reset_tries, wrong_tries
from bertlib.exercises.ladder import UNCHANGED, climb, same_answer


@pytest.fixture(autouse=True)
def _fresh_kernel():
    reset_tries()


def test_the_same_try_twice_keeps_the_step_and_a_new_try_climbs():
    W = np.eye(3)
    assert climb("x.ladder", W) == (1, "")
    assert climb("x.ladder", W.copy()) == (1, UNCHANGED)  # the same values: the same step
    assert climb("x.ladder", W) == (1, UNCHANGED)
    assert wrong_tries("x.ladder") == 1  # counted once
    assert climb("x.ladder", 2 * W) == (2, "")  # a new try: the next step
    assert climb("x.ladder", 2 * W) == (2, UNCHANGED)
    assert climb("x.ladder", W) == (3, "")  # an earlier answer, but not the last one: new
    assert climb("x.other", W) == (1, "")  # each ladder on its own
    reset_tries()  # a restarted kernel: the last answer is forgotten with the count
    assert climb("x.ladder", W) == (1, "")


def test_an_array_edited_in_place_and_checked_again_is_a_new_try():
    W = np.zeros((4, 2))
    assert climb("x.inplace", W) == (1, "")
    W[3] = [0, 3]
    assert climb("x.inplace", W) == (2, "")
    assert climb("x.inplace", W) == (2, UNCHANGED)


class _Unequal:
    """A learner's odd object: comparing it raises."""

    def __eq__(self, other):
        raise RuntimeError("no comparing me")

    __hash__ = object.__hash__


class _Uncopyable:
    def __deepcopy__(self, memo):
        raise TypeError("no copying me")


@pytest.mark.parametrize("a, b, same", [
    (np.eye(2), np.eye(2) + 1e-12, True),  # allclose
    (np.eye(2), np.eye(2) + 1e-3, False),
    (np.eye(2), np.eye(3), False),  # shapes differ
    (np.ones((2, 3)), np.ones((3, 2)), False),
    (np.eye(2), [[1, 0], [0, 1]], True),  # an array and the same list
    (np.array([np.nan, 1.0]), np.array([np.nan, 1.0]), True),  # NaN where NaN
    (np.array(["a", "b"]), np.array(["a", "b"]), True),  # not numbers: equality
    (np.array(["a", "b"]), np.array(["a", "c"]), False),
    (torch.eye(2), np.eye(2), True),  # a tensor and an array
    ([(0, 1), (2, 3)], [(0, 1), (2, 3)], True),
    ([(0, 1), (2, 3)], [(0, 1), (2, 4)], False),
    ([(0, 1)], [(0, 1), (2, 3)], False),
    ({"a": np.eye(2)}, {"a": np.eye(2)}, True),
    ({"a": 1}, {"b": 1}, False),
    ("cat", "cat", True), ("cat", " cat", False), (3, 3.0, True), (None, None, True),
    (math.nan, math.nan, True), (None, np.eye(2), False), ("cat", np.eye(2), False),
])
def test_same_answer_compares_by_value(a, b, same):
    assert same_answer(a, b) is same and same_answer(b, a) is same


@pytest.mark.parametrize("odd", [_Unequal(), object(), [[1, 2], [3]], {1, 2}, lambda x: x,
                                 torch.ones(2, requires_grad=True), _Uncopyable(), b"\x00"])
def test_odd_types_never_raise(odd):
    for other in (odd, np.eye(2), "cat", None, [1, 2]):
        assert same_answer(odd, other) in (True, False)
    assert not same_answer(_Unequal(), _Unequal())  # cannot be compared: different
    assert climb("x.odd", odd) == (1, "")
    step, note = climb("x.odd", odd)  # the same object again: the same step (or, if it cannot
    assert step in (1, 2) and note == ("" if step == 2 else UNCHANGED)  # be compared, a new one)
