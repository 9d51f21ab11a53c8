"""A hint ladder that climbs only on a new answer: a checker whose hint says more on each stuck
try (notebook 01's design exercise: a question, then which keys to compare, then the reason)
gives a learner who checks the very same answer again the same hint, with a note that the answer
is unchanged; only a different wrong answer climbs to the next hint (:func:`climb`).

The same holds for a checker with a limit of explained tries
(:func:`bertlib.exercises.explained_tries`): the last wrong answer checked again gets the message
it got, with a note, and uses up no try (:func:`said_before`, :func:`remember`)."""

from __future__ import annotations

import copy
import inspect

import numpy as np

from bertlib.exercises import count_try, wrong_tries

__all__ = ["UNCHANGED", "UNCHANGED_TRY", "climb", "same_answer", "said_before", "remember",
           "arguments"]

#: What a ladder's hint gets when the learner checks the same answer as last time.
UNCHANGED = (" (your answer is the same as at your last check, so this is the same hint: change "
             "your answer, then check again, for the next hint)")
#: What a checker with a limit of explained tries adds when the learner checks the same wrong
#: answer as last time: the same message, and no try used up.
UNCHANGED_TRY = (" (your answer is the same as at your last wrong check, so this is the same "
                 "message, and it does not use up a try)")
_last: dict[str, tuple[int, object]] = {}  # label -> (its step then, a copy of that answer)
_said: dict[str, tuple[int, object, str]] = {}  # checker -> (its count, answer, message) then


def climb(label: str, answer) -> tuple[int, str]:
    """One check of the hint ladder ``label`` (e.g. "nb01.keys") with the learner's ``answer``:
    ``(step, note)``. A new answer climbs one step (1 on the first) and its note is ""; the same
    answer as at the last check (:func:`same_answer`) keeps the step, with the note UNCHANGED to
    add to the hint. Counted with :func:`bertlib.exercises.count_try`, so forgotten by
    :func:`bertlib.exercises.reset_tries` (a restarted kernel) like every count of tries."""
    step = wrong_tries(label)
    held = _last.get(label)
    if held is not None and step > 0 and held[0] == step and same_answer(_snapshot(answer),
                                                                         held[1]):
        return step, UNCHANGED
    step = count_try(label)
    _last[label] = (step, _snapshot(answer))
    return step, ""


def said_before(label: str, answer) -> str | None:
    """The message the checker ``label`` gave its last wrong ``answer``, when this answer is the
    same (:func:`same_answer`) and no try was counted since (:func:`remember`); else None. For
    :func:`bertlib.exercises.explained_tries`: the same wrong answer checked again is no new try."""
    held = _said.get(label)
    if held is not None and held[0] == wrong_tries(label) and same_answer(
            _snapshot(answer), held[1]):
        return held[2]
    return None


def remember(label: str, answer, message: str) -> None:
    """Keep the wrong ``answer`` (a copy) that the checker ``label`` just counted, and its
    ``message``, for :func:`said_before`."""
    _said[label] = (wrong_tries(label), _snapshot(answer), message)


def arguments(check, args: tuple, kwargs: dict) -> dict:
    """The arguments of a call ``check(*args, **kwargs)`` by name, defaults filled in, so that an
    answer given by keyword or by position is the same answer; as given if they do not fit."""
    try:
        bound = inspect.signature(check).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return {"args": args, "kwargs": kwargs}
    bound.apply_defaults()
    return dict(bound.arguments)


class _Kept:
    """Not plain data (a model, a training run): the same only as itself, never copied."""

    def __init__(self, value) -> None:
        self.value = value

    def __eq__(self, other) -> bool:
        return isinstance(other, _Kept) and other.value is self.value

    __hash__ = None


def _snapshot(answer):
    """A copy of plain data (numbers, strings, arrays, tensors, and lists, tuples and dicts of
    them: an array edited in place and checked again is a new answer); anything else is kept as
    itself, the same only as itself (a model is never copied)."""
    if isinstance(answer, list | tuple):
        return type(answer)(_snapshot(x) for x in answer) if type(answer) in (list, tuple) \
            else _Kept(answer)
    if isinstance(answer, dict):
        return {k: _snapshot(v) for k, v in answer.items()}
    if answer is None or isinstance(answer, bool | int | float | complex | str | bytes | np.generic
                                    | np.ndarray) or hasattr(answer, "detach"):
        try:
            return copy.deepcopy(answer)
        except Exception:  # noqa: BLE001 (an odd object of the learner's that cannot be copied)
            return answer
    return _Kept(answer)


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
