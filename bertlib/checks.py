"""Input checks, in one place: each public bertlib function checks its inputs once, at the edge.

A public function starts with a line or two from here, then reads like the formula it implements;
the private functions it calls (layer to layer, head to head) trust their arguments. Every check
raises ``TypeError`` for the wrong kind of thing and ``ValueError`` for a value out of range, with
a message that names the argument, the valid range and what was given, e.g.

    layer must be a whole number in 0..5 (6 layers), got 7
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["whole", "number", "one_of", "kind", "text", "items", "as_array", "has_shape",
           "check_finite", "same_shape", "heads_dividing", "vocab_ids", "attention_stack",
           "attention_rows", "window", "positions", "within_positions", "bool_mask",
           "check_qkv_shapes", "padding_flags", "one_mask_token", "token_batch", "IGNORE_INDEX"]

#: The masked-LM label of a position the loss ignores (the PyTorch / transformers convention),
#: defined once: bertlib.paper.mlm's labels carry it and token_batch checks around it.
IGNORE_INDEX = -100


def _span(low, high) -> str:
    if high is None:
        return f">= {low}"
    return f"in {low}..{high}" if low is not None else f"<= {high}"


def whole(value, name: str, low: int | None = 0, high: int | None = None, why: str = "") -> int:
    """``value`` as an int in ``low..high`` (either end None = open).

    why: a few words on where the range comes from, shown in the message, e.g. "(6 layers)".
    Raises TypeError for a non-integer (bools included), ValueError outside the range.
    """
    why = f" {why}" if why else ""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be a whole number {_span(low, high)}{why}, got {value!r}")
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"{name} must be a whole number {_span(low, high)}{why}, got {value}")
    return int(value)


def number(value, name: str, low: float | None = None, high: float | None = None, *,
           open_low: bool = False, why: str = "") -> float:
    """``value`` as a finite float in ``[low, high]`` (``(low, high]`` when ``open_low``).

    Raises TypeError for a non-number (bools included), ValueError for NaN, ±inf or a value
    outside the range.
    """
    why = f" {why}" if why else ""
    left = "(" if open_low else "["
    span = f"in {left}{low}, {high}]" if low is not None and high is not None else (
        f"{'>' if open_low else '>='} {low}" if low is not None else
        f"<= {high}" if high is not None else "finite")
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise TypeError(f"{name} must be a number {span}{why}, got {value!r}")
    value = float(value)
    if not np.isfinite(value) or (low is not None and (value <= low if open_low else value < low)) \
            or (high is not None and value > high):
        raise ValueError(f"{name} must be a number {span}{why}, got {value!r}")
    return value


def one_of(value, name: str, choices: Sequence):
    """``value`` if it is one of ``choices``; otherwise a ValueError listing them."""
    try:
        ok = value in choices
    except TypeError:  # an unhashable value against a set or dict of choices
        ok = False
    if not ok:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value


def kind(value, name: str, types: type | tuple[type, ...], what: str):
    """``value`` if it is an instance of ``types``; otherwise a TypeError saying ``what`` it must
    be (e.g. "a numpy Generator (np.random.default_rng(seed))") and what it is."""
    if not isinstance(value, types):
        raise TypeError(f"{name} must be {what}, got {type(value).__name__}")
    return value


def text(value, name: str) -> str:
    """``value`` if it is a string with something in it: TypeError for a non-string, ValueError
    for an empty or whitespace-only one."""
    kind(value, name, str, "a string")
    if not value.strip():
        raise ValueError(f"{name} is empty or only whitespace: type a sentence")
    return value


def items(values, name: str, what: str) -> list:
    """``values`` (a list or tuple, not a string) as a non-empty list.

    what: what the list holds, for the message, e.g. "sentences". Raises TypeError for a string
    or a non-sequence, ValueError for an empty list.
    """
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise TypeError(f"{name} must be a list of {what}, got {type(values).__name__} "
                        f"{values!r:.60}")
    if len(values) == 0:
        raise ValueError(f"{name} must be a non-empty list of {what}, got an empty one")
    return list(values)


def check_finite(x, name: str) -> None:
    """Raise ValueError if ``x`` (an array or a torch tensor, any shape) holds NaN or ±inf, saying
    how many and where first. A tensor is checked where it lives (no copy to numpy)."""
    tensor = hasattr(x, "isfinite")
    bad = ~x.isfinite() if tensor else ~np.isfinite(x)
    if bad.any():
        first = tuple(int(i) for i in (bad.nonzero() if tensor else np.argwhere(bad))[0])
        raise ValueError(
            f"{name} contains {int(bad.sum())} NaN/inf value(s) (first at index {first}); "
            "attention needs finite numbers"
        )


def as_array(x, name: str, ndim: int | None = None, *, min_ndim: int = 0, shape: tuple = (),
             layout: str = "", finite: bool = True, why: str = "") -> np.ndarray:
    """``x`` as a float ndarray (float64 unless already floating), checked.

    ndim: the exact number of axes required (None = any, at least ``min_ndim``); shape: the
    exact shape required, as in :func:`has_shape` (ints, None for any length, a leading ``...``
    for any leading axes); layout: the axes' names for the message, e.g. "(n, d)"; why: where a
    required size comes from, e.g. "for 6 tokens". finite: reject NaN and ±inf.
    Raises TypeError for booleans, strings, complex or ragged input; ValueError for the wrong
    number of axes or non-finite values.
    """
    if isinstance(x, np.ndarray) and x.dtype == bool:
        raise TypeError(f"{name} must hold numbers, got a boolean array")
    try:
        arr = x if isinstance(x, np.ndarray) else np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an array of numbers, got {type(x).__name__}") from exc
    if not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating):
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    if not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float64)
    if (ndim is not None and arr.ndim != ndim) or arr.ndim < min_ndim:
        want = f"{ndim}" if ndim is not None else f"at least {min_ndim}"
        raise ValueError(f"{name} must have {want} dimensions {layout}, got shape {arr.shape}"
                         .replace("  ", " "))
    if shape:
        has_shape(arr, name, shape, layout, why)
    if finite:
        check_finite(arr, name)
    return arr


def has_shape(x, name: str, shape: tuple, layout: str = "", why: str = "") -> None:
    """Raise ValueError unless ``x.shape`` (a numpy array or a torch tensor) matches ``shape``.

    shape: ints (that exact length) or None (any length) per axis, optionally after a leading
    ``...`` (any number of leading axes); layout: the axes' names, e.g. "(k, n)", shown with the
    required sizes, e.g. "E must have shape (k, n) = (4, 6), got (4, 5)"; why: where the sizes
    come from, e.g. "for 6 tokens".
    """
    got = tuple(x.shape)
    any_lead = shape[:1] == (...,)
    axes = shape[1:] if any_lead else shape
    fits = len(got) >= len(axes) if any_lead else len(got) == len(axes)
    if fits and all(want in (None, have) for want, have in zip(axes[::-1], got[::-1],
                                                                strict=False)):
        return
    names = [a.strip() for a in layout.strip("()").split(",") if a.strip()][-len(axes):]
    if len(names) != len(axes):
        names = ["?"] * len(axes)
    sizes = ["..."] * any_lead + [name if want is None else str(want)
                                   for want, name in zip(axes, names, strict=True)]
    wanted = f"({', '.join(sizes)}{',' * (len(sizes) == 1)})"
    wanted = f"{layout} = {wanted}" if layout else wanted
    raise ValueError(f"{name} must have shape {wanted}{' ' + why if why else ''}, got {got}")


def same_shape(a, b, names: tuple[str, str]) -> None:
    """Raise ValueError unless arrays (or shapes) ``a`` and ``b`` have the same shape."""
    sa = tuple(a) if isinstance(a, tuple) else np.shape(a)
    sb = tuple(b) if isinstance(b, tuple) else np.shape(b)
    if sa != sb:
        raise ValueError(f"{names[0]} and {names[1]} must have the same shape, got {sa} and {sb}")


def heads_dividing(h, d: int, symbols: tuple[str, str] = ("h", "d")) -> int:
    """``h`` as a whole number ≥ 1 that divides the width ``d`` (every head gets d / h features),
    or a ValueError naming d, h and the valid choices. symbols: what the caller calls h and d,
    e.g. ("heads", "hidden")."""
    hs, ds = symbols
    h = whole(h, f"{hs} (the number of heads)" if hs == "h" else hs, 1)
    if d % h:
        valid = [k for k in range(1, d + 1) if d % k == 0]
        raise ValueError(f"{ds} = {d} is not divisible by {hs} = {h}: every head gets {ds} / {hs} "
                         f"features, so {hs} must divide {ds}. Valid {hs} for {ds} = {d}: {valid}")
    return h


def vocab_ids(ids, name: str, vocab_size: int, ndim: int | None = None,
              what: str = "an array") -> np.ndarray:
    """``ids`` as an integer ndarray whose every id is in ``0..vocab_size − 1``.

    ndim: the exact number of axes required (None = any); what: the expected layout in words for
    the message, e.g. "a 1-D array". Raises TypeError for ids that are not whole numbers,
    ValueError for the wrong number of axes or an id outside the vocabulary (naming the first).
    """
    arr = np.asarray(ids)
    if not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{name} must be {what} of whole numbers (token ids), got dtype "
                        f"{arr.dtype}")
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {what} of whole numbers (token ids), got shape "
                         f"{arr.shape}")
    bad = arr[(arr < 0) | (arr >= vocab_size)]
    if bad.size:
        raise ValueError(f"{name} must be in 0..{vocab_size - 1} (a vocabulary of {vocab_size}), "
                         f"got {bad.flat[0]}")
    return arr


def attention_stack(A, name: str = "attention maps", n: int | None = None,
                    layout: str = "(..., n, n)", why: str = "", ndim: int | None = None
                    ) -> np.ndarray:
    """``A`` as a finite float array of square attention maps (..., n, n), n >= 1: the one check
    of a stack of maps (rows = queries, columns = keys), which every other maps check calls.
    n: the number of tokens, if known; else any n. ndim: the exact number of axes, or None (>= 2).
    ``layout`` and ``why`` name the axes and the sizes' origin in the message."""
    A = as_array(A, name, ndim, min_ndim=2, layout=layout)
    m = whole(A.shape[-1] if n is None else n, f"n, the number of tokens of {name},", 1)
    has_shape(A, name, (..., m, m) if ndim is None else (None,) * (ndim - 2) + (m, m), layout, why)
    return A


