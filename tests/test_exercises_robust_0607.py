"""Every checker of notebooks 06 and 07 answers any input with a Feedback, never a traceback;
whole numbers given as floats count as whole numbers; a wrong number is told too high or too low
and by roughly how much, never by exactly how much (which would make the answer computable)."""

import inspect
import math
import re

import numpy as np
import pytest

from bertlib.exercises import Feedback, how_far, nb06, nb07
from bertlib.paper import family

#: Answers a learner can plausibly hand over by mistake (as for 01–03, plus signed and huge numbers).
ODD = [None, "0.9", "", [[1, 2], [3]], [[1, 2], 3], [], [[]], np.zeros((2, 3)),
       np.full((6, 6), np.nan), math.nan, math.inf, -math.inf, -1, 0, -5, 10**9, 1e300, 1.5, 2.0,
       True, {"a": 1}, (1, 2, 3), object()]


def _raises(*args):
    raise RuntimeError("learner bug")


FUNCTIONS = [lambda *a, v=v: v for v in ODD if v is not None] + [_raises, lambda: 1]

CHECKERS = [getattr(m, n) for m in (nb06, nb07) for n in m.__all__ if n.startswith("check_")]


def head(n=24, d=8, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((n, d)) for _ in range(3))


def learner_slots(checker):
    """The names of the parameters a learner fills in (the rest are the exercise's data)."""
    required = [name for name, p in inspect.signature(checker).parameters.items()
                if p.default is inspect.Parameter.empty]
    return [name for name in required if name not in ("Q", "K", "V")]


@pytest.mark.parametrize("checker", CHECKERS, ids=lambda c: f"{c.__module__[-4:]}.{c.__name__}")
def test_checker_never_crashes(checker):
    data = head() if checker is nb06.check_window_design else ()
    slots = learner_slots(checker)
    answers = ODD + (FUNCTIONS if "fn" in slots else [])
    for answer in answers:
        for slot in range(len(slots)):
            args = [answer if k == slot else None for k in range(len(slots))]
            result = checker(*args[:1], *data, *args[1:])
            assert isinstance(result, Feedback), (checker.__name__, answer, slot)
            assert result.message


def test_whole_numbers_given_as_floats_are_accepted():
    assert nb07.check_albert_parameters(17683968.0)
    assert nb07.check_albert_parameters(np.float64(1.7683968e7))
    assert nb07.check_score_memory(3145728.0)
    assert nb07.check_albert_design(128.0, 2.0)
    assert nb06.check_band_bytes(4227072.0)
    right = family.relative_positions(6, 2)
    assert nb07.check_relative_positions(right.astype(float))
    Q, K, V = head()
    best = next(w for w in range(2, 48, 2) if nb06.check_window_design(w, Q, K, V).ok)
    assert nb06.check_window_design(float(best), Q, K, V)
    assert "whole number" in nb06.check_window_design(best + 0.5, Q, K, V).message


GUESSES = [1, 2, 1000, 10**6, 3 * 10**6, 12 * 10**6, 17 * 10**6, 10**8, 10**12]


@pytest.mark.parametrize("checker, answer", [
    (nb07.check_albert_parameters, 17_683_968),
    (nb07.check_score_memory, 3_145_728),
    (nb06.check_band_bytes, 4_227_072),
])
def test_wrong_numbers_do_not_give_the_answer_away(checker, answer):
    for guess in GUESSES:
        message = checker(guess).message
        numbers = {int(x.replace(",", "")) for x in re.findall(r"\d[\d,]*", message)}
        assert answer not in numbers and abs(answer - guess) not in numbers - {guess}, message
        assert "too high" in message or "too low" in message or guess in (1, 2), message
        assert "factor 0" not in message and "off by" not in message, message


def test_the_likely_unit_slips_are_named():
    assert "in bytes" in nb07.check_score_memory(4 * 3_145_728).message
    assert "MiB" in nb06.check_band_bytes(4.03).message
    assert "MB" in nb06.check_band_bytes(4.227).message
    assert "edge rows" in nb06.check_band_bytes(4_210_432).message
    assert "whole number >= 1" in nb07.check_albert_parameters(-5).message
    assert "whole number >= 1" in nb07.check_score_memory(0).message


def test_too_high_and_too_low_are_told_apart_in_bands():
    assert how_far(110, 100) == "too high, by less than a factor 2"
    assert how_far(105, 100) == "too high, by less than 10 %"
    assert how_far(20, 100) == "too low, by a factor between 2 and 10"
    assert how_far(2, 100) == "too low, by a factor between 10 and 100"
    assert how_far(0, 100) == "too low, by more than a factor 100"
