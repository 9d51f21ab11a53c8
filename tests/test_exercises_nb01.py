"""bertlib.exercises.nb01: each checker accepts the right answer, names each typical mistake,
and answers an unsolved stub (None) with "not answered yet" instead of raising."""

import math

import numpy as np
import pytest
import torch

from bertlib import exercises
from bertlib.exercises import Feedback, nb01, reset_tries, wrong_tries
from bertlib.exercises.ladder import UNCHANGED
from bertlib.exercises.nb01 import (
    ATOL,
    PENCIL_ATOL,
    check_attention_fn,
    check_causal_guess,
    check_design,
    check_window_weights,
)
from bertlib.exercises.toy_design import toy_qkv
from bertlib.paper import toy
from bertlib.paper.attention import band, scaled_dot_product_attention, softmax

X = toy.embeddings()
W_Q, W_K, W_V = toy.projections()
Q, K, V = X @ W_Q, X @ W_K, X @ W_V
S = Q @ K.T / math.sqrt(2)


def window_mask(n):  # each word sees itself and its neighbours: the exercise's window
    return band(np.arange(n), np.arange(n), 1)


@pytest.fixture(autouse=True)
def _every_try_explained(monkeypatch):
    reset_tries()  # each test starts as a fresh kernel would, and all its tries are explained
    monkeypatch.setattr(exercises, "EXPLAINED_TRIES", 10**6)


@pytest.mark.parametrize("check", [check_causal_guess, check_attention_fn, check_design,
                                   check_window_weights])
def test_unsolved_stub_says_not_answered_yet(check):
    fb = check(None)
    assert isinstance(fb, Feedback) and not fb and "not answered yet" in str(fb)


def test_causal_guess():
    assert check_causal_guess("cat").ok
    assert "comes after" in check_causal_guess("sat").message
    assert "compare the scores" in check_causal_guess("the").message
    assert 'answer with "cat", "mat", "on", "sat" or "the"' in check_causal_guess("dog").message


def loops(Q, K, V, divide=True, axis=-1, values=True):
    A = softmax(Q @ K.T / (math.sqrt(Q.shape[1]) if divide else 1.0), axis=axis)
    return A @ (V if values else K), A


def test_attention_fn_refuses_bertlibs_own_attention_however_it_is_reached():
    # learner 21: the task says "no bertlib", yet bertlib's attention was called correct; the
    # detection is notebook 02's (one definition: bertlib.exercises.calls_library)
    import functools

    from bertlib.paper import attention

    def helper(Q, K, V):
        return scaled_dot_product_attention(Q, K, V)

    def outer(Q, K, V):  # the library call one helper deeper
        Z, A = helper(Q, K, V)
        return Z, A

    via_module = eval("lambda Q, K, V: attention.scaled_dot_product_attention(Q, K, V)",
                      {"attention": attention})  # a lambda with no source file
    for fn in (scaled_dot_product_attention, helper, outer, via_module,
               functools.partial(scaled_dot_product_attention)):
        fb = check_attention_fn(fn)
        assert not fb.ok and "bertlib's scaled_dot_product_attention" in fb.message, fn
        assert "with loops" in fb.message


def test_attention_fn_a_learner_function_named_like_bertlibs_is_not_refused():
    def own(Q, K, V):
        return loops(Q, K, V)

    fn = eval("lambda Q, K, V: scaled_dot_product_attention(Q, K, V)",
              {"scaled_dot_product_attention": own})  # their own helper, same name
    assert check_attention_fn(fn).ok


def test_attention_fn_torch_s_function_of_the_same_name_is_not_called_bertlibs():
    # learner 22: F.scaled_dot_product_attention (shown in cell 76) was refused as "bertlib's";
    # the check follows what the code loads, so torch's function is not bertlib's, even where
    # bertlib's is also a global of the notebook
    import torch.nn.functional as F  # noqa: N812 (the usual name)

    fn = eval("lambda Q, K, V: (F.scaled_dot_product_attention(*(torch.tensor(m)[None] for m in "
              "(Q, K, V)))[0].numpy(), None)",
              {"F": F, "torch": torch, "scaled_dot_product_attention": scaled_dot_product_attention})
    assert "bertlib's" not in check_attention_fn(fn).message


def test_fitted_divisor_finds_the_constant_of_a_softmax_and_only_then():
    S = np.random.default_rng(0).normal(size=(4, 5))
    for c in (1.0, math.sqrt(3), 3.0, 0.5):
        assert exercises.fitted_divisor(softmax(S / c, axis=-1), S) == pytest.approx(c)
    assert exercises.fitted_divisor(softmax(S ** 2, axis=-1), S) is None  # not S / c
    assert exercises.fitted_divisor(softmax(S, axis=0), S) is None  # columns, not rows
    assert exercises.fitted_divisor(np.full((4, 5), 0.3), S) is None  # rows not summing to 1
    assert exercises.fitted_divisor(softmax(-S, axis=-1), S) is None  # c < 0: no divisor


