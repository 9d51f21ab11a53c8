"""Checkers for the notebooks' "Try it" exercises: one module per notebook (``nb01``, ...).

Every checker returns a :class:`Feedback` (printed as a short message) that says *what* is wrong
(a wrong shape, a forgotten scaling, softmax over the wrong axis) rather than just "incorrect",
and never raises on a learner's mistake.

A checker first turns the learner's answer into what it needs with one of the ``as_answer_*``
functions below (an array, a number, a whole number, one of a few words, or the result of the
learner's function). Each returns either the value or the :class:`Feedback` naming what is wrong
with the answer's form, so a checker reads::

    a = as_answer_array(answer, "the weights", shape=(6, 6))
    if isinstance(a, Feedback):
        return a
    ... compare a with the right answer and with each typical mistake ...

``None`` (the untouched stub) always gives :func:`not_answered`, never an exception.

A checker whose answer is one of a few choices (a word, a number, a head) or whose message names
wrong items or a direction is wrapped by :func:`explained_tries`: only its first three wrong
tries are explained, so that a loop over answers learns nothing more than right or wrong.

Shared by the checkers of several notebooks: :func:`calls_library` (does a learner's function
hand its work to the bertlib function the exercise asks them to write?), :func:`fitted_divisor`
(the scaling a learner's softmax used), :func:`count_try` (a hint that waits for a second try;
:mod:`bertlib.exercises.ladder` climbs only on a new answer) and :func:`described` (what a
learner's function returned, in words).
"""

from __future__ import annotations

import builtins
import dis
import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

#: How every checker's message for an untouched stub begins; it is marked ✏️ (your turn), not ❌.
NOT_ANSWERED = "not answered yet"


@dataclass(frozen=True)
class Feedback:
    """Result of an exercise check: ``ok`` and a message for the learner."""

    ok: bool
    message: str
    #: True for a message about the answer's form (None, not a number, a wrong shape): such a
    #: message says nothing about the right answer, so it never counts as a try (see
    #: :func:`explained_tries`).
    form: bool = False

    def __str__(self) -> str:
        if self.ok:
            return "✅ " + self.message
        return ("✏️ " if self.message.startswith(NOT_ANSWERED) else "❌ ") + self.message

    def _repr_pretty_(self, p, cycle) -> None:  # IPython shows the message, not the dataclass
        p.text(str(self))

    def __bool__(self) -> bool:
        return self.ok


#: What an untouched stub is told unless the checker says more precisely what to write.
TODO = "replace None with your answer and run the cell again"


def not_answered(todo: str = TODO) -> Feedback:
    """The ✏️ Feedback for an untouched stub: "not answered yet: <what to do>"."""
    return Feedback(False, f"{NOT_ANSWERED}: {todo}", form=True)


def form_error(message: str) -> Feedback:
    """The ❌ Feedback for an answer of the wrong form (not a number, a wrong shape): it is
    explained on every try, as it tells nothing about the right answer."""
    return Feedback(False, message, form=True)


def as_answer_array(answer, what: str, shape: tuple[int, ...] | None = None, *, layout: str = "",
                    why: str = "", dtype=float, todo: str = TODO) -> np.ndarray | Feedback:
    """The learner's ``answer`` as a numpy array (torch tensors included), or the Feedback saying
    why it is not one: not answered (None), not numbers, the wrong shape, NaN or inf.

    what: the answer's name in the messages ("the weights", "W_O"). shape: the shape required
    (None = any); layout: its axes' names, e.g. "(n, d)"; why: a few words after the shape, e.g.
    ", one row per query". dtype: float (default), or None to keep the answer's own (a bool mask).
    Rows of different lengths are told which row differs (:func:`ragged_message`).
    """
    if answer is None:
        return not_answered(todo)
    if hasattr(answer, "detach"):  # a torch tensor
        answer = answer.detach().cpu().numpy()
    try:
        a = np.asarray(answer) if dtype is None else np.asarray(answer, dtype=dtype)
    except (TypeError, ValueError):  # rows of different lengths are named, else the type
        return form_error(ragged_message(answer, what) or f"expected {what} as an array of "
                          f"numbers, got {type(answer).__name__}")
    if shape is not None and a.shape != tuple(shape):
        want = f"{layout} = {tuple(shape)}" if layout else f"{tuple(shape)}"
        return form_error(f"wrong shape: {what} should have shape {want}{why}; yours has "
                               f"{a.shape}")
    if np.issubdtype(a.dtype, np.inexact) and not np.isfinite(a).all():
        if not hasattr(answer, "detach") and None in np.asarray(answer, object).ravel().tolist():
            return form_error(f"{what} holds None, not numbers: fill in every entry")
        return form_error(f"{what} contains NaN or inf: every entry must be a finite "
                               "number (typed in, or a division by 0 or exp of a huge number?)")
    return a


