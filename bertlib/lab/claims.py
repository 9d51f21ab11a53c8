"""Claims about the bundled model's own numbers, checked only where they are about that model.

The prose of a notebook states facts measured on the bundled all-MiniLM-L6-v2 ("head 3 of layer 2
puts 0.61 of its attention on the previous token"). Under another BERT (``BERTLIB_MODEL``) such a
fact is not expected to hold, so a notebook states it through :func:`claim`:

- with the bundled model, ``claim`` is an ``assert``: the notebook fails the day the fact stops
  being true;
- with any other model it prints what was measured beside what the prose says, and that the
  prose's number is for the bundled model. Never a silent skip.

Facts that hold for every BERT (rows sum to 1, the numpy BERT equals transformers) are plain
``assert`` statements in the notebooks, not claims.

**A finding holds beyond one draw.** A claim about how a model or attention behaves is measured
over a set (corpus sentences, at least 20 pairs, at least 3 seeds) and stated with its spread:
:func:`spread` gives the mean, a bootstrap 95 % interval, the range and, for a per-sample test,
how many samples it holds in; :func:`claim_over` states and checks a claim with that spread
printed beside it. One sentence is an illustration, labelled as one, next to the number over
the set. A claim that depends on a threshold shows the sweep (:func:`sweep`).

The claims of notebook 09 are about its committed training runs, not about a pretrained BERT: a
:class:`Subject` names what a claim is about and whether the prose's numbers are its own.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from bertlib.checks import as_array, check_finite, has_shape, items, kind, number, text, whole
from bertlib.hf.loading import BUNDLED_NAME, LoadedBert, bundled_model_path

__all__ = ["is_bundled", "claim", "Subject", "Spread", "spread", "bootstrap_interval",
           "claim_over", "sweep", "chance_interval"]


@dataclass(frozen=True)
class Subject:
    """What a claim is about, when it is not a pretrained BERT (notebook 09's training runs).

    name: shown in the report (e.g. "the runs in /tmp/seed7"). is_reference: True when the prose's
    numbers were measured on this subject (the committed runs), so a false claim raises.
    reference: what the prose's numbers are about (e.g. "the 5 committed runs").
    """

    name: str
    is_reference: bool
    reference: str


def is_bundled(bert: LoadedBert) -> bool:
    """True when ``bert`` is the bundled all-MiniLM-L6-v2 (by name, or loaded from its folder)."""
    kind(bert, "bert", LoadedBert, "the LoadedBert that load_bert() returns")
    if bert.name == BUNDLED_NAME:
        return True
    folder = os.path.realpath(os.path.expanduser(bert.name))
    return os.path.isdir(folder) and folder == os.path.realpath(bundled_model_path())


def _reference(subject) -> tuple[bool, str, str]:
    """(is the prose about this subject, its name, what the prose is about)."""
    if isinstance(subject, Subject):
        return subject.is_reference, subject.name, subject.reference
    return is_bundled(subject), getattr(subject, "name", ""), f"bundled {BUNDLED_NAME}"


def claim(bert: LoadedBert | Subject, statement: str, holds: bool, measured=None,
          cases: int | None = None, none: str = "nothing to check", about: str | None = None
          ) -> bool:
    """Check a fact the prose states about the bundled model's own numbers.

    bert: the LoadedBert the notebook uses (or a :class:`Subject`, e.g. notebook 09's runs).
    statement: the fact in words, as the prose says it.
    holds: whether it is true of the numbers just measured. measured: what was measured (shown
    in the message). With the bundled model, raises AssertionError when ``holds`` is false; with
    any other model, prints the measured value and that the prose's number is for the bundled
    model. Returns ``holds``.
    cases: for a claim about every member of a set ("in every relay run ..."), the set's size.
    An empty set makes the claim vacuous: with the reference it raises (the prose speaks of
    members), with any other model it prints ``none`` (e.g. "no relay run, nothing to check"),
    never "also holds", and returns False.
    about: what the prose's statement was measured on, when not the model or runs it is checked
    on (e.g. the histories of seeds trained beside the committed runs); the message names it.
    A :class:`Subject`'s messages start "[other runs]", a model's "[other model]".
    """
    text(statement, "statement (the claim in words)")
    if not isinstance(bert, Subject):
        kind(bert, "bert", LoadedBert, "the LoadedBert that load_bert() returns, or a Subject")
    holds = bool(holds)
    shown = "" if measured is None else f" (measured: {measured})"
    reference, name, subject_about = _reference(bert)
    about = subject_about if about is None else text(about, "about (what it was measured on)")
    tag = "[other runs]" if isinstance(bert, Subject) else "[other model]"
    empty = cases is not None and whole(cases, "cases (the size of the set)", 0) == 0
    if reference:
        assert not empty, f"claim about an empty set for the {about}: {statement}"
        assert holds, f"claim no longer true for the {about}: {statement}{shown}"
        return holds
    if empty:
        print(f"{tag} '{statement}' was measured on the {about}; with {name}: "
              f"{text(none, 'none (what to say about an empty set)')}.")
        return False
    verdict = "also holds" if holds else "does not hold"
    print(f"{tag} '{statement}' was measured on the {about}; with "
          f"{name} it {verdict}{shown}.")
    return holds


def bootstrap_interval(values, level: float = 0.95, n_boot: int = 2000, seed: int = 0,
                       statistic: Callable = np.mean) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic`` (default: the mean) of ``values``.

    values: (n,) or (n, ...) array, one row per sample (resampled with replacement, n rows at a
    time, ``n_boot`` times, from a seeded generator, so the interval is reproducible).
    statistic: maps an array of rows to one number (axis 0 is the samples), e.g. a paired
    difference ``lambda rows: np.mean(rows[:, 0] - rows[:, 1])``. Returns (lo, hi).
    """
    values = as_array(values, "values", min_ndim=1)
    check_finite(values, "values")
    whole(len(values), "the number of values", low=2, why="(a spread needs two samples)")
    number(level, "level", 0, 1, open_low=True)
    whole(n_boot, "n_boot", low=100)
    rows = np.random.default_rng(seed).integers(0, len(values), size=(n_boot, len(values)))
    stats = np.array([statistic(values[r]) for r in rows], dtype=float)
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(stats, [tail, 100 - tail])
    return float(lo), float(hi)


@dataclass(frozen=True)
class Spread:
    """A measurement over a set: its mean, bootstrap interval, range and how many samples hold.

    held is None when no per-sample test was given. ``str(spread)`` reads
    "0.62 (95 % CI 0.58–0.66, range 0.31–0.90, n = 64; holds in 60 of 64)".
    """

    n: int
    mean: float
    lo: float
    hi: float
    min: float
    max: float
    held: int | None
    level: float = 0.95
    precision: int = 2

    def __str__(self) -> str:
        f = f".{self.precision}f"
        held = "" if self.held is None else f"; holds in {self.held} of {self.n}"
        return (f"{self.mean:{f}} ({self.level:.0%} CI {self.lo:{f}}–{self.hi:{f}}, "
                f"range {self.min:{f}}–{self.max:{f}}, n = {self.n}{held})").replace("%", " %", 1)


def spread(values, holds_each: Callable | Sequence | None = None, level: float = 0.95,
           n_boot: int = 2000, seed: int = 0, precision: int = 2, groups=None) -> Spread:
    """The spread of one measurement over a set of samples.

    values: (n,) numbers, one per sample (n >= 2). holds_each: a per-sample test, either a
    function of one value (``lambda v: v > 0.5``) or (n,) booleans; counted into ``held``.
    groups: None, or (n,) a group label per value, for samples that are not independent (e.g.
    links of pairs that share a sentence): the interval then resamples whole groups (a cluster
    bootstrap; at least 2 groups). Returns a :class:`Spread` with the mean, the bootstrap
    interval of the mean at ``level``, the minimum and maximum.
    """
    values = as_array(values, "values", ndim=1).astype(float)
    lo, hi = bootstrap_interval(values, level, n_boot, seed) if groups is None else \
        _group_interval(values, groups, level, n_boot, seed)
    held = None
    if holds_each is not None:
        each = [holds_each(v) for v in values] if callable(holds_each) else list(holds_each)
        has_shape(np.asarray(each), "holds_each", (len(values),), "(n,)",
                  "(one verdict per value)")
        held = int(sum(bool(e) for e in each))
    whole(precision, "precision", low=0, high=8)
    return Spread(len(values), float(values.mean()), lo, hi, float(values.min()),
                  float(values.max()), held, level, precision)


def _group_interval(values: np.ndarray, groups, level, n_boot, seed) -> tuple[float, float]:
    """The bootstrap interval of the mean of ``values`` drawing whole groups (sorted labels)."""
    labels = np.asarray(groups)
    has_shape(labels, "groups", (len(values),), "(n,)", "(one group label per value)")
    members = [np.flatnonzero(labels == g) for g in np.unique(labels)]
    whole(len(members), "the number of groups", low=2, why="(a spread needs two)")
    return bootstrap_interval(np.arange(len(members)), level, n_boot, seed, statistic=lambda drawn:
                              values[np.concatenate([members[int(g)] for g in drawn])].mean())


def claim_over(bert: LoadedBert | Subject, statement: str, values,
               holds: Callable[[Spread], bool], holds_each: Callable | Sequence | None = None,
               **spread_options) -> Spread:
    """State a claim measured over a set, print it with its spread, and check it like ``claim``.

    values: (n,) one measurement per sample (sentence, pair, seed). holds: the claim as a test of
    the :class:`Spread` (e.g. ``lambda s: s.lo > 0.5``: the whole interval above 0.5, or
    ``lambda s: s.held == s.n``: in every sample). holds_each: optional per-sample test, counted
    into ``held``. spread_options: those of :func:`spread`, e.g. ``groups`` for samples that
    come in groups. Prints "statement: <spread>" and returns the Spread.
    """
    text(statement, "statement (the claim in words)")
    kind(holds, "holds", Callable, "a function of the Spread (e.g. lambda s: s.lo > 0.5)")
    result = spread(values, holds_each, **spread_options)
    print(f"{statement}: {result}")
    claim(bert, statement, holds(result), measured=str(result))
    return result


def sweep(thresholds, measure: Callable, name: str = "threshold") -> list[tuple[float, object]]:
    """A claim that depends on a threshold, shown for every threshold.

    thresholds: (k,) numbers. measure: a function of one threshold giving the verdict or count
    at that threshold. name: what each line calls the value swept (e.g. "fraction f", "k").
    Prints one line per threshold and returns [(threshold, result), ...], so the prose can say
    where the verdict changes.
    """
    thresholds = items(list(np.asarray(thresholds, dtype=float)), "thresholds", "numbers")
    name = text(name, "name (what the swept value is called)")
    rows = [(float(t), measure(float(t))) for t in thresholds]
    for t, result in rows:
        print(f"  {name} {t:g}: {result}")
    return rows


def chance_interval(n: int, p: float = 0.5, level: float = 0.95) -> tuple[float, float]:
    """Where the accuracy of a guesser that is right with probability ``p`` on each of ``n``
    independent rows falls with probability at least ``level`` (exact binomial quantiles; the
    default p = 0.5 is a coin). An accuracy outside (lo, hi) on n rows is beyond that noise.
    Returns (lo, hi) as accuracies in [0, 1]."""
    whole(n, "n (the number of rows)", low=1)
    p = min(number(p, "p", 0, 1, open_low=True), 1 - 1e-12)  # p = 1: every row right
    level = number(level, "level", 0, 1, open_low=True)
    cdf = np.cumsum(np.exp(_binomial_log_pmf(n, p)))
    tail = (1 - level) / 2
    lo, hi = (min(int(np.searchsorted(cdf, q)), n) for q in (tail, 1 - tail))
    return lo / n, hi / n


def _binomial_log_pmf(n: int, p: float, top: int | None = None) -> np.ndarray:
    """log P(X = k) for k = 0..top (default n), X ~ Binomial(n, p), 0 < p < 1 (in logs: no
    overflow for large n)."""
    k = np.arange((n if top is None else top) + 1)
    lgamma = np.vectorize(math.lgamma)  # log of the factorials in the binomial coefficient
    return (math.lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1)
            + k * np.log(p) + (n - k) * np.log1p(-p))


def _binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), 0 < p < 1."""
    return float(np.exp(_binomial_log_pmf(n, p, top=k)).sum())


def proportion_interval(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) ``level`` interval for the share behind a count of ``k`` of
    ``n``: every share p for which seeing k or fewer, and k or more, is not rarer than
    (1 - level) / 2. Unlike a bootstrap it has a width at 0 of n and n of n (30 of 30 gives
    about 0.88-1.00). Returns (lo, hi) in [0, 1]."""
    n = whole(n, "n (the number of cases counted)", low=1)
    k = whole(k, "k (the count)", low=0, high=n, why=f"(of n = {n})")
    tail = (1 - number(level, "level", 0, 1, open_low=True)) / 2

    def solve(above):  # bisection on p for the tail probability = `tail`
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            gone = above(mid) < tail  # the tail at mid is rarer than allowed
            lo, hi = (lo, mid) if gone == (above is upper) else (mid, hi)
        return (lo + hi) / 2

    def lower(p):  # P(X >= k): small when p is too low
        return 1 - _binomial_cdf(k - 1, n, p)

    def upper(p):  # P(X <= k): small when p is too high
        return _binomial_cdf(k, n, p)

    return (0.0 if k == 0 else solve(lower)), (1.0 if k == n else solve(upper))