def test_attention_fn_accepts_right_answer_and_torch():
    assert check_attention_fn(loops).ok
    assert check_attention_fn(lambda Q, K, V: tuple(
        t.numpy() for t in (lambda A: (A @ torch.tensor(V), A))(
            torch.softmax(torch.tensor(Q @ K.T) / math.sqrt(Q.shape[1]), -1)))).ok


@pytest.mark.parametrize("kwargs, words", [
    ({"divide": False}, "not scaled"),
    ({"axis": 0}, "ROW"),
    ({"values": False}, "averages the keys"),
])
def test_attention_fn_names_mistakes(kwargs, words):
    fb = check_attention_fn(lambda Q, K, V: loops(Q, K, V, **kwargs))
    assert not fb and words in fb.message


def test_attention_fn_reports_exceptions_and_stub_returning_none():
    assert "raised ZeroDivisionError" in check_attention_fn(lambda Q, K, V: 1 / 0).message
    assert "not answered yet" in check_attention_fn(lambda Q, K, V: None).message


def _w_q_only_attempt(lean=3):
    Wq = W_Q.copy()
    Wq[3] = [0, lean]  # a W_Q-only attempt: the query of 'mat' leans on the second key feature
    return Wq


def test_design_explains_why_w_q_alone_cannot_work():
    check_design(_w_q_only_attempt(3))  # the first such try is asked a question (below)
    check_design(_w_q_only_attempt(4))  # the second (a new try) is told which keys to compare
    fb = check_design(_w_q_only_attempt(5))
    assert not fb and "same key" in fb.message and "not yet" in fb.message


def test_design_the_same_try_again_gets_the_same_hint_saying_so():
    # a learner who re-ran the check on an unchanged W_Q climbed the ladder to the reason; now
    # only a new try climbs, and the same try again is told that it is the same answer
    unchanged = "your answer is the same as at your last check"
    first = check_design(_w_q_only_attempt(3)).message
    again = check_design(_w_q_only_attempt(3)).message
    assert "Look at the keys" in first and unchanged not in first
    assert again == first + UNCHANGED and "Compare the key" not in again
    Wq = _w_q_only_attempt(4)
    second = check_design(Wq).message  # a new try climbs
    assert "Compare the key of 'cat'" in second and unchanged not in second
    assert unchanged in check_design(Wq.tolist()).message  # the same numbers as a list
    Wq[3] = [0, 6]  # edited in place, then checked again: a new try
    third = check_design(Wq).message
    assert "same key" in third and unchanged not in third
    fourth = check_design(Wq, W_K).message  # W_K given as the toy's own: the same answer
    assert fourth.endswith(UNCHANGED) and "same key" in fourth
    reset_tries()  # a fresh kernel starts the ladder again, even on the last answer
    assert check_design(Wq).message.count("Look at the keys") == 1


def test_design_first_asks_about_the_keys_then_names_them():
    # learner 26: the first W_Q-only try was told which keys collide and that W_K must change,
    # the whole insight of the exercise; now the first such try is asked to look at the keys
    fb = check_design(_w_q_only_attempt())
    assert not fb.ok and "Look at the keys" in fb.message and "which keys to compare" in fb.message
    assert "same key" not in fb.message and "W_Q alone" not in fb.message
    assert "'on'" not in fb.message and "times the key" not in fb.message
    # learner 30: the second try spelled out the insight; now it only names the keys to compare
    second = check_design(_w_q_only_attempt(4)).message
    assert "Compare the key of 'cat' [0.0, 1.0] with that of 'on' [0.0, 1.0]" in second
    assert "that of 'mat' [0.0, 2.0]" in second and "what follows" in second
    assert "same key" not in second and "times the key" not in second and "W_Q alone" not in second
    assert "same key" in check_design(_w_q_only_attempt(5)).message
    reset_tries()  # a fresh kernel asks the question again
    assert "Look at the keys" in check_design(_w_q_only_attempt()).message


def test_design_accepts_a_solution():
    Wq, Wk = W_Q.copy(), W_K.copy()
    Wq[3], Wk[3] = [-2, 1], [0, -1]
    fb = check_design(Wq, Wk)
    assert fb.ok and "'cat'" in fb.message
    assert "must stay" in check_design(np.zeros((4, 3))).message


def test_the_checkers_window_is_each_word_and_its_neighbours():
    np.testing.assert_array_equal(nb01._window_mask(3), [[1, 1, 0], [1, 1, 1], [0, 1, 1]])
    np.testing.assert_array_equal(nb01._window_mask(6), window_mask(6))


def test_window_weights_right_and_mistakes():
    mask = window_mask(6)
    _, right = scaled_dot_product_attention(Q, K, V, mask=mask)  # independent reference
    assert check_window_weights(right).ok
    assert check_window_weights(torch.tensor(right, dtype=torch.float32)).ok
    assert "after the softmax" in check_window_weights(softmax(S, axis=-1) * mask).message
    fb = check_window_weights(softmax(Q @ K.T, axis=-1, where=mask))
    assert "not scaled" in fb.message and "divide" not in fb.message  # the diagnosis, not the edit
    assert "no mask" in check_window_weights(softmax(S, axis=-1)).message
    assert "transposed" in check_window_weights(right.T).message
    assert "(6, 6)" in check_window_weights(np.ones(6)).message


