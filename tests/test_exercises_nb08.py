"""Tests for the notebook 08 checkers: right answers pass, typical mistakes get specific advice."""

import numpy as np
import torch

from bertlib import custom
from bertlib.exercises import nb08
from bertlib.loading import load_bert
from bertlib.models import encode

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
    S = nb08.reference_position_prior(A, B)
    # [CLS] the cat sat on the mat [SEP] | a fe ##line rested on the rug [SEP]
    assert S.shape == (16, 16) and (S[:8, :8] == 1).all() and (S[8:, 8:] == 1).all()
    assert S[1, 8] == 1 and S[2, 9] == S[2, 10] == 1 and S[3, 11] == 1 and S[6, 14] == 1
    assert S[:8, 8:].sum() == 7 and (S == S.T).all()


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
    assert not negative and ">= 0" in negative.message


def layer0(prior=None):
    model = load_bert()
    enc = encode(A, B)
    with torch.no_grad():
        if prior is None:
            return model.model(**enc, output_attentions=True).attentions[0][0]
        with custom.use_prior_attention(model, layers=[0]):
            S = torch.tensor(prior, dtype=torch.float32)[None]
            return model.model(**enc, prior=S, output_attentions=True).attentions[0][0]


def test_plugged_in_checker_accepts_the_right_weights_and_explains_mistakes():
    S = nb08.reference_position_prior(A, B)
    right = nb08.check_plugged_in(layer0(S).mean(0).numpy(), S)
    assert right and "moved layer 0" in right.message
    heads = nb08.check_plugged_in(layer0(S).numpy(), S)
    assert not heads and "12 matrices, one per head" in heads.message
    standard = nb08.check_plugged_in(layer0().mean(0).numpy(), S)
    assert not standard and "standard weights" in standard.message
    other = nb08.check_plugged_in(layer0(S)[3].numpy(), S)
    assert not other and "max difference" in other.message
    assert "not answered yet" in nb08.check_plugged_in(None, S).message
    assert "shape (16, 16)" in nb08.check_plugged_in(np.ones((4, 4)), S).message
    assert "cannot be used" in nb08.check_plugged_in(layer0(S).mean(0).numpy(), -S).message


def test_plugged_in_checker_notices_the_shared_model_left_in_prior_mode():
    S = nb08.reference_position_prior(A, B)
    with custom.use_prior_attention(load_bert()):
        feedback = nb08.check_plugged_in(np.zeros((16, 16)), S)
    assert not feedback and "undo()" in feedback.message
    assert load_bert().model.config._attn_implementation == "eager"
