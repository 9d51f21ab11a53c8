"""bertlib.checks: each helper accepts good input and names the argument and range on bad input."""

import re

import numpy as np
import pytest
import torch

from bertlib import checks


def test_whole_accepts_numpy_ints_and_names_the_range():
    assert checks.whole(np.int64(3), "k", 0, 5) == 3
    with pytest.raises(ValueError, match=r"layer must be a whole number in 0\.\.5 \(6 layers\), got 7"):
        checks.whole(7, "layer", 0, 5, why="(6 layers)")
    with pytest.raises(ValueError, match=r"n must be a whole number >= 1, got 0"):
        checks.whole(0, "n", 1)


@pytest.mark.parametrize("bad", [True, 2.0, "3", None])
def test_whole_rejects_non_integers(bad):
    with pytest.raises(TypeError, match="k must be a whole number"):
        checks.whole(bad, "k")


def test_number_range_open_low_and_non_finite():
    assert checks.number(0.5, "p", 0, 1) == 0.5
    assert checks.number(np.float32(1), "p", 0, 1) == 1.0
    with pytest.raises(ValueError, match=r"p must be a number in \[0, 1\], got 1.5"):
        checks.number(1.5, "p", 0, 1)
    with pytest.raises(ValueError, match=r"in \(0, 1\]"):
        checks.number(0, "p", 0, 1, open_low=True)
    with pytest.raises(ValueError, match="finite"):
        checks.number(float("nan"), "x")
    with pytest.raises(TypeError):
        checks.number(True, "x")


def test_one_of_lists_the_choices():
    assert checks.one_of("zero", "mode", ("uniform", "zero")) == "zero"
    with pytest.raises(ValueError, match="mode must be one of 'uniform', 'zero'; got 'half'"):
        checks.one_of("half", "mode", ("uniform", "zero"))
    with pytest.raises(ValueError):
        checks.one_of([1], "mode", {"a", "b"})


def test_as_array_types_dims_and_finite():
    out = checks.as_array([[1, 2], [3, 4]], "X", 2)
    assert out.dtype == np.float64 and out.shape == (2, 2)
    f32 = np.ones((2, 3), np.float32)
    assert checks.as_array(f32, "X", 2) is f32
    with pytest.raises(TypeError, match="boolean"):
        checks.as_array(np.ones(3, bool), "X")
    with pytest.raises(TypeError, match="real numbers"):
        checks.as_array(np.ones(3, complex), "X")
    with pytest.raises(TypeError, match="array of numbers"):
        checks.as_array([[1, 2], [3]], "X")
    with pytest.raises(ValueError, match=r"X must have 2 dimensions \(n, d\), got shape \(3,\)"):
        checks.as_array([1, 2, 3], "X", 2, layout="(n, d)")
    with pytest.raises(ValueError, match=r"at least 2 dimensions"):
        checks.as_array([1, 2, 3], "X", min_ndim=2)
    with pytest.raises(ValueError, match=r"1 NaN/inf value\(s\) \(first at index \(1,\)\)"):
        checks.as_array([0.0, np.nan], "X")
    assert np.isnan(checks.as_array([np.nan], "X", finite=False)).all()


def test_same_shape():
    checks.same_shape(np.zeros((2, 3)), (2, 3), ("a", "b"))
    with pytest.raises(ValueError, match=r"a and b must have the same shape, got \(2, 3\) and \(3, 2\)"):
        checks.same_shape(np.zeros((2, 3)), np.zeros((3, 2)), ("a", "b"))


def test_vocab_ids_names_type_shape_and_the_first_id_outside():
    assert checks.vocab_ids(np.array([0, 9]), "ids", 10).tolist() == [0, 9]
    with pytest.raises(TypeError, match="ids must be an array of whole numbers"):
        checks.vocab_ids([1.5], "ids", 10)
    with pytest.raises(ValueError, match=r"a 1-D array of whole numbers \(token ids\), got "
                                         r"shape \(1, 2\)"):
        checks.vocab_ids([[1, 2]], "ids", 10, 1, "a 1-D array")
    with pytest.raises(ValueError, match=r"ids must be in 0\.\.9 \(a vocabulary of 10\), got -1"):
        checks.vocab_ids([3, -1, 12], "ids", 10)