def test_window_weights_accept_pencil_precision_and_name_the_gap():
    right = softmax(S, axis=-1, where=window_mask(6))
    assert check_window_weights(np.round(right, 3)).ok  # 3 decimals, as worked by pencil
    off = right.copy()
    off[3, 2:5] += [0.01, -0.01, 0.0]  # right positions, sums to 1, values off
    fb = check_window_weights(off)
    assert not fb.ok and "right positions [2, 3, 4]" in fb.message and "0.0100" in fb.message
    neighbours = softmax(S, axis=-1, where=window_mask(6) & ~np.eye(6, dtype=bool))
    fb = check_window_weights(neighbours)
    assert not fb.ok and "a word also sees itself" in fb.message


@pytest.mark.parametrize("e, root", [(2.7, math.sqrt(2)), (math.e, 1.4), (2.72, 1.4)])
def test_window_weights_accept_a_pencils_rounded_e_and_root_without_a_try(e, root):
    # learner 27: weights worked with e ≈ 2.7 or √2 ≈ 1.4, as the exercise invites ("worked by
    # pencil is fine"), were told "give more digits" and cost an explained try
    reset_tries()
    pencil = np.round(softmax(Q @ K.T * math.log(e) / root, axis=-1, where=window_mask(6)), 3)
    assert np.abs(pencil - softmax(S, axis=-1, where=window_mask(6))).max() > PENCIL_ATOL
    assert check_window_weights(pencil).ok
    assert wrong_tries(check_window_weights) == 0


def test_design_names_mats_key_as_a_multiple_of_cats():
    for lean in (3, 4):
        check_design(_w_q_only_attempt(lean))
    fb = check_design(_w_q_only_attempt(5))
    assert not fb and "2 times the key of 'cat'" in fb.message and "W_Q alone" in fb.message


def test_design_refuses_an_answer_that_breaks_cat_to_sat():
    Wq, Wk = W_Q.copy(), W_K.copy()
    Wq[1], Wk[3] = [0, 1], [0, -1]  # "mat" attends to "cat", but "cat" no longer asks for a verb
    fb = check_design(Wq, Wk)
    assert not fb.ok and "lost its verb" in fb.message and "W_Q" in fb.message


def test_design_names_a_w_k_edit_that_breaks_cat_to_sat():
    # learner 30: W_K's noun row set to [5, 5] makes 'cat' attend most to 'mat' ([5, 6]), and the
    # reply spoke only of 'mat'; a W_Q slip that breaks 'cat' was already named
    Wk = W_K.copy()
    Wk[1] = [5, 5]
    fb = check_design(None, Wk)
    assert not fb.ok and "not yet: 'mat' gives 'cat'" in fb.message
    assert "also broke the other half: 'cat' lost its verb: it attends most to 'mat'" in fb.message
    assert "'mat' now has the key [5.0, 6.0] (was [0.0, 2.0])" in fb.message
    assert "'sat' keeps [2.0, 0.0]" in fb.message and "You changed W_K" in fb.message
    assert "lost its verb" not in check_design(_w_q_only_attempt()).message  # 'cat' keeps 'sat'


def test_window_checker_does_not_print_the_right_row():
    keep = np.tri(6, 6, 0, dtype=bool) & ~np.tri(6, 6, -2, dtype=bool)  # i-1 and i only
    fb = check_window_weights(softmax(S, axis=-1, where=keep))
    assert not fb.ok and "row 0 " in fb.message and "its window is positions [0, 1]" in fb.message
    right = softmax(S, axis=-1, where=keep | keep.T)
    assert f"{right[0, 1]:.3f}" not in fb.message  # the missing weight is not handed over


def test_design_with_only_w_k_is_checked_not_unanswered():
    fb = check_design(None, W_K.copy())  # the toy's own W_Q, W_K unchanged: an answer, but wrong
    assert not fb.ok and "not answered" not in fb.message


def test_design_does_not_blame_w_q_when_only_w_k_changed():
    Wk = W_K.copy()
    Wk[:, 1] = 0  # the keys' second column gone: keys tie or become multiples of "cat"'s
    check_design(None, Wk)  # the first such try: a question about the keys
    check_design(None, 2 * Wk)  # the second (a new try, keys tied alike): which keys to compare
    fb = check_design(None, 3 * Wk)
    assert not fb.ok and "Note:" in fb.message
    assert "Changing W_Q alone" not in fb.message and "no W_Q" in fb.message
    assert "Changing W_Q alone" in check_design(_w_q_only_attempt()).message


