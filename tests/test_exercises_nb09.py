"""Tests of the notebook 09 checkers: each names the mistake and never raises."""

from bertlib.exercises import nb09
from bertlib.pretrain import tiny_config
from bertlib.probes import build_tokenizer

V = build_tokenizer().get_vocab_size()


def test_layer_guess():
    assert "not answered yet" in str(nb09.check_layer_guess(None, 1, 2))
    assert nb09.check_layer_guess(1, 1, 2)
    wrong = nb09.check_layer_guess(0, 1, 2)
    assert not wrong and "layer 0" in wrong.message
    assert "in 0..1" in nb09.check_layer_guess(2, 1, 2).message
    assert not nb09.check_layer_guess(True, 1, 2)


def test_attractor_prediction():
    assert "not answered yet" in str(nb09.check_attractor_prediction(None, 0.5))
    assert "not answered yet" in str(nb09.check_attractor_prediction(0.5, None))
    assert nb09.check_attractor_prediction(0.55, 0.5)
    low = nb09.check_attractor_prediction(0.2, 0.6)
    assert not low and "pessimistic by 0.40" in low.message
    assert "between 0 and 1" in nb09.check_attractor_prediction(3, 0.5).message


def test_design():
    assert "not answered yet" in str(nb09.check_design(None))
    assert "BertConfig" in nb09.check_design("big").message
    assert "vocab_size" in nb09.check_design(tiny_config(50, 3, 4, 64)).message
    assert "3 layers" in nb09.check_design(tiny_config(V, 2, 4, 64)).message
    assert "= 8 dimensions" in nb09.check_design(tiny_config(V, 3, 8, 64)).message
    over = nb09.check_design(tiny_config(V, 3, 4, 64))
    assert not over and "over the budget" in over.message
    assert nb09.check_design(tiny_config(V, 3, 3, 48))