def test_kind_names_what_is_wanted_and_what_came():
    rng = np.random.default_rng(0)
    assert checks.kind(rng, "rng", np.random.Generator, "a numpy Generator") is rng
    with pytest.raises(TypeError, match="rng must be a numpy Generator, got int"):
        checks.kind(3, "rng", np.random.Generator, "a numpy Generator")


def test_text_refuses_non_strings_and_blank_text():
    assert checks.text(" a cat ", "text") == " a cat "
    with pytest.raises(TypeError, match="text must be a string, got int"):
        checks.text(3, "text")
    with pytest.raises(ValueError, match="text is empty or only whitespace"):
        checks.text(" \t\n", "text")


def test_items_wants_a_non_empty_list_not_a_string():
    assert checks.items(("a", "b"), "texts", "sentences") == ["a", "b"]
    with pytest.raises(TypeError, match="texts must be a list of sentences, got str 'a cat'"):
        checks.items("a cat", "texts", "sentences")
    with pytest.raises(TypeError, match="got int"):
        checks.items(3, "texts", "sentences")
    with pytest.raises(ValueError, match="texts must be a non-empty list of sentences"):
        checks.items([], "texts", "sentences")


def test_has_shape_matches_sizes_wildcards_and_leading_axes():
    checks.has_shape(np.zeros((4, 6)), "E", (4, None), "(k, n)")
    checks.has_shape(np.zeros((2, 3, 5, 5)), "A", (..., 5, 5), "(..., n, n)")
    checks.has_shape(np.zeros((5, 5)), "A", (..., 5, 5))
    with pytest.raises(ValueError, match=r"E must have shape \(k, n\) = \(4, 6\), got \(4, 5\)"):
        checks.has_shape(np.zeros((4, 5)), "E", (4, 6), "(k, n)")
    with pytest.raises(ValueError, match=r"omega must have shape \(m, d\) = \(m, 3\) \(same d\)"):
        checks.has_shape(np.zeros((2, 2)), "omega", (None, 3), "(m, d)", "(same d)")
    with pytest.raises(ValueError, match=r"= \(\.\.\., 4, 4\), got \(3,\)"):
        checks.has_shape(np.zeros(3), "A", (..., 4, 4), "(..., n, n)")
    with pytest.raises(ValueError, match=r"w must have shape \(n,\) = \(6,\) for 6 tokens"):
        checks.has_shape(np.zeros(5), "w", (6,), "(n,)", "for 6 tokens")
    with pytest.raises(ValueError, match=r"x must have shape \(2, 2\), got \(2, 2, 2\)"):
        checks.has_shape(np.zeros((2, 2, 2)), "x", (2, 2))


def test_as_array_checks_the_shape_it_is_given():
    assert checks.as_array([[1, 2, 3]], "P", shape=(1, 3)).shape == (1, 3)
    with pytest.raises(ValueError, match=r"P must have shape \(k, n\) = \(2, 3\), got \(1, 3\)"):
        checks.as_array([[1, 2, 3]], "P", shape=(2, 3), layout="(k, n)")


def test_heads_dividing_lists_the_valid_head_counts():
    assert checks.heads_dividing(np.int64(4), 12) == 4
    with pytest.raises(ValueError, match=r"d = 12 is not divisible by h = 5.*\[1, 2, 3, 4, 6, 12\]"):
        checks.heads_dividing(5, 12)
    with pytest.raises(TypeError, match="whole number"):
        checks.heads_dividing(2.0, 12)


def test_check_finite_reads_a_torch_tensor_where_it_lives():
    torch = pytest.importorskip("torch")
    checks.check_finite(torch.ones(3, dtype=torch.bfloat16), "x")
    with pytest.raises(ValueError, match=r"x contains 2 NaN/inf value\(s\) \(first at index \(0, 1\)\)"):
        checks.check_finite(torch.tensor([[0.0, float("nan")], [float("inf"), 1.0]]), "x")


