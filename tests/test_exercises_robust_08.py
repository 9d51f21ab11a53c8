"""Every checker of notebook 08 answers any input with a Feedback, never a traceback: ragged
lists, wrong shapes, NaN, None, strings, dicts, (1, n, n) tensors, and (for the checker that
takes a function) functions that return such values or raise. The other argument of a
two-argument checker is tried both empty and right, so the odd answer reaches the later checks."""

import inspect
import math

import numpy as np
import pytest
import torch

from bertlib.exercises import Feedback, nb08

A, B = nb08.CHECK_PAIRS[0]
N = 16  # word pieces of [CLS] A [SEP] B [SEP]

#: Answers a learner can plausibly hand over by mistake (as for 01–03, plus n-sized ones).
ODD = [None, "0.9", "", [[1, 2], [3]], [[1, 2], 3], [], [[]], np.zeros((2, 3)),
       np.full((N, N), np.nan), np.full((N, N), np.inf), np.zeros((N, N)), np.ones((N, N)),
       -np.ones((N, N)), np.full((N, N), 2.0), np.zeros((1, N, N)), np.zeros((2, N, N)),
       torch.zeros(1, N, N), np.zeros((N, N), dtype=bool), math.nan, math.inf, -1, 10**9, 1.5,
       True, "2nd", {"a": 1}, (1, 2, 3), object()]


def _raises(*args):
    raise RuntimeError("learner bug")


FUNCTIONS = [lambda *a, v=v: v for v in ODD if v is not None] + [_raises, lambda: 1]

CHECKERS = [getattr(nb08, n) for n in nb08.__all__ if n.startswith("check_")]


def _right_prior():
    return nb08.reference_position_prior(A, B)


@pytest.mark.parametrize("checker", CHECKERS, ids=lambda c: c.__name__)
def test_checker_never_crashes(checker):
    slots = [p for p in inspect.signature(checker).parameters.values()
             if p.default is inspect.Parameter.empty]
    answers = ODD + (FUNCTIONS if slots[0].name == "fn" else [])
    fillers = [None] + ([_right_prior()] if len(slots) > 1 else [])
    for answer in answers:
        for slot in range(len(slots)):
            for filler in fillers:
                args = [answer if k == slot else filler for k in range(len(slots))]
                result = checker(*args)
                assert isinstance(result, Feedback), (checker.__name__, answer, slot)
                assert result.message and not result.ok, (checker.__name__, answer, slot)
