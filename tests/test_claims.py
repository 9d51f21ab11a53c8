"""bertlib.lab.claims: a claim about the bundled model's numbers is asserted with that model, and only
reported with any other."""

import numpy as np
import pytest

from bertlib.hf.loading import BUNDLED_NAME, LoadedBert, bundled_model_path
from bertlib.lab.claims import (
    Subject,
    bootstrap_interval,
    chance_interval,
    claim,
    claim_over,
    is_bundled,
    proportion_interval,
    spread,
    sweep,
)

BUNDLED = LoadedBert(None, None, BUNDLED_NAME)
OTHER = LoadedBert(None, None, "prajjwal1/bert-tiny")


def test_is_bundled_by_name_or_by_folder():
    assert is_bundled(BUNDLED)
    assert is_bundled(LoadedBert(None, None, bundled_model_path()))
    assert not is_bundled(OTHER)
    with pytest.raises(TypeError, match="bert must be the LoadedBert that load_bert"):
        is_bundled("all-MiniLM-L6-v2")


def test_claim_asserts_for_the_bundled_model_and_reports_for_another(capsys):
    assert claim(BUNDLED, "two is more than one", 2 > 1, measured=2)
    with pytest.raises(AssertionError, match=r"no longer true .*: one is more than two \(measured: 1\)"):
        claim(BUNDLED, "one is more than two", 1 > 2, measured=1)
    assert not claim(OTHER, "one is more than two", 1 > 2, measured=1)
    assert "with prajjwal1/bert-tiny it does not hold (measured: 1)" in capsys.readouterr().out


def test_claim_needs_its_statement_in_words():
    with pytest.raises(ValueError, match="statement .* is empty"):
        claim(BUNDLED, "  ", True)
    with pytest.raises(TypeError, match="statement .* must be a string"):
        claim(BUNDLED, None, True)


def test_bootstrap_interval_brackets_the_mean_and_is_reproducible():
    values = np.random.default_rng(1).normal(0.6, 0.1, size=64)
    lo, hi = bootstrap_interval(values)
    assert lo < values.mean() < hi
    assert (lo, hi) == bootstrap_interval(values)
    assert hi - lo < 0.1  # about 4 standard errors of 0.1 / 8
    wide = bootstrap_interval(values, level=0.99)
    assert wide[0] < lo and wide[1] > hi


def test_bootstrap_interval_of_a_paired_statistic():
    rows = np.stack([np.arange(30.0), np.arange(30.0) - 1], axis=1)
    assert bootstrap_interval(rows, statistic=lambda r: np.mean(r[:, 0] - r[:, 1])) == (1.0, 1.0)


def test_bootstrap_interval_rejects_bad_input():
    with pytest.raises(ValueError, match="number of values must be a whole number >= 2"):
        bootstrap_interval([0.5])
    with pytest.raises(ValueError, match="values"):
        bootstrap_interval([0.5, np.nan])
    with pytest.raises(ValueError, match="level"):
        bootstrap_interval([0.1, 0.2], level=1.5)


def test_spread_counts_where_a_per_sample_test_holds():
    s = spread([0.2, 0.6, 0.7, 0.9], holds_each=lambda v: v > 0.5)
    assert (s.n, s.held, s.min, s.max) == (4, 3, 0.2, 0.9)
    assert "holds in 3 of 4" in str(s) and "95 % CI" in str(s)
    assert spread([1, 2], holds_each=[True, False]).held == 1
    with pytest.raises(ValueError, match=r"holds_each must have shape \(n,\) = \(2,\)"):
        spread([1, 2], holds_each=[True])


def test_groups_resample_whole_groups():
    rng = np.random.default_rng(0)
    shift = np.repeat(rng.normal(size=10), 5)  # 10 groups of 5 values that move together
    values, groups = shift + 0.01 * rng.normal(size=50), np.repeat(np.arange(10), 5)
    alone, grouped = spread(values), spread(values, groups=groups)
    assert (grouped.mean, grouped.min, grouped.n) == (alone.mean, alone.min, alone.n)
    assert grouped.hi - grouped.lo > 1.5 * (alone.hi - alone.lo)  # 10 samples, not 50
    # by hand: the mean of the values of 10 groups drawn with replacement, same generator
    members = [np.flatnonzero(groups == g) for g in range(10)]
    by_hand = bootstrap_interval(np.arange(10), statistic=lambda drawn: values[
        np.concatenate([members[int(g)] for g in drawn])].mean())
    assert (grouped.lo, grouped.hi) == by_hand
    assert spread(values, groups=[f"pair {g}" for g in groups]) == grouped  # any labels
    with pytest.raises(ValueError, match=r"groups must have shape \(n,\) = \(50,\)"):
        spread(values, groups=groups[:3])
    with pytest.raises(ValueError, match="the number of groups must be a whole number >= 2"):
        spread(values, groups=np.zeros(50))