def test_labels_is_one_word_piece_per_row_or_column():
    assert checks.labels(("a", "b"), 2, "tokens", "maps of size n = 2") == ["a", "b"]
    assert checks.labels(np.array(["a", "b"]), 2, "tokens", "maps") == ["a", "b"]
    with pytest.raises(ValueError, match=r"^3 tokens for maps of size n = 2: give a list of word "
                                         r"pieces, one per row$"):
        checks.labels(["a", "b", "c"], 2, "tokens", "maps of size n = 2")
    with pytest.raises(ValueError, match="^a str of tokens for maps: .* one per column$"):
        checks.labels("ab", 2, "tokens", "maps", each="column")


def test_are_attention_weights_asks_the_one_rule_as_a_question():
    A = np.full((2, 4, 4), 0.25)
    assert checks.are_attention_weights(A) and checks.are_attention_weights(A + 2e-4)
    assert not checks.are_attention_weights(A + 2e-3)  # rows off 1 by 8e-3
    assert not checks.are_attention_weights(np.array([[1.5, -0.5], [0.5, 0.5]]))  # sums to 1
    assert checks.are_attention_weights(np.array([[np.nan, 1.0], [0.5, 0.5]]))  # NaN: not drawn
    for B in (A, A + 2e-4, A + 2e-3, np.array([[1.5, -0.5], [0.5, 0.5]])):  # the same rule
        try:
            ok = checks.attention_rows(B) is B
        except ValueError:
            ok = False
        assert ok == checks.are_attention_weights(B)


def test_attention_rows_is_the_one_rule_for_attention_weights():
    """Entries in [0, 1] and rows summing to 1, both within atol; the message names the entries'
    range, or the first row that does not sum to 1."""
    A = np.full((2, 3, 4, 4), 0.25)
    assert checks.attention_rows(A) is A
    assert checks.attention_rows(A + 2e-4, atol=1e-3) is not None  # float32-style rounding passes
    bad = A.copy()
    bad[1, 2, 3] *= 2
    with pytest.raises(ValueError, match=r"every row of an attention map must sum to 1 \(within "
                                         r"0.001\); 1 row\(s\) do not, e.g. \(layer, head, "
                                         r"query\) = \(1, 2, 3\) sums to 2$"):
        checks.attention_rows(bad, index="(layer, head, query)")
    with pytest.raises(ValueError, match=r"^W must be attention weights in \[0, 1\] \(within "
                                         r"0.001\); entries run from -0.5 to 1.5$"):
        checks.attention_rows(np.array([[1.5, -0.5], [0.5, 0.5]]), "W")  # rows sum to 1
    rounded = np.round(np.full((3, 3), 1 / 3), 1)  # rows sum to 0.9: fine for a picture only
    assert checks.attention_rows(rounded, rows_sum_to_one=False) is rounded
    with pytest.raises(ValueError, match=r"\(\.\.\., query\) = \(0,\) sums to 0.9"):
        checks.attention_rows(rounded)


def test_attention_stack_takes_square_stacks_and_names_the_tokens():
    A = np.full((2, 3, 4, 4), 0.25)
    assert checks.attention_stack(A).shape == (2, 3, 4, 4)
    assert checks.attention_stack(A[0, 0], n=4).dtype == np.float64
    with pytest.raises(ValueError, match=r"attention maps must have shape \(\.\.\., n, n\) = "
                                         r"\(\.\.\., 3, 3\), got \(2, 4, 3\)"):
        checks.attention_stack(np.ones((2, 4, 3)))
    with pytest.raises(ValueError, match=r"weights must have shape \(h, n, n\) = \(\.\.\., 5, 5\) "
                                         r"for 5 tokens, got \(3, 4, 4\)"):
        checks.attention_stack(A[0], "weights", 5, "(h, n, n)", "for 5 tokens")
    with pytest.raises(ValueError, match=r"at least 2 dimensions \(\.\.\., n, n\)"):
        checks.attention_stack(np.ones(4))
    with pytest.raises(ValueError, match=r"= \(layers, heads, 2, 2\)"):
        checks.attention_stack(np.ones((2, 2, 3, 3)), "A", 2, "(layers, heads, n, n)", ndim=4)
    with pytest.raises(ValueError, match="n, the number of tokens of A, must be a whole number >= 1"):
        checks.attention_stack(np.ones((3, 0, 0)), "A")


