"""Tests for the notebook-04 checkers: the right answer passes, each usual mistake is named."""

import numpy as np
import pytest

from bertlib.exercises import nb04


# ---------------------------------------------------------------- share to a token
def share_right(A, tokens, target):
    cols = [j for j, t in enumerate(tokens) if t == target]
    return A[..., cols].sum(-1).mean(-1)


def test_share_to_accepts_the_right_answer():
    fb = nb04.check_share_to(share_right)
    assert fb.ok and "right" in fb.message


def test_share_to_names_the_usual_mistakes():
    n = len(nb04.TOKENS)
    cases = {
        "the queries were summed": lambda A, t, g: n * share_right(A, t, g),
        "two [SEP] tokens were averaged": lambda A, t, g: share_right(A, t, g) / 2,
        "only the first": lambda A, t, g: A[..., t.index(g)].mean(-1),
        "*from* [SEP]": lambda A, t, g: A[..., [j for j, x in enumerate(t) if x == g], :].sum(-1).mean(-1),
        "shape (layers, heads)": lambda A, t, g: share_right(A, t, g).ravel(),
        "raised ZeroDivisionError": lambda A, t, g: 1 / 0,
        "is 0.0000": lambda A, t, g: np.zeros(A.shape[:2]),
    }
    for expected, fn in cases.items():
        fb = nb04.check_share_to(fn)
        assert not fb.ok and expected in fb.message, (expected, fb.message)


# ---------------------------------------------------------------- entropy
def entropy_right(A):
    n = A.shape[-1]
    P = 0.9999 * A + 0.0001 / n
    return -(P * np.log(P)).sum(-1).mean(-1)


def test_entropy_accepts_the_right_answer():
    assert nb04.check_entropy(entropy_right).ok


def test_entropy_names_the_usual_mistakes():
    n = len(nb04.TOKENS)

    def unsmoothed(A):
        with np.errstate(divide="ignore", invalid="ignore"):
            return -(A * np.log(A)).sum(-1).mean(-1)

    def other_smoothing(A):
        P = 0.99 * A + 0.01 / A.shape[-1]
        return -(P * np.log(P)).sum(-1).mean(-1)

    def zero_log_zero_as_zero(A):
        logs = np.log(np.where(A > 0, A, 1.0))
        return -(A * logs).sum(-1).mean(-1)

    cases = {
        "0·log 0 gives NaN": unsmoothed,
        "left out the smoothing": zero_log_zero_as_zero,
        "sign is flipped": lambda A: -entropy_right(A),
        "log base 2": lambda A: entropy_right(A) / np.log(2),
        "summed over the queries": lambda A: n * entropy_right(A),
        "smoothing exactly": other_smoothing,
        "shape (layers, heads)": lambda A: entropy_right(A)[0],
    }
    for expected, fn in cases.items():
        fb = nb04.check_entropy(fn)
        assert not fb.ok and expected in fb.message, (expected, fb.message)


# ---------------------------------------------------------------- rollout
def mixed(A):
    n = A.shape[-1]
    A_l = 0.5 * A.mean(1) + 0.5 * np.eye(n)
    return A_l / A_l.sum(-1, keepdims=True)


def rollout_right(A):
    A_l = mixed(A)
    out = [A_l[0]]
    for layer in range(1, len(A_l)):
        out.append(A_l[layer] @ out[-1])
    return np.stack(out)


def test_rollout_accepts_the_right_answer():
    assert nb04.check_rollout(rollout_right).ok


def test_rollout_names_the_usual_mistakes():
    def no_residual(A):
        A_mean = A.mean(1)
        out = [A_mean[0]]
        for layer in range(1, len(A_mean)):
            out.append(A_mean[layer] @ out[-1])
        return np.stack(out)

    def wrong_order(A):
        A_l = mixed(A)
        out = [A_l[0]]
        for layer in range(1, len(A_l)):
            out.append(out[-1] @ A_l[layer])
        return np.stack(out)

    cases = {
        "add the residual": no_residual,
        "never multiplied": mixed,
        "wrong order": wrong_order,
        "return every layer": lambda A: rollout_right(A)[-1],
        "shape (layers, n, n)": lambda A: rollout_right(A)[:, :2],
        "raised": lambda A: A.undefined_attribute,
        "Check the three steps": lambda A: A.mean(1),  # no residual and no product
    }
    for expected, fn in cases.items():
        fb = nb04.check_rollout(fn)
        assert not fb.ok and expected in fb.message, (expected, fb.message)


# ---------------------------------------------------------------- stubs, predict, design
def test_unsolved_stubs_say_not_answered_without_raising():
    def stub(*args):
        return None

    for check in (nb04.check_share_to, nb04.check_entropy, nb04.check_rollout):
        fb = check(stub)
        assert not fb.ok and "not answered yet" in fb.message
    assert "not answered yet" in nb04.check_sep_prediction(None).message
    assert "not answered yet" in nb04.check_block_map(None).message


def test_sep_prediction_right_wrong_and_bad_word():
    single, pair = nb04.sep_shares()
    truth = "higher" if pair > single else "lower"
    wrong = "lower" if truth == "higher" else "higher"
    assert nb04.check_sep_prediction(truth.upper()).ok
    fb = nb04.check_sep_prediction(wrong)
    assert not fb.ok and f"it is {truth}" in fb.message
    assert "95 % CI" in fb.message and "n = 16" in fb.message  # stated with its spread
    assert "An even spread would give [SEP] 1/n = 0." in fb.message  # chance, to judge the reason
    assert "By chance a pair's [SEP] share would be" in fb.message
    assert '"higher" or "lower"' in nb04.check_sep_prediction("more").message
    singles, pairs = nb04.sep_shares(per_text=True)
    assert (len(singles), len(pairs)) == (16, 16)
    assert np.mean(singles) == pytest.approx(single) and np.mean(pairs) == pytest.approx(pair)


def block_map():
    tokens, seg = nb04.TOKENS, np.array(nb04.SEGMENTS)
    n = len(tokens)
    word = np.array([t not in ("[CLS]", "[SEP]") for t in tokens])
    A = np.zeros((n, n))
    for i in range(n):
        own = word & (seg == seg[i])
        far = own & (np.abs(np.arange(n) - i) > 1)
        keys = far if far.any() else own & (np.arange(n) != i)
        A[i, keys] = 1.0 / keys.sum()
    return A


def test_block_map_design_passes_and_near_misses_say_what_fails():
    assert nb04.check_block_map(block_map()).ok
    n = len(nb04.TOKENS)
    fb = nb04.check_block_map(np.full((n, n), 1.0 / n))
    assert not fb.ok and "too low" in fb.message and "+0.00 over chance" in fb.message
    fb = nb04.check_block_map(np.eye(n))
    assert not fb.ok and "far mass 0.00 < 0.2" in fb.message
    assert "undefined (nan)" in fb.message and "nan is too low" not in fb.message


@pytest.mark.parametrize("A, words", [
    (np.ones((3, 3)) / 3, "(10, 10)"),
    (np.ones((10, 10)), "sums to 10.000"),
    (-np.eye(10), "non-negative"),
    ("abc", "array of numbers"),
])
def test_block_map_bad_input_is_named(A, words):
    fb = nb04.check_block_map(A)
    assert not fb.ok and words in fb.message
