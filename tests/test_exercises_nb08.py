"""Tests for the notebook 08 checkers: right answers pass, typical mistakes get specific advice."""

import numpy as np
import torch

from bertlib.exercises import nb08
from bertlib.hf import custom
from bertlib.hf.loading import load_bert
from bertlib.hf.models import encode

A, B = nb08.CHECK_PAIRS[0]


def piece_positions(a, b):
    """A typical mistake: positions of word pieces, not of words."""
    seg = encode(a, b)["token_type_ids"][0].numpy()
    tokens = load_bert().tokenizer.convert_ids_to_tokens(encode(a, b)["input_ids"][0])
    real = np.array([t not in ("[CLS]", "[SEP]") for t in tokens])
    pos = np.where(seg == 0, np.arange(len(seg)), np.arange(len(seg)) - seg.argmax() + 1)
    across = (pos[:, None] == pos[None, :]) & real[:, None] & real[None, :]
    return np.where(seg[:, None] == seg[None, :], 1.0, across.astype(float))


def test_reference_position_prior_on_the_cat_pair():
    R = nb08.reference_position_prior(A, B)
    # [CLS] the cat sat on the mat [SEP] | a fe ##line rested on the rug [SEP]
    assert R.shape == (16, 16) and (R[:8, :8] == 1).all() and (R[8:, 8:] == 1).all()
    assert R[1, 8] == 1 and R[2, 9] == R[2, 10] == 1 and R[3, 11] == 1 and R[6, 14] == 1
    assert R[:8, 8:].sum() == 7 and (R == R.T).all()


def test_position_prior_checker_accepts_the_reference():
    assert nb08.check_position_prior(nb08.reference_position_prior)


def test_position_prior_checker_explains_mistakes():
    none = nb08.check_position_prior(None)
    assert not none and "not answered yet" in none.message
    shape = nb08.check_position_prior(lambda a, b: np.ones((3, 3)))
    assert not shape and "(16, 16)" in shape.message
    pieces = nb08.check_position_prior(piece_positions)
    assert not pieces and "pieces of one word share" in pieces.message
    specials = nb08.check_position_prior(
        lambda a, b: np.maximum(nb08.reference_position_prior(a, b),
                                np.eye(len(nb08.reference_position_prior(a, b)))[::-1]))
    assert not specials and "[CLS] and [SEP]" in specials.message
    inside = nb08.check_position_prior(lambda a, b: nb08.reference_position_prior(a, b) * 0.5)
    assert not inside and "inside each sentence" in inside.message
    crash = nb08.check_position_prior(lambda a, b: 1 / 0)
    assert not crash and "ZeroDivisionError" in crash.message
    negative = nb08.check_position_prior(lambda a, b: -nb08.reference_position_prior(a, b))
    assert not negative and "from 0 to 1" in negative.message


def layer0(prior=None):
    model = load_bert()
    enc = encode(A, B)
    with torch.no_grad():
        if prior is None:
            return model.model(**enc, output_attentions=True).attentions[0][0]
        with custom.use_prior_attention(model, layers=[0]):
            R = torch.tensor(prior, dtype=torch.float32)[None]
            return model.model(**enc, prior=R, output_attentions=True).attentions[0][0]


def test_plugged_in_checker_accepts_the_right_weights_and_explains_mistakes():
    R = nb08.reference_position_prior(A, B)
    right = nb08.check_plugged_in(layer0(R).mean(0).numpy(), R)
    assert right and "moved layer 0" in right.message
    heads = nb08.check_plugged_in(layer0(R).numpy(), R)
    assert not heads and "12 matrices, one per head" in heads.message
    standard = nb08.check_plugged_in(layer0().mean(0).numpy(), R)
    assert not standard and "standard attention" in standard.message
    other = nb08.check_plugged_in(layer0(R)[3].numpy(), R)
    assert not other and "max difference" in other.message
    assert "not answered yet" in nb08.check_plugged_in(None, R).message
    assert "shape (16, 16)" in nb08.check_plugged_in(np.ones((4, 4)), R).message
    assert "not the same-position prior" in nb08.check_plugged_in(layer0(R).mean(0).numpy(),
                                                                  -R).message
    # the (1, n, n) tensor the exercise feeds the model is accepted as the prior, and as weights
    assert nb08.check_plugged_in(layer0(R).mean(0, keepdim=True), torch.tensor(R)[None])