def test_attention_fn_names_swapped_outputs():
    def swapped(Q, K, V):
        A = softmax(Q @ K.T / np.sqrt(Q.shape[1]), axis=-1)
        return A, A @ V
    fb = check_attention_fn(swapped)
    assert not fb.ok and "order is (Z, A)" in fb.message


def test_attention_fn_rounded_answer_is_named_and_sums_print_the_evidence():
    fb = check_attention_fn(lambda Q, K, V: tuple(np.round(x, 3) for x in loops(Q, K, V)))
    assert not fb and "rounded" in fb.message and f"{ATOL:g}" in fb.message
    fb = check_attention_fn(lambda Q, K, V: (loops(Q, K, V)[0], 1.1 * loops(Q, K, V)[1]))
    assert not fb and "within" in fb.message and "1.1" in fb.message


def test_design_success_names_a_tie_instead_of_one_word():
    Wq, Wk = W_Q.copy(), W_K.copy()
    Wq[3], Wk[3] = [-2, 1], [0, -1]
    fb = check_design(Wq, Wk)
    w = softmax((X @ Wq) @ (X @ Wk).T / np.sqrt(2), axis=-1)[toy.TOKENS.index("mat")]
    rest = np.delete(w, toy.TOKENS.index("cat"))
    tied = int(np.sum(np.abs(rest - rest.max()) <= 1e-5))
    assert fb.ok and tied > 1 and f"tied at {rest.max():.3f} each" in fb.message
    assert fb.message.count("'the'") == 2  # both 'the's are listed, not one picked out


def test_design_and_window_refuse_complex_input_without_a_numpy_warning():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fb = check_design(W_Q.astype(complex) + 1j)
        assert not fb.ok and "complex" in fb.message
        fb = check_design(None, W_K.astype(complex))
        assert not fb.ok and "W_K has complex" in fb.message
        fb = check_window_weights(np.eye(6) * (1 + 1j))
        assert not fb.ok and "complex" in fb.message


def test_window_weights_names_zero_instead_of_minus_inf_and_ragged_rows():
    S = Q @ K.T / np.sqrt(2)
    fb = check_window_weights(softmax(np.where(window_mask(6), S, 0.0), axis=-1))
    assert not fb.ok and "to 0, not to -inf" in fb.message
    fb = check_window_weights([[1.0] * 6] * 5 + [[1.0] * 5])
    assert not fb.ok and "different lengths" in fb.message and "not an array" not in fb.message
    fb = check_window_weights(np.full((6, 6), np.nan))
    assert not fb.ok and "your weight matrix contains NaN" in fb.message


@pytest.mark.parametrize("divisor, shown", [
    (lambda Q, K, V: math.sqrt(2), "√2.00"),               # the toy's d_k = 2, hard-coded
    (lambda Q, K, V: math.sqrt(V.shape[1]), "√2.00"),      # √d_v
    (lambda Q, K, V: math.sqrt(K.shape[0]), "√5.00"),      # √(number of keys)
])
def test_attention_fn_names_a_wrong_constant_divisor_not_the_scores(divisor, shown):
    def fn(Q, K, V):
        A = softmax(Q @ K.T / divisor(Q, K, V), axis=-1)
        return A @ V, A
    fb = check_attention_fn(fn)
    assert not fb.ok and "scores q_i · k_j are right" in fb.message and "divisor" in fb.message
    # learner 31: √2 typed in (the toy's d_k) was told "2 is d_v" only; both causes are named
    assert shown != "√2.00" or "d_k and d_v in the toy" in fb.message and "typed" in fb.message
    assert shown in fb.message and "length of a query or key vector" in fb.message
    assert "√3" not in fb.message and "1.732" not in fb.message  # learner 33: no number dictated


def test_attention_fn_wrong_scores_are_still_called_wrong_scores():
    def fn(Q, K, V):
        A = softmax((Q @ K.T) ** 2 / math.sqrt(3), axis=-1)
        return A @ V, A
    fb = check_attention_fn(fn)
    assert not fb.ok and "check the scores" in fb.message and "divisor is not" not in fb.message


def test_design_lost_verb_hint_names_the_matrix_changed():
    Wk = W_K.copy()
    Wk[0], Wk[1], Wk[3] = [-3.9, 0.0], [2.17, 1.0], [-2.57, -0.17]  # only W_K: "cat" -> "cat"
    fb = check_design(None, Wk)
    assert not fb.ok and "lost its verb" in fb.message and "You changed W_K" in fb.message
    assert "rows of W_K" in fb.message and "rows of W_Q" not in fb.message
    Wq, Wk = W_Q.copy(), W_K.copy()
    Wq[1], Wk[3] = [0, 1], [0, -1]  # both edited: both are named
    message = check_design(Wq, Wk).message
    assert "W_K edit" in message and "rows of W_Q" in message
    Wq = W_Q.copy()
    Wq[1] = [0, 1]  # only W_Q edited (it fails earlier or names W_Q, never W_K)
    assert "You changed W_K" not in check_design(Wq).message


