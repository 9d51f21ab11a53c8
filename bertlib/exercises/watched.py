"""A learner's function called while bertlib's own answer is watched.

An exercise that asks the learner to write a function bertlib already has refuses a function that
calls bertlib's: :func:`bertlib.exercises.calls_library` finds it in the code beforehand, and
:func:`call_watched` also when the learner imports it inside the function's own body.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from bertlib.exercises import call_answer

__all__ = ["call_watched"]


def call_watched(fn: Callable, target: Callable, *args, when: str = "") -> tuple:
    """``call_answer(fn, *args)`` with every bertlib module's name for ``target`` held by a twin
    that counts its calls. Returns ``(result, error, called)``: ``called`` is True when fn reached
    ``target`` during the call. The names are put back afterwards, whatever fn did."""
    calls = []

    def twin(*a, **kw):
        calls.append(1)
        return target(*a, **kw)

    held = [(m, name) for key, m in list(sys.modules.items()) if key.split(".")[0] == "bertlib"
            for name, value in list(vars(m).items()) if value is target]
    try:
        for m, name in held:
            setattr(m, name, twin)
        result, error = call_answer(fn, *args, when=when)
    finally:
        for m, name in held:
            setattr(m, name, target)
    return result, error, bool(calls)