def attention_rows(A: np.ndarray, name: str = "attention maps", atol: float = 1e-3,
                   rows_sum_to_one: bool = True, index: str = "(..., query)") -> np.ndarray:
    """The one rule for attention weights: every row of A (..., n_q, n_k) is a distribution over
    the keys, entries in [0, 1] summing to 1, both within ``atol`` (float32 rounding over a few
    hundred keys stays near 1e-6). A: an array already shaped by :func:`attention_stack`.
    rows_sum_to_one=False checks the entries only: for pictures, which also draw weights rounded
    for display (bertviz's 3 decimals move a row's sum by up to n/2 · 10⁻³). index: what the
    axes before the keys are, to name the first row that fails. Returns A, or a ValueError."""
    out_of_range, bad = _off_the_rule(A, atol)
    if out_of_range.any():
        raise ValueError(f"{name} must be attention weights in [0, 1] (within {atol}); entries "
                         f"run from {A.min():.4g} to {A.max():.4g}")
    sums = A.sum(-1)
    if rows_sum_to_one and bad.any():
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"every row of an attention map must sum to 1 (within {atol}); "
                         f"{int(bad.sum())} row(s) do not, e.g. {index} = {at} sums to "
                         f"{sums[at]:.4g}")
    return A


def _off_the_rule(A: np.ndarray, atol: float) -> tuple[np.ndarray, np.ndarray]:
    """Where A breaks the rule of attention weights: (entries outside [0, 1], rows whose sum is
    not 1), both within ``atol``."""
    return (A < -atol) | (A > 1 + atol), np.abs(A.sum(-1) - 1) > atol