@pytest.mark.parametrize("bad", [True, 3.0, 0, "W_Q"])
def test_design_names_a_single_value_not_a_shape(bad):
    fb = check_design(bad)
    assert not fb.ok and "single" in fb.message and "(4, 2) matrix" in fb.message
    assert "wrong shape ()" not in fb.message


def test_window_success_text_is_right_for_the_end_words():
    right = softmax(S, axis=-1, where=window_mask(6))
    message = check_window_weights(right).message
    assert "two neighbours only" not in message and "one at either end" in message


def test_design_lost_verb_hint_says_only_keys_that_moved():
    # learner 12: W_Q's noun row and W_K's spatial row edited; the keys of 'sat' and 'cat' stay put
    Wq, Wk = W_Q.copy(), W_K.copy()
    Wq[1], Wk[3] = [0, 1], [0, -1]
    message = check_design(Wq, Wk).message
    assert "lost its verb" in message and "keys moved" not in message
    assert "moved neither the key of 'sat' nor that of 'cat'" in message and "rows of W_Q" in message
    Wk = W_K.copy()
    Wk[0], Wk[1], Wk[3] = [-3.9, 0.0], [2.17, 1.0], [-2.57, -0.17]  # moves 'cat', not 'sat'
    message = check_design(None, Wk).message
    assert "'cat' now has the key [2.17, 1.0] (was [0.0, 1.0])" in message
    assert "'sat' now has" not in message and "'sat' keeps [2.0, 0.0]" in message


def test_attention_fn_names_a_missing_exp_and_another_base():
    from bertlib.exercises.nb01 import check_attention_fn

    def no_exp(Q, K, V):
        S = Q @ K.T / np.sqrt(K.shape[1])
        A = S / S.sum(axis=1, keepdims=True)
        return A @ V, A

    fb = check_attention_fn(no_exp)
    assert not fb.ok and "exponentiates" in fb.message and "check the scores" not in fb.message

    def base_two(Q, K, V):
        E = 2.0 ** (Q @ K.T / np.sqrt(K.shape[1]))
        A = E / E.sum(axis=1, keepdims=True)
        return A @ V, A

    fb = check_attention_fn(base_two)
    assert not fb.ok and "raised 2" in fb.message and "divided them by" not in fb.message


def test_design_on_unchanged_copies_says_nothing_changed_and_gives_no_insight():
    from bertlib.exercises.nb01 import check_design

    W_Q, W_K, _ = toy.projections()
    fb = check_design(W_Q.copy(), W_K.copy())
    assert not fb.ok and "nothing changed yet" in fb.message
    assert "key" not in fb.message.replace("W_K", "") and "times" not in fb.message
    assert "nothing changed yet" in check_design(W_Q.copy()).message


def test_design_asks_about_w_q_only_when_the_query_of_cat_moved():
    from bertlib.exercises.nb01 import check_design

    Wq, Wk = W_Q.copy(), W_K.copy()
    Wq[3], Wk[3], Wk[2] = [-2, 1], [0, -1], [0, 0]  # W_Q row 3 ('mat' only) and the key of 'sat'
    fb = check_design(Wq, Wk)
    assert not fb.ok and "lost its verb" in fb.message and "'sat' now has the key" in fb.message
    assert "which rows of W_Q" not in fb.message  # the query of 'cat' did not move
    Wq[1] = [2, 0]  # now the query of 'cat' moves too
    fb = check_design(Wq, Wk)
    assert "lost its verb" in fb.message and "which rows of W_Q" in fb.message


def test_window_weights_given_scores_names_the_missing_softmax():
    Q, K, _ = toy_qkv()
    S = Q @ K.T / math.sqrt(Q.shape[1])
    for scores in (np.where(window_mask(6), S, 0.0), S):
        fb = check_window_weights(scores)
        assert not fb.ok and "apply the softmax" in fb.message, fb.message


def test_causal_guess_does_not_narrow_the_choices_on_a_wrong_guess():
    from bertlib.exercises.nb01 import check_causal_guess

    right = next(w for w in set(toy.TOKENS) if check_causal_guess(w).ok)
    for wrong in set(toy.TOKENS) - {right}:
        fb = check_causal_guess(wrong)
        assert not fb.ok and "sees only" not in fb.message and "['the', 'cat']" not in fb.message


def test_attention_fn_names_a_divisor_that_is_the_number_of_queries():
    def fn(Q, K, V):  # √(number of queries): an easy slip in a loop over the queries
        A = softmax(Q @ K.T / math.sqrt(len(Q)), axis=-1)
        return A @ V, A
    fb = check_attention_fn(fn)
    assert not fb.ok and "4 is the number of queries" in fb.message


