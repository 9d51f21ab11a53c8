"""Checkers of notebook 02: right answers pass, typical mistakes get feedback that names them."""

import re

import numpy as np
import pytest

from bertlib import exercises
from bertlib.exercises import nb02, reset_tries
from bertlib.exercises.nb02 import DET_NOUN_SENTENCES, check_det_noun_head, check_split_heads
from bertlib.hf.models import run_bert
from bertlib.paper.attention import split_heads


@pytest.fixture(autouse=True)
def _every_try_explained(monkeypatch):
    reset_tries()  # each test starts as a fresh kernel would, and all its tries are explained
    monkeypatch.setattr(exercises, "EXPLAINED_TRIES", 10**6)

# --- split_heads -------------------------------------------------------------------------


def test_reference_split_heads_passes():
    fb = check_split_heads(split_heads)
    assert fb.ok and "correct" in fb.message


def test_a_function_named_right_gets_neutral_wording():
    def right(X, h):
        return split_heads(X, h)

    fb = check_split_heads(right)
    assert fb.ok and "right is right" not in fb.message and "your function" in fb.message


def test_learner_version_with_reshape_and_transpose_passes():
    def mine(X, h):
        n, d = X.shape
        return X.reshape(n, h, d // h).transpose(1, 0, 2)

    assert check_split_heads(mine).ok


def test_direct_reshape_is_explained():
    fb = check_split_heads(lambda X, h: X.reshape(h, X.shape[0], -1))
    assert not fb.ok and "memory order" in fb.message and "several" in fb.message
    assert "reshape to" not in fb.message.lower().replace("a direct reshape to", "")  # no recipe


def test_missing_transpose_is_explained():
    fb = check_split_heads(lambda X, h: X.reshape(X.shape[0], h, -1))
    assert not fb.ok and "(n, h, d_k)" in fb.message and "first" in fb.message
    assert "swap" not in fb.message  # names the mistake, does not dictate the fix


def test_wrong_shape_names_the_expected_shape():
    fb = check_split_heads(lambda X, h: X)
    assert not fb.ok and "(2, 3, 4)" in fb.message and "(3, 8)" in fb.message


def test_wrong_columns_show_head_0():
    fb = check_split_heads(lambda X, h: split_heads(X[:, ::-1], h))
    assert not fb.ok and "head 0 should hold columns 0..3" in fb.message


def test_batched_exercise_refuses_bertlibs_own_split_heads():
    def lazy(X, h):
        return split_heads(X, h)

    for fn in (split_heads, lazy):
        fb = check_split_heads(fn, batched=True)
        assert not fb.ok and "yourself" in fb.message


def test_batched_exercise_refuses_wrappers_of_split_heads_with_the_same_message():
    import functools

    from bertlib.paper import attention

    refused = check_split_heads(split_heads, batched=True).message
    wrapped = eval("lambda X, h: split_heads(X, h)", {"split_heads": split_heads})  # no source
    via_module = eval("lambda X, h: attention.split_heads(X, h)", {"attention": attention})
    alias = split_heads

    def inner(X, h):
        return alias(X, h)

    def outer(X, h):  # the library call one helper deeper
        return inner(X, h)

    for fn in (wrapped, via_module, outer, functools.partial(split_heads)):
        fb = check_split_heads(fn, batched=True)
        assert not fb.ok and fb.message == refused


@pytest.mark.parametrize("one_sentence", [
    lambda X, h: X.reshape(X.shape[0], h, -1).transpose(1, 0, 2),  # runs on a batch: wrong shape
    lambda X, h: (lambda n, d: X.reshape(n, h, d // h).transpose(1, 0, 2))(*X.shape),  # raises
    lambda X, h: np.stack(np.split(X, h, axis=1)),  # raises on a batch ("array split" ...)
])
def test_batched_names_a_function_written_for_one_sentence(one_sentence):
    # learner 21: X.reshape(n, h, d_k) on the batch gave only "cannot reshape array of size ..."
    assert check_split_heads(one_sentence).ok  # right for one sentence
    fb = check_split_heads(one_sentence, batched=True)
    assert not fb.ok and "batch axis" in fb.message and "(batch, n, d) = (5, 3, 8)" in fb.message
    assert "(batch, h, n, d_k) = (5, 2, 3, 4)" in fb.message


def test_batched_a_wrong_one_sentence_function_is_not_called_right_for_one_sentence():
    fb = check_split_heads(lambda X, h: X.reshape(h, X.shape[-2], -1), batched=True)
    assert not fb.ok and "batch axis" not in fb.message
    fb = check_split_heads(lambda X, h: 1 / 0, batched=True)
    assert not fb.ok and "ZeroDivisionError" in fb.message and "batch axis" not in fb.message


def test_batched_learner_helper_named_split_heads_is_not_refused():
    def own_split_heads(X, h):
        b, n, d = X.shape
        return X.reshape(b, n, h, d // h).transpose(0, 2, 1, 3)

    fn = eval("lambda X, h: split_heads(X, h)", {"split_heads": own_split_heads})
    assert check_split_heads(fn, batched=True).ok


def test_batched_learner_version_passes_despite_its_name():
    def my_split_heads(X, h):
        b, n, d = X.shape
        return X.reshape(b, n, h, d // h).transpose(0, 2, 1, 3)

    assert check_split_heads(my_split_heads, batched=True).ok


def test_a_raising_function_becomes_feedback():
    def broken(X, h):
        raise RuntimeError("oops")

    fb = check_split_heads(broken)
    assert not fb.ok and "RuntimeError: oops" in fb.message


# --- the determiner -> noun head ------------------------------------------------------------

@pytest.fixture(scope="module")
def det_noun_scores():
    """Recomputed independently: mean weight from each "the" to the noun it introduces."""
    per_pair = []
    for text, nouns in DET_NOUN_SENTENCES:
        run = run_bert(text)
        i_the = [i for i, t in enumerate(run.tokens) if t == "the"]
        assert len(i_the) == len(nouns)
        for i, noun in zip(i_the, nouns, strict=True):
            j = run.tokens.index(noun, i)
            assert j > i
            per_pair.append(run.attentions[:, :, i, j])
    return np.mean(per_pair, axis=0)


def test_best_head_passes(det_noun_scores):
    layer, head = np.unravel_index(det_noun_scores.argmax(), det_noun_scores.shape)
    fb = check_det_noun_head(int(layer), int(head))
    assert fb.ok and f"{det_noun_scores.max():.2f}" in fb.message


def test_numpy_integers_are_accepted(det_noun_scores):
    layer, head = np.unravel_index(det_noun_scores.argmax(), det_noun_scores.shape)
    assert check_det_noun_head(layer, head).ok


def test_other_heads_fail_with_what_their_rows_do_and_no_measured_value(det_noun_scores):
    order = np.argsort(det_noun_scores.ravel())[::-1]
    for rank in (1, len(order) - 1):  # the runner-up and the last head
        layer, head = divmod(int(order[rank]), det_noun_scores.shape[1])
        fb = check_det_noun_head(layer, head)
        assert not fb.ok and "'the' looks most at: " in fb.message, fb.message
        assert not re.findall(r"\d\.\d", fb.message), fb.message  # no share, theirs or the best's
        assert "rank" not in fb.message and "count from 0" in fb.message


@pytest.mark.parametrize("layer, head", [(2, 9), (2, 11)])  # (3, 9): the answer 1-based
def test_a_sentence_initial_the_looking_at_cls_is_not_counted_as_the_word_before(
        layer, head, monkeypatch):
    # learner 27: "the" at position 1 looking at [CLS] (position 0) was told "the piece before";
    # learner 31: no word of these sentences is split, so the neighbours are words, and the
    # counts are over "pairs", the exercise's word
    monkeypatch.setattr(exercises, "EXPLAINED_TRIES", 10**6)
    at_cls = before = after = 0
    for text, _nouns in DET_NOUN_SENTENCES:  # recomputed here: where each "the" looks most
        run = run_bert(text)
        assert not any(t.startswith("##") for t in run.tokens), run.tokens  # whole words only
        for i in [i for i, t in enumerate(run.tokens) if t == "the"]:
            k = int(run.attentions[layer, head, i].argmax())
            at_cls += run.tokens[k] == "[CLS]"
            before += k == i - 1 and run.tokens[k] not in ("[CLS]", "[SEP]")
            after += k == i + 1
    message = check_det_noun_head(layer, head).message
    times = lambda n: "once" if n == 1 else f"{n} times"  # noqa: E731
    assert at_cls > 0 and f"'[CLS]' {times(at_cls)}" in message, message
    assert (f"the word before {times(before)}" in message) == (before > 0), message
    assert (f"the next word {times(after)}" in message) == (after > 0), message
    assert "piece" not in message and "pairs" in message and "cases" not in message, message


def test_a_wrong_heads_message_depends_on_that_head_only(monkeypatch):
    # every wrong head's message must stay the same when every OTHER head's weights change (here:
    # the heads mirrored), so no message carries a rank, a best value or a pointer to another head
    real_scores, per_pair, pairs = nb02._det_noun_scores()
    L, H = real_scores.shape
    for l, h in ((0, 0), (1, 8), (3, 10), (5, 11)):  # (3, 9) is the answer counted from 1
        message = check_det_noun_head(l, h).message
        mirrored = per_pair[:, ::-1, ::-1].copy()
        mirrored[:, l, h] = per_pair[:, l, h]
        monkeypatch.setattr(nb02, "_det_noun_scores", lambda m=mirrored: (m.mean(0), m, pairs))
        assert check_det_noun_head(l, h).message.split(" (explained")[0] == message.split(
            " (explained")[0], (l, h)
        monkeypatch.undo()
        monkeypatch.setattr(exercises, "EXPLAINED_TRIES", 10**6)


def test_a_loop_over_all_72_heads_learns_right_or_wrong_only(det_noun_scores, monkeypatch):
    # the search learner 20 ran: call the checker for every head until one passes. After the
    # explained tries every wrong head gets one and the same message, so the loop needs exactly
    # as many calls as the answer's place in its order: nothing steers it, in any order
    monkeypatch.setattr(exercises, "EXPLAINED_TRIES", 3)
    L, H = det_noun_scores.shape
    best = np.unravel_index(int(det_noun_scores.argmax()), det_noun_scores.shape)
    heads = [(l, h) for l in range(L) for h in range(H)]
    for order in (heads, heads[::-1], [heads[i] for i in np.random.default_rng(0).permutation(72)]):
        reset_tries()
        messages = []
        for layer, head in order:
            fb = check_det_noun_head(layer, head)
            if fb.ok:
                break
            messages.append(fb.message)
        assert len(messages) == order.index(best)  # found only by reaching it
        assert len(set(messages[3:])) <= 1 and "Only the first 3 tries" in messages[-1]
        assert all(not re.findall(r"\d\.\d", m) for m in messages)  # no share, ever


def test_det_noun_counts_read_once_not_1_times(det_noun_scores):
    # learner 21: "another word 1 times"; every wrong head's message, in plain English
    L, H = det_noun_scores.shape
    best = np.unravel_index(int(det_noun_scores.argmax()), det_noun_scores.shape)
    said_once = False
    for layer in range(L):
        for head in range(H):
            if (layer, head) != best:
                message = check_det_noun_head(layer, head).message
                assert " 1 times" not in message, message
                said_once |= " once" in message
    assert said_once  # a count of 1 occurs among the 71 wrong heads, and reads "once"


def test_whole_floats_count_as_whole_numbers(det_noun_scores):
    layer, head = np.unravel_index(det_noun_scores.argmax(), det_noun_scores.shape)
    assert check_det_noun_head(float(layer), float(head)).ok  # 2.0 is 2, as in notebook 03


def test_cost_guess_names_a_negative_count_and_nan():  # learner 19
    from bertlib.exercises.nb02 import check_cost_guess

    assert "cannot be negative" in check_cost_guess(-12).message
    assert "must be a finite number, got nan" in check_cost_guess(float("nan")).message


def test_one_based_and_swapped_answers_get_the_convention_not_a_confirmation(det_noun_scores):
    # learner 29: "with 1 taken off each" and "the right ones in the other order" handed over the
    # answer; now every wrong head states the convention (from 0, (layer, head)) alike, and a
    # shifted or swapped answer is told nothing more than any other wrong head
    layer, head = (int(x) for x in np.unravel_index(det_noun_scores.argmax(),
                                                   det_noun_scores.shape))
    L, H = det_noun_scores.shape
    convention = "layers and heads count from 0"
    for wrong in ((layer + 1, head + 1), (head, layer), (0, 0)):
        fb = check_det_noun_head(*wrong)
        if fb.form:  # (head, layer) out of range: the range error, for any such pair
            assert "the order is layer, then head" in fb.message, fb.message
            continue
        assert not fb.ok and convention in fb.message, fb.message
        assert "taken off" not in fb.message and "right ones" not in fb.message, fb.message
        assert f"layer {layer}," not in fb.message and f"head {head}" not in fb.message
    other = next((h, l) for l in range(L) for h in range(L, H) if (l, h) != (layer, head))
    fb = check_det_noun_head(*other)  # (head, layer) of another head: out of range, told so
    assert fb.form and "the order is layer, then head" in fb.message, fb.message


@pytest.mark.parametrize("layer, head, text", [
    (6, 0, "layer must be a whole number in 0..5"),
    (-1, 0, "layer must be a whole number in 0..5"),
    (0, 12, "head must be a whole number in 0..11"),
    (0, "3", "head must be a whole number"),
    (1.5, 3, "layer must be a whole number"),
    (0, None, "still None"),
])
def test_bad_layer_or_head_gets_a_message_not_an_error(layer, head, text):
    fb = check_det_noun_head(layer, head)
    assert not fb.ok and text in fb.message


# --- stubs, the cost prediction, the W_O design task ---------------------------------------

def test_unsolved_stubs_say_not_answered_yet():
    from bertlib.exercises.nb02 import check_cost_guess, check_w_o_swap

    for fb in (check_split_heads(None), check_split_heads(lambda X, h: None),
               check_cost_guess(None), check_w_o_swap(None), check_det_noun_head(None, None)):
        assert not fb.ok and "not answered yet" in fb.message


def test_cost_guess():
    from bertlib.exercises.nb02 import check_cost_guess

    assert check_cost_guess(12).ok
    assert "d_k = d / h" in check_cost_guess(1).message
    assert "too many" in check_cost_guess(144).message
    assert "given as a number" in check_cost_guess("twelve").message


#: the W_O design task's answer, [head 1 | head 0 backwards]: column c picks concat column RIGHT[c]
W_O_RIGHT = np.eye(4)[:, [2, 3, 1, 0]]


def test_w_o_swap():
    from bertlib.exercises.nb02 import check_w_o_swap

    assert check_w_o_swap(W_O_RIGHT).ok
    assert "permutation" not in check_w_o_swap(W_O_RIGHT).message  # a term the lesson never taught
    assert "identity" in check_w_o_swap(np.eye(4)).message
    assert "(4, 4)" in check_w_o_swap(np.eye(3)).message
    half = np.eye(4)
    half[:, :2] = W_O_RIGHT[:, :2]
    assert "[0, 1] are right" in check_w_o_swap(half).message
    fb = check_w_o_swap(-np.eye(4))
    assert "no output column is right yet" in fb.message and "C @" not in fb.message


def test_w_o_swap_refuses_and_names_rows_and_columns_traded():
    # learner 27: the old target [head 1 | head 0] was its own transpose, so reading W_O's rows
    # as the output columns passed; the new target's transpose is wrong, and named
    from bertlib.exercises.nb02 import check_w_o_swap

    assert not np.allclose(W_O_RIGHT, W_O_RIGHT.T)
    fb = check_w_o_swap(W_O_RIGHT.T)
    assert not fb.ok and "head 1 backwards, head 0 forwards" in fb.message
    assert "which index of W_O runs over the concatenated columns" in fb.message
    # learner 32: it diagnoses (what lands where, which index is which), never names the edit
    assert "transpose" not in fb.message and "traded" not in fb.message and ".T" not in fb.message


def test_w_o_swap_first_wrong_try_does_not_state_the_solution():
    # learner 27: the first wrong try quoted the solution's key sentence ("column c of W_O
    # decides which concatenated column lands there")
    from bertlib.exercises.nb02 import check_w_o_swap

    for wrong in (-np.eye(4), np.ones((4, 4)), np.zeros((4, 4))):
        message = check_w_o_swap(wrong).message
        assert "decides" not in message and "W_O[:, c]" not in message, message
        assert "concatenated column lands there" not in message


def test_batched_split_heads():
    def right(X, h):
        b, n, d = X.shape
        return X.reshape(b, n, h, d // h).transpose(0, 2, 1, 3)

    assert check_split_heads(right, batched=True).ok
    fb = check_split_heads(lambda X, h: X.reshape(X.shape[0], h, X.shape[1], -1), batched=True)
    assert "memory order" in fb.message
    fb = check_split_heads(lambda X, h: right(X, h).transpose(1, 0, 2, 3), batched=True)
    assert "batch axis must stay first" in fb.message
    fb = check_split_heads(lambda X, h: X.reshape(X.shape[1], h, -1).transpose(1, 0, 2),
                           batched=True)  # the one-sentence answer, applied to a batch
    assert "should have shape (batch, h, n, d / h)" in fb.message
    fb = check_split_heads(lambda X, h: X.transpose(0, 2, 1).reshape(7, 7), batched=True)
    assert "raised ValueError" in fb.message


def test_split_heads_names_a_non_array_and_a_lambda():
    assert "returned a str" in check_split_heads(lambda X, h: "heads").message
    fb = check_split_heads(lambda X, h: X.reshape(X.shape[0], h, -1).transpose(1, 0, 2))
    assert fb.ok and "<lambda>" not in fb.message


def test_w_o_swap_names_one_head_in_the_other_order():
    from bertlib.exercises.nb02 import check_w_o_swap

    fb = check_w_o_swap(np.eye(4)[::-1])  # anti-diagonal: head 1 backwards, head 0 right
    assert not fb.ok and "head 0 is in the right place" not in fb.message
    assert "columns [0, 1] carry head 1, but not in the order asked (head 1 forwards)" in fb.message
    fb = check_w_o_swap(np.eye(4)[[2, 3, 0, 1]])  # the plain swap [head 1 | head 0]
    assert not fb.ok and "output columns [0, 1] are right" in fb.message
    assert "columns [2, 3] carry head 0, but not in the order asked (head 0 backwards)" in fb.message
    assert "swapped" not in fb.message  # learner 32: a diagnosis, not the edit


def test_w_o_swap_names_zero_columns():
    from bertlib.exercises.nb02 import check_w_o_swap

    fb = check_w_o_swap(np.zeros((4, 4)))
    assert not fb.ok and "all 0" in fb.message and "multiplied by" not in fb.message
    one_zero = W_O_RIGHT.copy()
    one_zero[:, 3] = 0
    assert "column(s) [3] of your W_O are all 0" in check_w_o_swap(one_zero).message


def test_w_o_swap_names_a_scaled_permutation():
    from bertlib.exercises.nb02 import check_w_o_swap

    fb = check_w_o_swap(2 * W_O_RIGHT)
    assert not fb.ok and "multiplied by [2.0, 2.0, 2.0, 2.0]" in fb.message


@pytest.mark.parametrize("layer, head, where", [
    ((2, 8), None, "`layer`"), ([2, 8], None, "`layer`"), (None, (2, 8), "`head`")])
def test_det_noun_head_names_both_numbers_in_one_argument(layer, head, where):
    fb = check_det_noun_head(layer, head)
    assert not fb.ok and "give layer and head separately" in fb.message and where in fb.message
    assert "still None" not in fb.message


def test_cost_guess_never_reveals_the_ratio_on_a_wrong_guess():
    from bertlib.exercises.nb02 import check_cost_guess

    for wrong in (144, 11, 13, -12, 12.4, 2, 28311552):
        fb = check_cost_guess(wrong)
        assert not fb.ok and "12" not in fb.message.replace(str(wrong), ""), (wrong, fb.message)
    fb = check_cost_guess(28311552)  # an absolute number of parameters
    assert "ratio is wanted" in fb.message and "number of parameters" in fb.message


def test_w_o_swap_zero_column_hint_does_not_spell_out_the_matrix():
    from bertlib.exercises.nb02 import check_w_o_swap

    half = W_O_RIGHT.copy()
    half[:, 2:] = 0
    fb = check_w_o_swap(half)
    assert not fb.ok and "all 0" in fb.message and "a 1 in the row" not in fb.message


def test_split_heads_library_message_does_not_prescribe_one_method():
    fb = check_split_heads(lambda X, h: split_heads(X, h), batched=True)
    assert not fb.ok and "split_heads" in fb.message and "reshape" not in fb.message

    def stack_split(X, h):  # another valid method: split the features, stack along a new axis
        return np.stack(np.split(X, h, axis=-1), axis=-3)

    assert check_split_heads(stack_split).ok and check_split_heads(stack_split, batched=True).ok


def test_cost_guess_names_the_ratio_upside_down():
    from bertlib.exercises.nb02 import check_cost_guess

    for upside_down in (1 / 12, 0.083, 0.08):
        fb = check_cost_guess(upside_down)
        assert not fb.ok and "upside down" in fb.message and "12" not in fb.message, fb.message
    assert "upside down" not in check_cost_guess(0.5).message


def test_w_o_swap_names_rows_of_different_lengths():
    from bertlib.exercises.nb02 import check_w_o_swap

    fb = check_w_o_swap([[0, 0, 1, 0], [0, 0, 0, 1], [1, 0, 0], [0, 1, 0, 0]])
    assert not fb.ok and "different lengths" in fb.message and "row 2 has 3" in fb.message
    assert "got list" not in fb.message


@pytest.mark.parametrize("batched", [False, True])
def test_split_heads_with_sizes_typed_in_is_caught_on_a_second_shape(batched):
    def typed(X, h):  # right only for X of the first shape: n = 3, d = 8 typed in
        return np.moveaxis(X.reshape(*X.shape[:-2], 3, h, 8 // h), -2, -3)

    fb = check_split_heads(typed, batched=batched)
    first = "(5, 3, 8)" if batched else "(3, 8)"
    assert not fb.ok and f"right for X of shape {first}" in fb.message
    assert "typed in" in fb.message and "raised ValueError" in fb.message
    fb = check_split_heads(lambda X, h: np.moveaxis(X.reshape(*X.shape[:-1], h, -1), -2, -3),
                           batched=batched)
    assert fb.ok and "4, 12)" in fb.message


def test_split_heads_returning_none_on_the_second_shape_says_so():
    fb = check_split_heads(lambda X, h: None if X.shape[-1] == 12 else split_heads(X, h))
    assert not fb.ok and "(yours returned None)" in fb.message and "raised" not in fb.message



@pytest.mark.parametrize("batched", [False, True])
def test_split_heads_with_a_shape_typed_in_is_told_to_work_for_any_sizes(batched):
    # issue 26: reshape(3, 2, 4), written for one example's shape, gave numpy's "cannot reshape
    # array ..." or a bare wrong shape; the checker now says the function must work for any
    # n, d and h, read from X.shape and h, without writing the reshape for the learner
    lead = (5,) if batched else ()
    typed = {  # each one right for some example, X of shape (*lead, 3, 8) with h = 2 at best
        "h typed": (lambda X, h: X.reshape(*lead, 3, 2, 4).swapaxes(-2, -3),
                    "the shape for h = 2: is h typed in?"),
        "numpy cannot fit it": (lambda X, h: X.reshape(*lead, 4, 2, 4),
                                "raised ValueError: cannot reshape array"),
        "the toy's sizes": (lambda X, h: np.moveaxis(X.reshape(*lead, 6, 2, 2), -2, -3),
                            "a size typed in, or read from the wrong axis of X?"),
        "n and d typed": (lambda X, h: np.moveaxis(X.reshape(*lead, 3, h, 8 // h), -2, -3),
                          "a size typed in (5 or 3 or 8)?" if batched else "(3 or 8)?"),
    }
    for name, (fn, said) in typed.items():
        fb = check_split_heads(fn, batched=batched)
        assert not fb.ok and said in fb.message, (name, fb.message)
        assert "must work for any" in fb.message, (name, fb.message)
        assert "n, d and h" in fb.message and "X.shape" in fb.message, (name, fb.message)
        assert ("batch size" in fb.message) == batched, (name, fb.message)
        assert "transpose" not in fb.message and "reshape(" not in fb.message  # no code given
    # a function wrong for another reason is not told about typed sizes
    fb = check_split_heads(lambda X, h: X.reshape(*X.shape[:-2], h, X.shape[-2], -1), batched)
    assert not fb.ok and "must work for any" not in fb.message


@pytest.mark.parametrize("heads_first", [
    lambda X, h: np.stack(np.split(X, h, axis=-1), axis=0),
    lambda X, h: tuple(np.split(X, h, axis=-1)),
])
def test_batched_heads_stacked_before_the_batch_are_named_not_called_one_sentence(heads_first):
    # learner 26: np.split along the features, stacked, gives (h, batch, n, d_k): it handles the
    # batch, yet was told "your function splits one sentence ... n and d are the last two axes"
    assert check_split_heads(heads_first).ok  # right for one sentence
    fb = check_split_heads(heads_first, batched=True)
    assert not fb.ok and "the batch axis must stay first" in fb.message, fb.message
    assert "(2, 5, 3, 4)" in fb.message and "splits one sentence" not in fb.message


@pytest.mark.parametrize("batched", [False, True])
def test_split_heads_h_and_d_k_swapped_in_the_reshape_is_not_called_typed_in(batched):
    # learner 26: reshape(..., d // h, h) gave the shape for the other h, and the learner was
    # sent looking for an h typed in; the sizes swap with h, so the slip is named
    def swapped(X, h):
        return np.swapaxes(X.reshape(*X.shape[:-1], X.shape[-1] // h, h), -2, -3)

    fb = check_split_heads(swapped, batched=batched)
    assert not fb.ok and "traded places" in fb.message and "typed in" not in fb.message, fb.message
    assert "counts the heads" in fb.message and "reshape(" not in fb.message
    fb = check_split_heads(lambda X, h: X.reshape(*X.shape[:-2], 3, 4, 2).swapaxes(-2, -3),
                           batched=batched)  # h = 4 typed in: still asked about it
    assert not fb.ok and "is h typed in?" in fb.message and "traded places" not in fb.message


def test_split_heads_a_size_divided_with_slash_is_told_about_whole_numbers():
    # learner 26: X.shape[2] / h passed numpy's bare "'float' object cannot be interpreted ..."
    def slash(X, h):
        b, n, d = X.shape
        return X.reshape(b, n, h, d / h).transpose(0, 2, 1, 3)

    fb = check_split_heads(slash, batched=True)
    assert not fb.ok and "raised TypeError" in fb.message and "is a float" in fb.message
    assert "//" in fb.message and "8 / 2 = 4.0" in fb.message


def test_det_noun_head_echoes_numpy_integers_as_plain_numbers():
    # learner 26: layer=(np.int64(2), np.int64(8)) was echoed as "(np.int64(2), np.int64(8))"
    fb = check_det_noun_head((np.int64(2), np.int64(8)), None)
    assert "(layer = 2, head = 8)" in fb.message and "as tuple (2, 8)" in fb.message
    assert "int64" not in fb.message
    assert "as ndarray [2, 8]" in check_det_noun_head(np.array([2, 8]), None).message


def test_cost_guess_reads_a_number_typed_as_text_and_echoes_whole_numbers_whole():
    # learner 28: "12" was refused while notebook 01's prediction takes " Cat"; and an int guess
    # came back as a float ("not 4.0")
    from bertlib.exercises.nb02 import check_cost_guess

    for typed in ("12", " 12 ", "12.0"):
        assert check_cost_guess(typed).ok, typed
    for guess in (4, "4", 4.0):
        reset_tries()
        message = check_cost_guess(guess).message
        assert "not 4:" in message and "4.0" not in message, message
    assert "not 2.5:" in check_cost_guess(2.5).message
    assert "given as a number" in check_cost_guess("a lot").message


def test_split_heads_written_but_not_returned_is_asked_about_return():
    # learner 28 (notebook 01's loops): a body without `return` was told "not answered yet: fill
    # it in"; every checker that calls a learner's function now asks about the `return`
    def no_return(X, h):
        X.reshape(*X.shape[:-1], h, -1)

    fb = check_split_heads(no_return, batched=True)
    assert not fb.ok and "did you forget `return`?" in fb.message, fb.message
    assert "not answered yet" in check_split_heads(lambda X, h: None).message


def test_w_o_swap_refuses_a_complex_matrix_without_a_numpy_warning():
    # learner 29: a ComplexWarning leaked and the matrix was read as real
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fb = nb02.check_w_o_swap(np.eye(4) * (1 + 1j))
    assert not fb.ok and fb.form and "complex" in fb.message


def test_split_heads_refuses_bertlib_s_split_imported_in_the_function_s_own_body():
    import bertlib.paper.attention as attention

    def imports_it(X, h):  # calls_library reads globals beforehand: it cannot see this import
        from bertlib.paper.attention import split_heads as theirs
        return theirs(X, h)

    fb = check_split_heads(imports_it, batched=True)
    assert not fb.ok and "calls bertlib's split_heads" in fb.message and "reshape" not in fb.message
    assert attention.split_heads is split_heads  # the name is put back after the call
    assert check_split_heads(imports_it).ok  # one sentence: not the exercise that forbids it


def test_call_watched_counts_calls_and_puts_the_names_back():
    import bertlib.paper.attention as attention
    from bertlib.exercises.watched import call_watched

    X = np.arange(24.0).reshape(3, 8)
    got, error, called = call_watched(lambda X, h: attention.split_heads(X, h), split_heads, X, 2)
    assert called and error is None and np.array_equal(got, split_heads(X, 2))
    got, error, called = call_watched(lambda X, h: X.reshape(3, h, 4).swapaxes(0, 1),
                                      split_heads, X, 2)
    assert not called and np.array_equal(got, split_heads(X, 2))
    _, error, called = call_watched(lambda X, h: 1 / 0, split_heads, X, 2)
    assert error is not None and not called and attention.split_heads is split_heads


def test_w_o_swap_given_as_a_column_order_is_asked_for_the_matrix():
    # learner 30: [2, 3, 1, 0], a natural first attempt, heard only "wrong shape"
    for order in ([2, 3, 1, 0], np.array([2, 3, 1, 0]), "3,4,2,1", "[2, 3, 1, 0]"):
        fb = nb02.check_w_o_swap(order)
        assert not fb.ok and fb.form and "a column order, not a matrix" in fb.message, order
        assert "W_O[j, c]" in fb.message and "(4, 4)" in fb.message
    for other in ([0.5, 1, 2, 3], [1, 2, 3], [np.inf, 1, 2, 3], "abc"):
        assert "column order" not in nb02.check_w_o_swap(other).message, other