def are_attention_weights(A, atol: float = 1e-3) -> bool:
    """Whether A (..., n_q, n_k) keeps :func:`attention_rows`' rule (entries in [0, 1], rows
    summing to 1, within ``atol``): the same rule asked as a question, for a picture that draws
    weights, scores or priors alike and labels only weights; NaN entries (cells not drawn) count
    as 0. Never raises for numbers."""
    out_of_range, bad = _off_the_rule(np.nan_to_num(np.asarray(A, dtype=float)), atol)
    return not (out_of_range.any() or bad.any())


def labels(tokens, n: int, name: str, of: str, each: str = "row") -> list:
    """``tokens`` as a list of n labels, one word piece for each ``each`` ("row", "column") of
    ``of`` (e.g. "maps of size n = 5"): the one check that a map's tokens fit it. A list, tuple
    or array of length n; a string, or anything without a length, is refused (ValueError
    "4 tokens for maps of size n = 5: give a list of word pieces, one per row")."""
    sized = hasattr(tokens, "__len__") and not isinstance(tokens, str | bytes)
    count = len(tokens) if sized else f"a {type(tokens).__name__} of"
    if count != n:
        raise ValueError(f"{count} {name} for {of}: give a list of word pieces, one per {each}")
    return list(tokens)


def window(w, name: str = "w") -> int:
    """A sliding window's width w: a positive even whole number (a token sees w/2 keys on each
    side, w + 1 with itself): the one rule for w, or a ValueError naming the nearest even ones."""
    w = whole(w, f"{name} (the window)", 1)
    if w % 2:
        raise ValueError(f"{name} must be even: a token sees w/2 keys on each side (w + 1 with "
                         f"itself), so an odd {name}={w} has no whole half; use {w - 1} or {w + 1}")
    return w