def test_claim_over_prints_the_spread_and_asserts_for_the_reference(capsys):
    s = claim_over(BUNDLED, "shares above 0.5", [0.6, 0.7, 0.8], holds=lambda s: s.min > 0.5)
    assert "shares above 0.5: 0.70" in capsys.readouterr().out
    assert s.held is None
    with pytest.raises(AssertionError, match="shares above 0.9"):
        claim_over(BUNDLED, "shares above 0.9", [0.6, 0.7, 0.8], holds=lambda s: s.min > 0.9)
    claim_over(OTHER, "shares above 0.9", [0.6, 0.7, 0.8], holds=lambda s: s.min > 0.9)
    assert "does not hold" in capsys.readouterr().out
    with pytest.raises(TypeError, match="holds must be a function of the Spread"):
        claim_over(BUNDLED, "x", [1, 2], holds=True)
    s = claim_over(BUNDLED, "grouped", [0.6, 0.7, 0.8, 0.9], holds=lambda s: s.lo > 0.5,
                   groups=[0, 0, 1, 1])
    assert s == spread([0.6, 0.7, 0.8, 0.9], groups=[0, 0, 1, 1])


def test_a_subject_names_what_the_claim_is_about(capsys):
    committed = Subject("the committed runs", True, "5 committed runs")
    fresh = Subject("the runs in /tmp/seed7", False, "5 committed runs")
    assert claim(committed, "holds", True)
    with pytest.raises(AssertionError, match="for the 5 committed runs: fails"):
        claim(committed, "fails", False)
    assert not claim(fresh, "fails", False)
    out = capsys.readouterr().out
    assert "with the runs in /tmp/seed7 it does not hold" in out and "[other runs]" in out
    claim(fresh, "no other seed learns", False, about="histories of 4 other seeds")
    assert "measured on the histories of 4 other seeds; with" in capsys.readouterr().out
    with pytest.raises(TypeError, match="or a Subject"):
        claim("runs", "x", True)


def test_a_claim_over_an_empty_set_says_so_and_never_holds(capsys):
    committed = Subject("the committed runs", True, "5 committed runs")
    fresh = Subject("the runs in /tmp/seed7", False, "5 committed runs")
    assert not claim(fresh, "in every relay run both layers matter", True, "0 of 0", cases=0,
                     none="no relay run, nothing to check")
    out = capsys.readouterr().out
    assert "no relay run, nothing to check" in out and "holds" not in out.split("'")[-1]
    assert claim(fresh, "in every relay run both layers matter", True, "2 of 2", cases=2)
    assert "also holds (measured: 2 of 2)" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="empty set"):
        claim(committed, "in every relay run both layers matter", True, cases=0)
    with pytest.raises(ValueError, match="cases"):
        claim(fresh, "x", True, cases=-1)


def test_sweep_shows_every_threshold(capsys):
    rows = sweep([0.3, 0.4], lambda t: int(t * 10))
    assert rows == [(0.3, 3), (0.4, 4)]
    assert "threshold 0.3: 3" in capsys.readouterr().out


def test_sweep_names_what_it_sweeps(capsys):
    sweep([0.25], lambda f: f * 2, name="fraction f")
    assert capsys.readouterr().out == "  fraction f 0.25: 0.5\n"
    with pytest.raises(ValueError, match="name"):
        sweep([0.25], lambda f: f, name=" ")


def test_chance_interval_holds_a_coins_accuracy_at_its_level():
    lo, hi = chance_interval(93)
    assert 0.39 < lo < 0.41 and 0.59 < hi < 0.61  # 0.5 ± about 1.96 · sqrt(0.25 / 93)
    coins = np.random.default_rng(0).random((4000, 93)) < 0.5
    acc = coins.mean(1)
    inside = ((acc >= lo) & (acc <= hi)).mean()
    assert 0.95 <= inside < 0.99
    assert chance_interval(20, 0.9)[1] == 1.0 and chance_interval(5, 1.0) == (1.0, 1.0)
    with pytest.raises(ValueError, match="n"):
        chance_interval(0)


def test_proportion_interval_is_exact_and_has_a_width_at_all_or_none():
    lo, hi = proportion_interval(30, 30)
    assert hi == 1.0 and 0.88 < lo < 0.89  # (0.025) ** (1 / 30): no zero-width "1.00-1.00"
    lo, hi = proportion_interval(0, 10)  # the mirror image of 10 of 10
    assert lo == 0.0 and hi == pytest.approx(1 - proportion_interval(10, 10)[0])
    lo, hi = proportion_interval(15, 19)
    assert 0.54 < lo < 0.55 and 0.93 < hi < 0.94  # Clopper-Pearson's beta quantiles
    # coverage: the interval holds the true share at least `level` of the time (it is conservative)
    rng = np.random.default_rng(0)
    counts = rng.binomial(40, 0.3, 400)
    inside = np.mean([lo <= 0.3 <= hi for lo, hi in (proportion_interval(int(k), 40) for k in counts)])
    assert inside >= 0.95
    with pytest.raises(ValueError, match="k"):
        proportion_interval(5, 4)
    with pytest.raises(ValueError, match="n"):
        proportion_interval(0, 0)
