"""A hint ladder that climbs only on a new answer: a checker whose hint says more on each stuck
try (notebook 01's design exercise: a question, then which keys to compare, then the reason)
gives a learner who checks the very same answer again the same hint, with a note that the answer
is unchanged; only a different wrong answer climbs to the next hint."""

from __future__ import annotations

import copy

import numpy as np

from bertlib.exercises import count_try, wrong_tries

__all__ = ["UNCHANGED", "climb", "same_answer"]

#: What a ladder's hint gets when the learner checks the same answer as last time.
UNCHANGED = (" (your answer is the same as at your last check, so this is the same hint: change "
             "your answer, then check again, for the next hint)")
_last: dict[str, tuple[int, object]] = {}  # label -> (its step then, a copy of that answer)


def climb(label: str, answer) -> tuple[int, str]:
    """One check of the hint ladder ``label`` (e.g. "nb01.keys") with the learner's ``answer``:
    ``(step, note)``. A new answer climbs one step (1 on the first) and its note is ""; the same
    answer as at the last check (:func:`same_answer`) keeps the step, with the note UNCHANGED to
    add to the hint. Counted with :func:`bertlib.exercises.count_try`, so forgotten by
    :func:`bertlib.exercises.reset_tries` (a restarted kernel) like every count of tries."""
    step = wrong_tries(label)
    held = _last.get(label)
    if held is not None and step > 0 and held[0] == step and same_answer(answer, held[1]):
        return step, UNCHANGED
    step = count_try(label)
    try:  # a copy: an array edited in place and checked again is a new answer
        kept = copy.deepcopy(answer)
    except Exception:  # noqa: BLE001 (an odd object of the learner's that cannot be copied)
        kept = answer
    _last[label] = (step, kept)
    return step, ""


def same_answer(a, b) -> bool:
    """True when two answers ``a`` and ``b`` hold the same value: arrays and tensors (any shape)
    by shape and then values (``np.allclose`` for numbers, NaN equal to NaN; equality for other
    dtypes), lists and tuples item by item, dicts key by key, anything else by ``==``. Never
    raises: two things that cannot be compared count as different."""
    try:
        return _same(a, b)
    except Exception:  # noqa: BLE001 (a learner's odd type: not the same answer)
        return False


def _same(a, b) -> bool:
    if any(isinstance(x, np.ndarray | np.generic) or hasattr(x, "__array__") for x in (a, b)):
        x, y = np.asarray(a), np.asarray(b)
        if x.shape != y.shape:
            return False
        if all(np.issubdtype(v.dtype, np.number) for v in (x, y)):
            return bool(np.allclose(x, y, equal_nan=True))
        return bool(np.array_equal(x, y))
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:  # NaN, NaN
        return True
    return bool(a == b)