def as_answer_number(answer, what: str, low: float | None = None, high: float | None = None, *,
                     open_low: bool = False, todo: str = TODO) -> float | Feedback:
    """The learner's ``answer`` as a float in ``[low, high]`` (``(low, high]`` when ``open_low``;
    either end None = open), or the Feedback saying why it is not: not answered (None), not a
    number (a str, a bool, NaN), out of range (±inf included)."""
    if answer is None:
        return not_answered(todo)
    try:
        value = math.nan if isinstance(answer, bool | str | bytes) else float(answer)
    except (TypeError, ValueError):
        value = math.nan
    if math.isnan(value):
        kind = "a finite number" if isinstance(answer, float | np.floating) else "given as a number"
        return form_error(f"{what} must be {kind}, got {answer!r}")
    if low is not None and high is not None:
        span = f"a number between {low:g} and {high:g}"
    elif low == 0 and open_low:
        span = "a positive, finite number"
    elif low is not None:
        span = f"a finite number {'>' if open_low else '>='} {low:g}"
    else:
        span = "a finite number" if high is None else f"a finite number <= {high:g}"
    too_low = low is not None and (value <= low if open_low else value < low)
    if too_low or (high is not None and value > high) or math.isinf(value):
        return form_error(f"{what} must be {span}, got {answer!r}")
    return value


def as_answer_whole(answer, what: str, low: int | None = None, high: int | None = None, *,
                    todo: str = TODO) -> int | Feedback:
    """The learner's ``answer`` as an int in ``low..high`` (either end None = open), or the
    Feedback saying why it is not: not answered (None), not a whole number (a str, a bool, a
    float with a fraction, NaN, inf), out of range. A whole-number float (14.0) counts as 14."""
    if answer is None:
        return not_answered(todo)
    if isinstance(answer, float | np.floating) and math.isfinite(answer) and answer.is_integer():
        answer = int(answer)
    span = (f" in {low}..{high}" if low is not None and high is not None else
            f" >= {low}" if low is not None else f" <= {high}" if high is not None else "")
    if isinstance(answer, bool) or not isinstance(answer, int | np.integer):
        return form_error(f"{what} must be a whole number{span}, got {answer!r}")
    if (low is not None and answer < low) or (high is not None and answer > high):
        return form_error(f"{what} must be a whole number{span}, got {answer!r}")
    return int(answer)


def as_answer_pairs(answer, what: str, example: str, item: str, *, todo: str = TODO
                    ) -> list[tuple[int, int]] | Feedback:
    """The learner's ``answer`` as a list of distinct pairs of whole numbers, e.g. (layer, head),
    or the Feedback saying why it is not: not answered (None), not pairs of whole numbers, a pair
    listed twice. what: the pairs' name, "(layer, head)"; example: a right-looking list in
    words, "[(0, 2), (3, 11)]"; item: what one pair names, "head"."""
    if answer is None:
        return not_answered(todo)
    try:  # each number read as as_answer_whole reads one (14.0 counts as 14; 0.5, True do not)
        pairs = [tuple(as_answer_whole(x, item) for x in pair) for pair in answer]
    except TypeError:  # not a list of pairs
        pairs = None
    if pairs is None or any(len(p) != 2 or any(isinstance(x, Feedback) for x in p) for p in pairs):
        return form_error(f"give a list of {what} pairs of whole numbers, e.g. {example}")
    twice = next((p for p in pairs if pairs.count(p) > 1), None)
    if twice is not None:
        return form_error(f"{twice} is listed {pairs.count(twice)} times: name each {item} once")
    return pairs


