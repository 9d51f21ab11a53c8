"""Every checker of notebooks 01–03 answers any input with a Feedback, never a traceback: ragged
lists, wrong shapes, NaN, None, strings, dicts, and (for checkers that take a function) functions
that return such values or raise."""

import inspect
import math

import numpy as np
import pytest

from bertlib.exercises import Feedback, nb01, nb02, nb03

#: Answers a learner can plausibly hand over by mistake.
ODD = [None, "0.9", "", [[1, 2], [3]], [[1, 2], 3], [[[1]], [2, 3]], [], [[]], np.zeros((2, 3)),
       np.full((6, 6), np.nan), math.nan, math.inf, -1, 10**9, 1.5, True, {"a": 1}, (1, 2, 3),
       [(0, 10), (0, 10)], [(0, "x")], object()]


def _raises(*args):
    raise RuntimeError("learner bug")


FUNCTIONS = [lambda *a, v=v: v for v in ODD if v is not None] + [_raises, lambda: 1]

CHECKERS = [getattr(m, n) for m in (nb01, nb02, nb03) for n in m.__all__ if n.startswith("check_")]


def _answers(checker):
    takes_fn = "fn" in inspect.signature(checker).parameters
    return ODD + (FUNCTIONS if takes_fn else [])


@pytest.mark.parametrize("checker", CHECKERS, ids=lambda c: f"{c.__module__[-4:]}.{c.__name__}")
def test_checker_never_crashes(checker):
    n_required = sum(p.default is inspect.Parameter.empty
                     for p in inspect.signature(checker).parameters.values())
    for answer in _answers(checker):
        for slot in range(max(n_required, 1)):
            args = [answer if k == slot else None for k in range(max(n_required, 1))]
            result = checker(*args)
            assert isinstance(result, Feedback), (checker.__name__, answer, slot)
            assert result.message


def test_ragged_loop_bug_is_named():
    """The classic loop bug: a list of exponentials never emptied per query gives rows of 5, 10,
    15, 20 entries; the message says which row differs."""
    def attention(Q, K, V):
        rows, e = [], []
        for _ in Q:
            e.extend([1.0] * len(K))
            rows.append(list(e))
        return np.zeros((len(Q), V.shape[1])).tolist(), rows
    message = nb01.check_attention_fn(attention).message
    assert "row 0 has 5 entries, row 1 has 10" in message