def test_bool_mask_takes_a_torch_tensor_as_it_is():
    torch = pytest.importorskip("torch")
    mask = torch.ones(1, 4, dtype=torch.bool, device="meta")  # no values: dtype and shape only
    assert checks.bool_mask(mask, (3, 4)) is mask
    with pytest.raises(TypeError, match=r"got dtype torch.float32; .* use mask.bool\(\)"):
        checks.bool_mask(torch.ones(3, 4), (3, 4))
    with pytest.raises(ValueError, match=r"mask of shape \(2, 4\) does not broadcast"):
        checks.bool_mask(torch.ones(2, 4, dtype=torch.bool), (3, 4))


def test_padding_flags_are_0_1_or_bool_and_say_which_rows_are_empty():
    np.testing.assert_array_equal(checks.padding_flags([[1, 1, 0]]), [[True, True, False]])
    assert checks.padding_flags(np.array([True, False])).dtype == bool
    for bad in ([[1, 2, 0]], [[0.5, 1]], [["a", "b"]]):
        with pytest.raises(ValueError, match=r"attention_mask must hold 0/1 or bool flags "
                                             r"\(1 = real token, 0 = padding\)"):
            checks.padding_flags(bad)
    with pytest.raises(ValueError, match="flags must hold 0/1"):
        checks.padding_flags([3], "flags")
    checks.padding_flags([[0, 0], [1, 0]])  # empty rows are fine unless asked
    with pytest.raises(ValueError, match="at least one real token"):
        checks.padding_flags([[0, 0], [1, 0]], real_in_each_row=True)


def test_one_mask_token_says_how_many_it_found():
    assert checks.one_mask_token("the [MASK] sat") == "the [MASK] sat"
    for text, k in (("no mask", 0), ("[MASK] and [MASK]", 2)):
        with pytest.raises(ValueError, match=rf"exactly one \[MASK\], got {k}: {re.escape(repr(text))}"):
            checks.one_mask_token(text)
    with pytest.raises(TypeError, match="text must be a string"):
        checks.one_mask_token(None)


def test_bool_mask_broadcasts_to_the_scores_or_says_why():
    assert checks.bool_mask(np.ones((1, 4), bool), (3, 4)).shape == (1, 4)
    with pytest.raises(TypeError, match=r"mask must be boolean .* use mask.astype\(bool\)"):
        checks.bool_mask(np.ones((3, 4)), (3, 4))
    with pytest.raises(ValueError, match=r"mask of shape \(2, 4\) does not broadcast to the "
                                         r"scores' shape \(3, 4\) \(\.\.\., n_q, n_k\)"):
        checks.bool_mask(np.ones((2, 4), bool), (3, 4))


def test_the_ignored_label_is_torchs_and_token_batch_checks_around_it():
    assert checks.IGNORE_INDEX == torch.nn.CrossEntropyLoss().ignore_index == -100
    ids = np.array([[2, 5, 0], [2, 7, 3]])
    flags = np.array([[1, 1, 0], [1, 1, 1]])
    assert checks.token_batch(ids, flags, 8, np.where(ids == 5, 5, checks.IGNORE_INDEX)) is not None
    with pytest.raises(ValueError, match=r"labels \(token ids, or -100 where no loss is taken\)"):
        checks.token_batch(ids, flags, 8, np.full(ids.shape, -1))
    with pytest.raises(ValueError, match=r"input_ids must be in 0..7 \(a vocabulary of 8\), got 9"):
        checks.token_batch(ids + 4, flags, 8)
    with pytest.raises(ValueError, match="labels and input_ids must have the same shape"):
        checks.token_batch(ids, flags, 8, ids[:, :2])
    with pytest.raises(ValueError, match=r"labels \(token ids, or -1 where no loss is taken\)"):
        checks.token_batch(ids, flags, 8, np.full(ids.shape, checks.IGNORE_INDEX), ignore=-1)
    with pytest.raises(ValueError, match="attention_mask must hold 0/1"):
        checks.token_batch(ids, flags - 1, 8)