def how_far(value: float, expected: float) -> str:
    """'too high' or 'too low' and by roughly how much, as a band of ratios (never the exact gap,
    so that a wrong guess does not make the answer computable). value, expected: numbers > 0."""
    ratio = max(value, expected) / max(min(value, expected), 1e-300)
    bands = ((1.1, "by less than 10 %"), (2, "by less than a factor 2"),
             (10, "by a factor between 2 and 10"), (100, "by a factor between 10 and 100"))
    return _banded(value > expected, ratio, bands, "by more than a factor 100")


def how_far_apart(value: float, expected: float, steps: tuple[float, float] = (0.05, 0.2)) -> str:
    """'too high' or 'too low' and by roughly how much, as a band of differences: "by less than
    0.05", "by 0.05 to 0.2", "by more than 0.2" for the default ``steps`` (never the exact gap).
    For numbers on a scale of their own, such as a cosine, where a ratio (:func:`how_far`) says
    little."""
    low, high = steps
    bands = ((low, f"by less than {low:g}"), (high, f"by {low:g} to {high:g}"))
    return _banded(value > expected, abs(value - expected), bands, f"by more than {high:g}")


def _banded(high: bool, gap: float, bands: tuple, beyond: str) -> str:
    """"too high, <band>" or "too low, <band>": the first band whose limit ``gap`` is below."""
    way = "too high" if high else "too low"
    return f"{way}, {next((band for limit, band in bands if gap < limit), beyond)}"


def as_answer_word(answer, what: str, choices: Sequence[str], *, todo: str = TODO
                   ) -> str | Feedback:
    """The learner's ``answer`` as one of ``choices`` (case and surrounding spaces ignored), or
    the Feedback listing them."""
    if answer is None:
        return not_answered(todo)
    word = answer.strip().lower() if isinstance(answer, str) else None
    if word not in choices:
        quoted = [f'"{c}"' for c in choices]
        listed = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
        return form_error(f"{what}: answer with {listed}, got {answer!r}")
    return word


def call_answer(fn: Callable, *args, when: str = "", todo: str = TODO):
    """Run the learner's function ``fn(*args)``: ``(result, None)``, or ``(None, Feedback)`` when
    fn is None (not answered), is not a function, raises (the error becomes the message, never a
    traceback) or returns None. when: where it was tried, e.g. "with h = 2", for the message."""
    if fn is None:
        return None, not_answered(todo)
    if not callable(fn):
        return None, Feedback(False, f"expected a function, got {type(fn).__name__}")
    when = f"{when} " if when else ""
    try:
        result = fn(*args)
    except Exception as exc:  # a learner's bug becomes feedback, never a traceback
        return None, Feedback(False, f"{when}your function raised {type(exc).__name__}: {exc}")
    if result is None:  # a body that does work yet returns None: a `return` left out
        return None, (form_error(f"{when}your function runs but returns None: did you forget "
                                 "`return`?") if _has_body(fn) else not_answered(
            "your function returns None: fill it in so that it returns its result"))
    return result, None


def _has_body(fn: Callable) -> bool:
    """True when ``fn`` does more than a stub (``return None``, ``pass``, a docstring)."""
    code = getattr(getattr(fn, "func", fn), "__code__", None)
    idle = {"RESUME", "NOP", "CACHE", "LOAD_CONST", "RETURN_CONST", "RETURN_VALUE"}
    return code is not None and any(i.opname not in idle for i in dis.get_instructions(code))