@pytest.mark.parametrize("factor, shown", [
    (2 / math.sqrt(3), "2.00 ×"),   # scores doubled, then divided by √d_k
    (2.0, "3.46 ×"),                # scores doubled, no division at all
    (1 / 1.5, "1.15 ×"),            # divided by 1.5: no √ of any count of these inputs
])
def test_attention_fn_calls_a_constant_factor_a_factor_not_a_divisor(factor, shown):
    def fn(Q, K, V):
        A = softmax(Q @ K.T * factor, axis=-1)
        return A @ V, A
    fb = check_attention_fn(fn)
    assert not fb.ok and f"your scores are {shown} the right ones" in fb.message
    assert "you divided them by" not in fb.message


def test_window_weights_names_windowed_scores_passed_for_weights():
    scores = np.where(window_mask(6), S, -np.inf)
    for given in (scores, scores.tolist(), torch.tensor(scores)):
        fb = check_window_weights(given)
        assert not fb.ok and "windowed scores" in fb.message and "softmax" in fb.message
        assert "NaN" not in fb.message


def test_attention_fn_catches_sizes_typed_in_and_names_them():
    def typed(Q, K, V):  # right for the first try only: its sizes are typed in
        A = softmax(np.array([[Q[i] @ K[j] for j in range(5)] for i in range(4)]) / math.sqrt(3),
                    axis=-1)
        return A @ V[:5], A

    fb = check_attention_fn(typed)
    assert not fb.ok and "4 queries, 5 keys, d_k = 3" in fb.message and "typed in" in fb.message
    fb = check_attention_fn(lambda Q, K, V: loops(Q, K, V) if len(Q) == 4 else 1 / 0)
    assert not fb.ok and "raised ZeroDivisionError" in fb.message and "6 queries" in fb.message
    assert "6 queries, 7 keys" in check_attention_fn(loops).message


def test_window_weights_zeros_are_told_rows_sum_to_0_and_first_wrong_row_is_named():
    fb = check_window_weights(np.zeros((6, 6)))
    assert not fb.ok and "every row" in fb.message and "sums to 0" in fb.message
    assert "itself" not in fb.message
    fb = check_window_weights(np.eye(6))
    assert not fb.ok and fb.message.startswith("row 0 ")
    fb = check_window_weights(np.full((6, 6), None))
    assert "None, not numbers" in fb.message and "NaN" not in fb.message


def test_design_a_flat_row_of_cat_is_called_a_tie_of_all_its_words():
    # learner 24: a zero query for 'cat' (a flat row) was told "evenly between 'sat' and 'the'
    # (0.167), 'sat' gets 0.167": every word ties, and the message must say so
    W_Q, W_K, _ = (m.copy() for m in toy.projections())
    W_K[3] = [0, -1]
    W_Q[1], W_Q[3] = [0, 0], [0, 5]
    message = check_design(W_Q, W_K).message
    assert "lost its verb" in message and "evenly among" in message, message
    assert all(repr(word) in message.split("evenly among")[1].split("(")[0] for word in toy.TOKENS)
    assert "'sat' gets" not in message, message


def test_window_weights_name_the_model_width_divisor_without_the_weights():
    # issue 26: scores divided by √d (d = X's 4 columns, the whole model's width) instead of √d_k
    # got a generic message; the lesson's √d pitfall (section 10) is now named, d against d_k
    mask = window_mask(6)
    d, d_k = X.shape[1], Q.shape[1]
    assert d != d_k  # the toy: a width of 4, heads of 2
    fb = check_window_weights(softmax(Q @ K.T / math.sqrt(d), axis=-1, where=mask))
    assert not fb.ok and f"√d = √{d}" in fb.message and "√d_k" in fb.message, fb.message
    assert "pitfall" in fb.message and "width of X" in fb.message
    assert f"d_k = {d_k} itself" in fb.message  # here √d is also d_k: both slips read the same
    right = softmax(S, axis=-1, where=mask)
    assert not any(f"{w:.3f}" in fb.message for w in right[mask] if 0 < w < 1)  # no weight given
    assert "pitfall" not in check_window_weights(softmax(S / 3, axis=-1, where=mask)).message


def test_window_weights_name_section_3s_scores_and_give_more_digits_only_when_close():
    # learner 26: X Xᵀ (section 3's scores) windowed got "recompute ..., or give more digits"
    # for an error of 0.34; the wrong scores are named, and digits are asked for only when the
    # values are close
    mask = window_mask(6)
    for divisor in (1.0, math.sqrt(2)):
        fb = check_window_weights(softmax(X @ X.T / divisor, axis=-1, where=mask))
        assert not fb.ok and "X Xᵀ" in fb.message and "Q Kᵀ" in fb.message, fb.message
        assert "digits" not in fb.message
    right = softmax(S, axis=-1, where=mask)
    near = right.copy()
    near[3, 2:5] += [0.006, -0.006, 0.0]  # beyond a pencil's rounding, of its size: more digits
    fb = check_window_weights(near)
    assert not fb.ok and fb.form and "keep 3 decimals in every step" in fb.message, fb.message
    far = right.copy()
    far[3, 2:5] += [0.2, -0.2, 0.0]
    fb = check_window_weights(far)
    assert not fb.ok and "digits" not in fb.message and "recompute" in fb.message, fb.message
    fb = check_window_weights(softmax(Q @ K.T / 2, axis=-1, where=mask))  # √d: no optional section
    assert "section 10" not in fb.message and "width of X" in fb.message