def test_plugged_in_checker_refuses_the_lessons_own_prior_and_weights():
    """Section 2 already ran the lexicon prior on this pair: those weights must not pass."""
    lexicon = custom.similarity_prior(A, B, model=load_bert())
    lesson = nb08.check_plugged_in(layer0(lexicon).mean(0).numpy(), lexicon)
    assert not lesson and "lesson's lexicon prior" in lesson.message


def test_plugged_in_checker_notices_the_shared_model_left_in_prior_mode():
    R = nb08.reference_position_prior(A, B)
    with custom.use_prior_attention(load_bert()):
        feedback = nb08.check_plugged_in(np.zeros((16, 16)), R)
    assert not feedback and "undo()" in feedback.message
    assert load_bert().model.config._attn_implementation == "eager"


def with_first_sep(a, b, row):
    """The reference prior with the first [SEP]'s row and column replaced by ``row`` (n,)."""
    R = nb08.reference_position_prior(a, b).copy()
    sep = nb08._tokens(a, b).index("[SEP]")
    R[sep], R[:, sep] = row(a, b), row(a, b)
    return R


def segment(a, b):
    return encode(a, b)["token_type_ids"][0].numpy()


def across_only(a, b, value):
    """The reference prior with its cross-sentence entries multiplied by ``value``."""
    R = nb08.reference_position_prior(a, b).copy()
    seg = segment(a, b)
    R[seg[:, None] != seg[None, :]] *= value
    return R


def off_by_one(a, b):
    """Word k of a linked with word k + 1 of b (both ways), 1 inside."""
    enc = encode(a, b)
    seq = np.array([-1 if s is None else s for s in enc.sequence_ids(0)])
    word = np.array([-1 if w is None else w for w in enc.word_ids(0)])
    link = (seq[:, None] == 0) & (seq[None, :] == 1) & (word[None, :] == word[:, None] + 1)
    seg = segment(a, b)
    return np.where(seg[:, None] == seg[None, :], 1.0, (link | link.T).astype(float))


def one_way(a, b):
    R = nb08.reference_position_prior(a, b).copy()
    seg = segment(a, b)
    R[np.ix_(seg == 1, seg == 0)] = 0
    return R


def no_stop_words(a, b):
    R = nb08.reference_position_prior(a, b).copy()
    seg = segment(a, b)
    for i, token in enumerate(nb08._tokens(a, b)):
        if token in custom.STOP_WORDS:
            R[i, seg != seg[i]] = R[seg != seg[i], i] = 0
    return R


def test_position_prior_checker_names_the_actual_mistake():
    cases = {
        "lesson's lexicon rule": lambda a, b: with_first_sep(a, b, lambda a, b: 0),
        "(you put it with b)": lambda a, b: with_first_sep(a, b, lambda a, b: segment(a, b)),
        "not symmetric": one_way,
        "off by one": off_by_one,
        "every entry is 1 or 0": lambda a, b: across_only(a, b, 0.5),
        "from 0 to 1": lambda a, b: across_only(a, b, 2.0),
        "no stop-word list": no_stop_words,
    }
    for expected, fn in cases.items():
        feedback = nb08.check_position_prior(fn)
        assert not feedback and expected in feedback.message, (expected, feedback.message)
        assert "count words, not word pieces" not in feedback.message


def design(cat_row):
    R = np.ones((16, 16))
    R[2] = cat_row
    return R


def test_design_checker_refuses_priors_that_do_not_single_out_feline():
    """An all-zero prior, or a zeroed cat row, makes attention uniform (2/16 on feline, more
    than the 2x target) without any link: refused, and the message says why."""
    for R in (np.zeros((16, 16)), design(0.0), design(np.r_[np.zeros(9), 0.01, 0.01, np.zeros(5)]),
              design(np.r_[np.ones(9), 1.0, 1.0, np.zeros(5)])):
        feedback = nb08.check_prior_design(R)
        assert not feedback and "does not single out 'feline'" in feedback.message
        assert "uniform, 0.125" in feedback.message


def test_design_checker_passes_the_link_and_compares_it_with_a_wiped_row():
    feedback = nb08.check_prior_design(design(np.r_[np.zeros(9), 1.0, 1.0, np.zeros(5)]))
    assert feedback and "cat's row all 0 (no link, uniform attention) gives 0.125" in feedback.message
    transposed = np.ones((16, 16))
    transposed[[9, 10]] = 0
    transposed[[9, 10], 2] = 1
    assert "QUERY's row" in nb08.check_prior_design(transposed).message