def test_window_is_the_one_rule_for_a_sliding_windows_w():
    assert checks.window(4) == 4
    with pytest.raises(ValueError, match=r"w must be even: .* use 4 or 6"):
        checks.window(5)
    with pytest.raises(ValueError, match=r"w \(the window\) must be a whole number >= 1"):
        checks.window(0)


def test_positions_are_whole_numbers_in_0_to_n_minus_1_negative_ones_refused():
    np.testing.assert_array_equal(checks.positions([0, 2, np.int64(1)], "keys", 3), [0, 2, 1])
    assert checks.positions((), "global_idx", 3).shape == (0,)  # an empty list is a list
    with pytest.raises(ValueError, match=r"keys\[1\] must be a whole number in 0\.\.2 \(token "
                                         r"positions of n = 3 tokens\), got -1"):
        checks.positions([0, -1], "keys", 3)  # never "the last token"
    with pytest.raises(ValueError, match=r"keys\[0\] must be .* in 0\.\.2 .* got 3"):
        checks.positions([3], "keys", 3)
    with pytest.raises(TypeError, match=r"keys\[0\] must be a whole number"):
        checks.positions([0.5], "keys", 3)
    with pytest.raises(ValueError, match=r"keys must be a 1-D list of positions in 0\.\.2, got "
                                         r"shape \(1, 2\)"):
        checks.positions([[0, 1]], "keys", 3)


def test_within_positions_is_the_one_too_long_for_the_model_check():
    assert checks.within_positions(512, 512) == 512
    with pytest.raises(ValueError, match=r"^the input is 513 word pieces long but this model has "
                                         r"512 positions \(at most 512 pieces including \[CLS\] "
                                         r"and \[SEP\]\); shorten it$"):
        checks.within_positions(513, 512)
    with pytest.raises(ValueError, match=r"^an input is 9 word .* 8 positions .*; leave it out$"):
        checks.within_positions(9, 8, "leave it out", "an input")
    with pytest.raises(ValueError, match="the number of word pieces of the input must be a whole "
                                         "number >= 1, got 0"):
        checks.within_positions(0, 8)


def test_check_qkv_shapes_accepts_torch_sizes_and_names_both_shapes():
    assert checks.check_qkv_shapes(torch.Size([2, 5, 4]), (2, 7, 4), (2, 7, 3)) == (2,)
    assert checks.check_qkv_shapes((3, 4), (1, 3, 4), (5, 1, 3, 2)) == (5, 1)  # the broadcast lead
    with pytest.raises(ValueError, match=r"\(2, 5, 4\).*\(2, 7, 5\)"):
        checks.check_qkv_shapes(torch.Size([2, 5, 4]), (2, 7, 5), (2, 7, 3))
    with pytest.raises(ValueError, match=r"n_k.*\(7, 4\).*\(6, 3\)"):
        checks.check_qkv_shapes((5, 4), (7, 4), (6, 3))
    with pytest.raises(ValueError, match=r"X and X_kv must share d .*X has shape \(2, 3\), "
                                         r"X_kv has shape \(2, 4\)$"):
        checks.check_qkv_shapes((2, 3), (2, 4), (2, 4), ("X", "X_kv", "X_kv"), "d")


@pytest.mark.parametrize("width, names", [("d_k", ("Q", "K", "V")), ("d", ("X", "X_kv", "X_kv"))])
def test_check_qkv_shapes_refuses_empty_queries_and_keys_naming_the_range(width, names):
    assert checks.check_qkv_shapes((3, 1), (4, 1), (4, 0), names, width) == ()  # d_v = 0 is fine
    with pytest.raises(ValueError, match=rf"{width}, the last axis of {names[0]} and {names[1]}, "
                                         r"must be a whole number >= 1, got 0"):
        checks.check_qkv_shapes((3, 0), (4, 0), (4, 2), names, width)