def test_window_weights_negative_or_placeholder_weights_are_a_form_not_a_try(monkeypatch):
    monkeypatch.setattr(exercises, "EXPLAINED_TRIES", 3)
    reset_tries()
    for _ in range(4):
        fb = check_window_weights(-np.eye(6))
        assert not fb.ok and fb.form and "never negative" in fb.message, fb.message
        assert "-1.000" in fb.message and "explained try" not in fb.message
        fb = check_window_weights(np.zeros((6, 6)))
        assert not fb.ok and fb.form and "placeholder" in fb.message
    assert exercises.wrong_tries(check_window_weights) == 0
    assert check_window_weights(np.eye(6)).message.endswith("(explained try 1 of 3)")


def test_attention_fn_takes_a_list_of_two_and_names_what_else_came_back():
    # learner 26: `return [Z, A]` was told "return two things"; it is two things, and passes
    assert check_attention_fn(lambda Q, K, V: list(loops(Q, K, V))).ok
    for returned, said in (((1, 2, 3), "a tuple of 3 things"), ({"Z": 1}, "a dict"),
                           ("ZA", "a str"), (np.zeros((4, 2)), "one array of shape (4, 2)")):
        fb = check_attention_fn(lambda Q, K, V, r=returned: r)
        assert not fb.ok and f"returned {said}" in fb.message and "(Z, A)" in fb.message, said
    fb = check_attention_fn(lambda Q, K, V: (None, loops(Q, K, V)[1]))
    assert "not answered yet" in fb.message and "None for Z" in fb.message
    fb = check_attention_fn(lambda Q, K, V: (loops(Q, K, V)[0], None))
    assert "not answered yet" in fb.message and "None for A" in fb.message


def test_attention_fn_a_softmax_applied_twice_is_not_called_wrong_scores():
    def twice(Q, K, V):
        A = softmax(softmax(Q @ K.T / math.sqrt(Q.shape[1]), axis=-1), axis=-1)
        return A @ V, A
    fb = check_attention_fn(twice)
    assert not fb.ok and "softmax of a softmax" in fb.message and "scores and divisor are right" \
        in fb.message and "check the scores" not in fb.message, fb.message


def test_design_names_rows_of_different_lengths():
    fb = check_design([[1, 2], [3]])
    assert not fb.ok and "the rows of W_Q have different lengths" in fb.message
    assert "row 1 has 1" in fb.message and "got list" not in fb.message
    fb = check_design(None, [[0, 0], [0, 1], [2], [0, 1]])
    assert "the rows of W_K have different lengths" in fb.message and "row 2 has 1" in fb.message


def test_attention_fn_loops_written_but_no_return_are_asked_about_return():
    # learner 28: a function whose loops were all written but that returned nothing was told
    # "not answered yet: fill it in"; it was filled in, and the slip is a missing `return`
    def no_return(Q, K, V):
        A = softmax(Q @ K.T / math.sqrt(len(Q[0])), axis=-1)
        Z = A @ V  # noqa: F841 (computed, never returned: the slip)

    def stub(Q, K, V):
        # your loops here; return (Z, A) as nested lists or arrays
        return None

    fb = check_attention_fn(no_return)
    assert not fb.ok and "did you forget `return`?" in fb.message, fb.message
    assert "not answered" not in fb.message and "fill it in" not in fb.message
    assert "not answered yet" in check_attention_fn(stub).message  # the untouched stub


def _one_short(Q, K, V, short="keys"):
    """Loops whose key loop (or query loop) stops one early, A starting as zeros."""
    n_q, n_k = len(Q), len(K)
    A = np.zeros((n_q, n_k))
    for i in range(n_q - (short == "queries")):
        e = [math.exp(Q[i] @ K[j] / math.sqrt(len(Q[0]))) for j in range(n_k - (short == "keys"))]
        A[i, :len(e)] = np.array(e) / sum(e)
    return A @ V, A


def test_attention_fn_names_a_loop_that_stops_one_key_or_one_query_short():
    # learner 28: range(n_k - 1) left the last column of A at 0 and got "nor a slip this checker
    # knows"; the checker names the loop, not the code to write
    fb = check_attention_fn(_one_short)
    assert not fb.ok and "the last key (key 4)" in fb.message and "loop over the keys" in \
        fb.message and "range(" not in fb.message, fb.message
    fb = check_attention_fn(lambda Q, K, V: _one_short(Q, K, V, "queries"))
    assert "the last query (query 3)" in fb.message and "loop over the queries" in fb.message
    shorter = check_attention_fn(lambda Q, K, V: (_one_short(Q, K, V)[0], _one_short(Q, K, V)[1][
        :, :-1]))  # a row built by appending: 4 columns for 5 keys
    assert "(4, 4)" in shorter.message and "loop over the keys" in shorter.message, shorter.message
    fewer = check_attention_fn(lambda Q, K, V: (loops(Q, K, V)[0], loops(Q, K, V)[1][:-1]))
    assert "(3, 5)" in fewer.message and "loop over the queries" in fewer.message, fewer.message

    def z_one_short(Q, K, V):  # A right, the sum over the keys for Z one short
        A = loops(Q, K, V)[1]
        return A[:, :-1] @ V[:-1], A

    fb = check_attention_fn(z_one_short)
    assert not fb.ok and "Z leaves out the last key's value" in fb.message, fb.message