def positions(values, name: str, n: int) -> np.ndarray:
    """``values`` as a 1-D int array of token positions, each a whole number in 0..n − 1: the one
    rule for positions into n tokens (a negative position is refused, never read as counted from
    the end). May be empty. TypeError for a position that is not a whole number, ValueError for
    more than one axis or a position outside 0..n − 1 (the message names the first)."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D list of positions in 0..{n - 1}, got shape "
                         f"{arr.shape}")
    why = f"(token positions of n = {n} tokens)"
    return np.array([whole(p, f"{name}[{i}]", 0, n - 1, why) for i, p in enumerate(arr.tolist())],
                    dtype=int)


def within_positions(n, limit: int, fix: str = "shorten it", what: str = "the input") -> int:
    """``n`` word pieces (a whole number >= 1) for a model of ``limit`` positions: the one check
    that an input is not too long for the model. fix: what to do about it, e.g. "shorten it";
    what: the input's name, e.g. "an input". Returns n, or a ValueError "the input is n word
    pieces long but this model has limit positions (at most limit pieces including [CLS] and
    [SEP]); shorten it"."""
    n = whole(n, f"the number of word pieces of {what}", 1)
    if n > limit:
        raise ValueError(f"{what} is {n} word pieces long but this model has {limit} positions (at "
                         f"most {limit} pieces including [CLS] and [SEP]); {fix}")
    return n


def bool_mask(mask, shape: tuple[int, ...], layout: str = "(..., n_q, n_k)"):
    """An attention mask (True = may attend): ``mask`` as a bool array that broadcasts to the
    attention scores' ``shape`` (named by ``layout``), or a clear error: the one check of an
    attention mask. A torch bool tensor is checked by its dtype and shape and returned as it is
    (any device); anything else is returned as a numpy array."""
    tensor = type(mask).__module__.startswith("torch")
    if tensor and str(mask.dtype) != "torch.bool":
        raise TypeError(f"mask must be boolean (True = may attend), got dtype {mask.dtype}; "
                        "for a 0/1 tensor use mask.bool()")
    mask = mask if tensor else np.asarray(mask)
    if not tensor and mask.dtype != bool:
        raise TypeError(
            f"mask must be boolean (True = may attend), got dtype {mask.dtype}; "
            "for a 0/1 array use mask.astype(bool)"
        )
    try:
        fits = np.broadcast_shapes(tuple(mask.shape), tuple(shape)) == tuple(shape)
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the scores' shape "
            f"{tuple(shape)} {layout}"
        )
    return mask