def described(value) -> str:
    """What a learner's function returned, in words: "a tuple of 3 things", "a list of 1 thing",
    "one array of shape (4, 2)", "a dict"."""
    if isinstance(value, tuple | list):
        return f"a {type(value).__name__} of {len(value)} thing{'s' * (len(value) != 1)}"
    shape = getattr(value, "shape", None)
    return f"one array of shape {tuple(shape)}" if shape is not None else (
        f"a {type(value).__name__}")


def ragged_message(value, name: str) -> str:
    """"" when ``value`` is array-like of one shape; else which row has a different length."""
    try:
        np.shape(value)
        return ""
    except ValueError:
        pass
    try:
        lengths = [len(row) for row in value]
    except TypeError:
        return f"{name} mixes rows and single numbers: every row needs one entry per column"
    first = lengths[0]
    i = next((k for k, n in enumerate(lengths) if n != first), None)
    if i is None:  # rows of one length, uneven deeper down: not this message's case
        return ""
    return (f"the rows of {name} have different lengths: row 0 has {first} entries, row {i} has "
            f"{lengths[i]} (a list built in a loop that is not emptied for each new row?)")


def is_complex(value) -> bool:
    """True if ``value`` (array-like or tensor) holds complex numbers; False if unreadable."""
    if hasattr(value, "is_complex"):  # a torch tensor
        return bool(value.is_complex())
    try:
        return bool(np.iscomplexobj(np.array(value)))
    except (TypeError, ValueError):
        return False


def fitted_divisor(A: np.ndarray, S: np.ndarray, atol: float = 1e-5) -> float | None:
    """The constant c with A = softmax(S / c) in every row, if one fits A exactly; else None.

    A, S: (n_q, n_k) weights and scores. Row by row, log A = S / c − (a constant), so the centred
    log A is the centred S times 1/c. The rows of A must be positive and sum to 1 within ``atol``.
    A checker uses c to name a wrong scaling (none, d_k, √d_v, a number typed in).
    """
    A, S = np.asarray(A, dtype=float), np.asarray(S, dtype=float)
    if not np.all(A > 0) or not np.allclose(A.sum(axis=1), 1.0, rtol=0, atol=atol):
        return None
    logs = np.log(A) - np.log(A).mean(axis=1, keepdims=True)
    centred = S - S.mean(axis=1, keepdims=True)
    slope = float((logs * centred).sum() / (centred * centred).sum())
    if slope <= 0 or np.abs(logs - slope * centred).max() > 1e-6:
        return None
    return 1.0 / slope


def calls_library(fn: Callable, target: Callable, depth: int = 3) -> bool:
    """True if the learner's ``fn`` is bertlib's ``target`` (the function an exercise asks them to
    write themselves) or its code reaches it: a global name or closure that holds it, an
    attribute of target's name (``attention.split_heads(...)``), ``functools.partial``, or a
    function of the learner's that does one of these (followed ``depth`` calls deep). A helper
    of the learner's that only shares the name (a global bound to their own function) is not."""
    fn = getattr(fn, "func", fn)  # functools.partial
    if fn is target:
        return True
    code = getattr(fn, "__code__", None)
    if code is None or depth == 0:
        return False
    cells = [c.cell_contents for c in (fn.__closure__ or ()) if _filled(c)]
    found = _loaded(code, getattr(fn, "__globals__", {}))
    return any(obj is not fn and callable(obj) and calls_library(obj, target, depth - 1)
               for obj in cells + found)