def test_attention_fn_names_a_dot_product_summed_over_d_v():
    # learner 28: the products q_i[m] k_j[m] summed over range(len(V[0])), d_v, not d_k; the
    # checker's first input has d_k = 3 and d_v = 2, so the slip shows there
    def over_d_v(Q, K, V, divisor=None):
        S = np.array([[sum(q[m] * k[m] for m in range(len(V[0]))) for k in K] for q in Q])
        A = softmax(S / math.sqrt(divisor or len(Q[0])), axis=-1)
        return A @ V, A

    for fn in (over_d_v, lambda Q, K, V: over_d_v(Q, K, V, divisor=len(V[0]))):
        fb = check_attention_fn(fn)
        assert not fb.ok and "d_v = 2" in fb.message and "d_k = 3" in fb.message, fb.message
        assert "first 2 products" in fb.message and "nor a slip" not in fb.message


def test_window_weights_name_a_softmax_down_the_columns_and_percentages():
    # learner 28: both got a row-sum message ("sums to 0.748", "sums to 100.000") only
    mask = window_mask(6)
    fb = check_window_weights(softmax(S, axis=0, where=mask))
    assert not fb.ok and "runs down the columns" in fb.message and "ROW" in fb.message
    right = softmax(S, axis=-1, where=mask)
    reset_tries()
    fb = check_window_weights(np.round(100 * right, 1))
    assert not fb.ok and fb.form and "percentages?" in fb.message and "sums to 1" in fb.message
    assert exercises.wrong_tries(check_window_weights) == 0  # a form, not a try
    wrong = 100 * right
    wrong[1, [0, 2]] = wrong[1, [2, 0]]  # percentages, and one row's values swapped
    fb = check_window_weights(wrong)
    assert not fb.ok and "sums to 100.000: percentages?" in fb.message, fb.message


def test_window_weights_name_scores_transposed_k_q():
    # learner 29: K Qᵀ (reading the scores by column, a pencil slip) got "recompute them"
    S = Q @ K.T / np.sqrt(2)
    fb = check_window_weights(softmax(S.T, axis=-1, where=window_mask(6)))
    assert not fb.ok and "K Qᵀ" in fb.message and "q_i · k_j" in fb.message


def test_window_weights_hint_names_where_minus_inf_is_taught(monkeypatch):
    # learner 29: the reread hint named sections 6 and 11 for -inf, which neither said; section
    # 11 of the notebook now shows e^-inf = 0 (its cell asserts it)
    monkeypatch.setattr(exercises, "EXPLAINED_TRIES", 3)
    reset_tries()
    wrong = np.full((6, 6), 1 / 6)  # four different wrong tries (the same one again is no try)
    messages = [check_window_weights(wrong + 0.01 * k).message for k in range(4)]
    assert "section 11 (a mask sets scores to -inf before the softmax, and e^-inf = 0)" in \
        messages[-1]


def test_attention_fn_refuses_bertlibs_attention_imported_inside_the_function():
    # learner 29: an import in the body is not a global: the call itself is watched
    def imports_it(Q, K, V):
        from bertlib.paper.attention import scaled_dot_product_attention as mine
        return mine(Q, K, V)

    def imports_module(Q, K, V):
        import bertlib.paper.attention as att
        return att.scaled_dot_product_attention(Q, K, V)

    for fn in (imports_it, imports_module):
        fb = check_attention_fn(fn)
        assert not fb.ok and "bertlib's scaled_dot_product_attention" in fb.message, fn
    from bertlib.paper import attention
    assert attention.scaled_dot_product_attention is scaled_dot_product_attention  # put back
    assert check_attention_fn(loops).ok


def test_causal_guess_given_as_a_position_is_asked_for_the_word():
    # learner 30: check_causal_guess(1), the 0-based position of "cat", heard only the word list
    fb = check_causal_guess(1)
    assert not fb.ok and fb.form and "not its position" in fb.message
    assert "counted from 0, 1 is 'cat'" in fb.message and "counted from 1, 1 is 'the'" in fb.message
    assert "counted from 1" not in check_causal_guess(0).message
    assert "counted from 1, 6 is 'mat'" in check_causal_guess(6).message
    assert "position" not in check_causal_guess(7).message  # no word there: the word list
    assert "position" not in check_causal_guess(True).message
    assert wrong_tries(check_causal_guess) == 0  # a form, never a try
