"""Every checker of notebooks 04–05 answers any input with a Feedback, never a traceback: ragged
lists, wrong shapes, NaN, None, strings, dicts, and (for checkers that take a function)
functions that return such values or raise. And the "reproduce" checkers of 04 do not accept
the bertlib function the lesson used in place of the learner's own steps."""

import inspect
import math

import numpy as np
import pytest

from bertlib.exercises import Feedback, nb04, nb05
from bertlib.lab import analysis as an

#: Answers a learner can plausibly hand over by mistake.
ODD = [None, "0.9", "", [[1, 2], [3]], [[1, 2], 3], [[[1]], [2, 3]], [], [[]], np.zeros((2, 3)),
       np.full((10, 10), np.nan), np.full((10, 10), 0.1), math.nan, math.inf, -1, 0, 10**9, 1.5,
       512.0, True, {"a": 1}, (1, 2, 3), "higher ", object()]


def _raises(*args):
    raise RuntimeError("learner bug")


FUNCTIONS = [lambda *a, v=v: v for v in ODD if v is not None] + [_raises, lambda: 1]

CHECKERS = [getattr(m, n) for m in (nb04, nb05) for n in m.__all__ if n.startswith("check_")]


def _answers(checker):
    takes_fn = "fn" in inspect.signature(checker).parameters
    answers = FUNCTIONS if takes_fn else ODD
    # only the sep prediction checker runs the model, and only for "higher"/"lower"
    return [a for a in answers if not isinstance(a, str)] if checker is nb04.check_sep_prediction \
        else answers


@pytest.mark.parametrize("checker", CHECKERS, ids=lambda c: f"{c.__module__[-4:]}.{c.__name__}")
def test_checker_never_crashes(checker):
    for answer in _answers(checker) + [None]:
        result = checker(answer)
        assert isinstance(result, Feedback), (checker.__name__, answer)
        assert result.message


@pytest.mark.parametrize("checker, library", [
    (nb04.check_share_to, lambda a, t, x: an.to_token_shares(a, t)["[SEP]"]),
    (nb04.check_entropy, an.attention_entropy),
    (nb04.check_rollout, an.attention_rollout),
    (nb04.check_rollout, lambda a: an.attention_rollout(a)),
])
def test_reproduce_checkers_do_not_accept_the_library(checker, library):
    fb = checker(library)
    assert not fb.ok and "write its steps yourself" in fb.message


def test_written_steps_still_pass_after_a_library_attempt():
    """The watch on the library is lifted after each call: a correct function then passes."""
    nb04.check_rollout(an.attention_rollout)

    def entropy(attentions):
        n = attentions.shape[-1]
        smoothed = 0.9999 * attentions + 0.0001 / n
        return -(smoothed * np.log(smoothed)).sum(-1).mean(-1)

    assert nb04.check_entropy(entropy).ok


@pytest.mark.parametrize("wrong, words", [
    (lambda e, n: e / n, "averaged over the keys"),
    (lambda e, n: e / np.log(n), "divided by log n"),
])
def test_entropy_mistakes_are_named(wrong, words):
    def entropy(attentions):
        n = attentions.shape[-1]
        smoothed = 0.9999 * attentions + 0.0001 / n
        return wrong(-(smoothed * np.log(smoothed)).sum(-1).mean(-1), n)

    fb = nb04.check_entropy(entropy)
    assert not fb.ok and words in fb.message


def test_nb05_tolerance_constant_is_exported():
    assert nb05.FACTOR > 1