def _filled(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018 (an empty cell raises)
    except ValueError:
        return False
    return True


def _loaded(code, names: dict) -> list:
    """What ``code`` (and the functions nested in it) loads: each global, and each attribute chain
    read from one (``attention.scaled_dot_product_attention`` is bertlib's, ``F.scaled_dot_product_
    attention`` torch's): the objects themselves, so a name shared with another library is not
    mistaken for bertlib's."""
    found, current = [], None
    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            current = names.get(ins.argval, getattr(builtins, str(ins.argval), None))
        elif ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and current is not None:
            try:
                current = getattr(current, ins.argval, None)
            except Exception:  # noqa: BLE001 (a property of the learner's object may raise)
                current = None
        else:
            current = None
            continue
        found.append(current)
    return found + [obj for inner in code.co_consts if hasattr(inner, "co_code")
                    for obj in _loaded(inner, names)]


def attempt_note(error: Feedback | None) -> str:
    """" (yours raised X: ...)" or " (yours returned None)" for call_answer's error; "" if none."""
    if error is None:
        return ""
    if error.message.startswith(NOT_ANSWERED) or "returns None" in error.message:
        return " (yours returned None)"
    return f" (yours raised {error.message.split('raised ', 1)[-1]})"


#: How many wrong tries of one exercise get their diagnosis; later ones are told only "not right"
#: and where to reread. Beyond a few tries a diagnosis that names wrong items or says which way to
#: move would let a loop over answers find the right one without the work (a search).
EXPLAINED_TRIES = 3
#: The rule in the words each limited exercise states it.
TRIES_RULE = "the checker explains your first three tries; after that it says right or wrong"
_wrong_tries: dict[str, int] = {}  # checker name -> wrong, judged answers so far in this kernel


def wrong_tries(checker: Callable | str) -> int:
    """How many wrong answers ``checker`` (a function wrapped by :func:`explained_tries`) has
    judged in this kernel: form errors and right answers do not count. A label of
    :func:`count_try` (a str) gives its count."""
    return _wrong_tries.get(_key(checker), 0)


def _key(checker: Callable | str) -> str:
    if isinstance(checker, str):  # a label of count_try
        return checker
    return f"{getattr(checker, '__module__', '')}.{getattr(checker, '__qualname__', checker)}"


def count_try(label: str) -> int:
    """Count one more try of ``label`` (a checker's name for one slip, e.g. "nb03.segments") in
    this kernel and return the count: for a hint that names more from the second try on.
    Forgotten by :func:`reset_tries`, as by a restarted kernel."""
    _wrong_tries[label] = _wrong_tries.get(label, 0) + 1
    return _wrong_tries[label]


def reset_tries() -> None:
    """Forget every checker's count of wrong tries, as a restarted kernel does (for tests)."""
    _wrong_tries.clear()


def explained_tries(reread: str) -> Callable[[Callable[..., Feedback]], Callable[..., Feedback]]:
    """Decorator for a checker whose diagnosis could steer a search: its first EXPLAINED_TRIES
    wrong answers get the checker's own message (marked "explained try k of 3"); every later
    wrong answer gets one and the same message, "not right" and ``reread`` (e.g. "section 5"),
    whatever the answer. A right answer always passes; a form error (:func:`form_error`) is
    always explained and never counted; the last wrong answer checked again gets its message
    again, noted, uncounted (:mod:`bertlib.exercises.ladder`). Per checker, in this kernel."""
    def wrap(check: Callable[..., Feedback]) -> Callable[..., Feedback]:
        @functools.wraps(check)
        def checked(*args, **kwargs) -> Feedback:
            from bertlib.exercises import ladder  # an import cycle: ladder imports this module
            verdict, name = check(*args, **kwargs), _key(checked)
            if verdict.ok or verdict.form:
                return verdict
            answer = ladder.arguments(check, args, kwargs)  # by name: a keyword or not, the same
            if (said := ladder.said_before(name, answer)) is not None:
                return Feedback(False, said + ladder.UNCHANGED_TRY)
            tries = _wrong_tries[name] = _wrong_tries.get(name, 0) + 1
            message = (f"{verdict.message} (explained try {tries} of {EXPLAINED_TRIES})"
                       if tries <= EXPLAINED_TRIES else f"not right. Only the first "
                       f"{EXPLAINED_TRIES} tries are explained; from now on: right or wrong. "
                       f"Reread {reread}, work the answer out, then check it")
            ladder.remember(name, answer, message)
            return Feedback(False, message)
        return checked
    return wrap