def check_qkv_shapes(Q_shape, K_shape, V_shape, names=("Q", "K", "V"), width="d_k"
                     ) -> tuple[int, ...]:
    """The one rule for Q (..., n_q, d_k), K (..., n_k, d_k), V (..., n_k, d_v), numpy or torch:
    Q and K share d_k >= 1 (no attention has empty queries and keys), K and V the keys n_k, and
    the leading (batch, head) axes of all three broadcast. Shapes: tuples or torch.Size; names
    and width: what the caller calls the three and d_k (multi_head_attention checks X, X_kv,
    X_kv of width d). Returns the leading axes they broadcast to; a ValueError names what
    disagrees and every shape, or the valid range of d_k."""
    (Q, K, V), (q, k, v) = (tuple(Q_shape), tuple(K_shape), tuple(V_shape)), names
    try:
        lead = np.broadcast_shapes(Q[:-2], K[:-2], V[:-2])
    except ValueError:
        lead = None
    shapes = dict(zip(names, (Q, K, V), strict=True))  # a name given twice is listed once
    problems = [why for bad, why in (
        (Q[-1] != K[-1], f"{q} and {k} must share {width} (their last axis)"),
        (K[-2] != V[-2], f"{k} and {v} must have the same number of keys n_k (second-last axis)"),
        (lead is None, f"the leading (batch, head) axes of {', '.join(shapes)} do not broadcast"))
        if bad]
    if problems:
        raise ValueError(f"{'; '.join(problems)}: "
                         + ", ".join(f"{name} has shape {shape}" for name, shape in shapes.items()))
    whole(Q[-1], f"{width}, the last axis of {q} and {k},", 1)
    return lead


def padding_flags(flags, name: str = "attention_mask", real_in_each_row: bool = False
                  ) -> np.ndarray:
    """Padding flags, transformers' ``attention_mask`` (1 = real token, 0 = padding; not an
    attention mask of scores), as bool: the one check of 0/1-or-bool flags per token.
    flags: any shape, usually (batch, n). real_in_each_row: every row (last axis) needs a real
    token. Returns a bool array of the flags' shape, or a ValueError naming what is wrong."""
    flags = np.asarray(flags)
    if not (flags.dtype == bool or (np.issubdtype(flags.dtype, np.number)
                                    and np.isin(flags, (0, 1)).all())):
        raise ValueError(f"{name} must hold 0/1 or bool flags (1 = real token, 0 = padding), "
                         f"got shape {flags.shape} and dtype {flags.dtype} with other values")
    flags = flags.astype(bool)
    if real_in_each_row and flags.ndim and not flags.any(axis=-1).all():
        raise ValueError(f"every input needs at least one real token ({name} all 0 in a row)")
    return flags


def one_mask_token(text_: str, mask: str = "[MASK]") -> str:
    """A fill-mask sentence (masked-LM corruption, not an attention mask): ``text_`` if it holds
    ``mask`` exactly once, else a ValueError "the text must contain exactly one [MASK], got k:
    'text'" (TypeError if it is not a string). Returns the text."""
    kind(text_, "text", str, "a string")
    count = text_.count(mask)
    if count != 1:
        raise ValueError(f"the text must contain exactly one {mask}, got {count}: {text_!r}")
    return text_


def token_batch(input_ids, attention_mask, vocab_size: int, labels=None,
                ignore: int = IGNORE_INDEX) -> np.ndarray:
    """A batch for a BERT: input_ids (B, N) ids in 0..vocab_size−1, attention_mask (B, N) 0/1
    padding flags, and labels (B, N) when given (the masked-LM targets: an id, or ``ignore`` where
    no loss is taken). numpy arrays or torch tensors. Returns input_ids as a numpy array;
    TypeError / ValueError naming what is wrong."""
    ids = vocab_ids(input_ids, "input_ids", vocab_size, 2, "a 2-D (B, N) array")
    for name, x in (("attention_mask", attention_mask), ("labels", labels)):
        if x is not None:
            same_shape(np.shape(x), ids.shape, (name, "input_ids"))
    padding_flags(attention_mask)
    if labels is not None:
        y = np.asarray(labels)
        vocab_ids(np.where(y == ignore, 0, y), f"labels (token ids, or {ignore} where no loss is "
                  "taken)", vocab_size)
    return ids
