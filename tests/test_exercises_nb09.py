"""Tests of the notebook 09 checkers: each computes what it checks, names the mistake, never
raises."""

from types import SimpleNamespace

import numpy as np

from bertlib.exercises import nb09
from bertlib.tiny.agreement import build_tokenizer
from bertlib.tiny.pretrain import new_model, tiny_config
from bertlib.tiny.runs import COMMITTED, load_run

V = build_tokenizer().get_vocab_size()


def _run(layer, share=0.9):
    final = np.zeros((2, 4))
    final[layer, 1] = share
    return SimpleNamespace(history={"heads/subject_far": np.stack([np.zeros((2, 4)), final])})


def test_runs_prediction_counts_the_subject_heads_itself():
    runs = [_run(0), _run(1), _run(1), _run(1, 0.3)]
    assert nb09.subject_heads(runs) == [(0, 1, 0.9), (1, 1, 0.9), (1, 1, 0.9), None]
    assert "not answered yet" in str(nb09.check_runs_prediction(None, runs))
    right = nb09.check_runs_prediction(3, runs)
    assert right and "run 0, run 1, run 2" in right.message and "L1" not in right.message
    wrong = nb09.check_runs_prediction(4, runs)
    assert not wrong and "3 of 4, not 4" in wrong.message and "fewer runs" in wrong.message
    assert "L0" not in wrong.message and "L1" not in wrong.message  # the count gives no layer away
    too_few = nb09.check_runs_prediction(1, runs)
    assert not too_few and "more runs than you expected" in too_few.message
    assert "in 0..4" in nb09.check_runs_prediction(7, runs).message
    assert not nb09.check_runs_prediction(True, runs)
    assert "load_runs" in nb09.check_runs_prediction(1, "runs").message
    assert "load_runs" in nb09.check_runs_prediction(0, []).message  # no run: no "0 of 0"


def test_runs_prediction_takes_a_set_of_layers_when_heads_sit_in_several():
    runs = [_run(0), _run(1), _run(1), _run(1, 0.3)]
    for both in ([0, 1], (1, 0), {0, 1}, np.array([0, 1])):
        assert nb09.check_runs_prediction(3, runs, both), both
    for one in (0, 1):
        only = nb09.check_runs_prediction(3, runs, one)
        assert not only and f"layers 0 and 1, not layer {one}" in only.message
    assert "L0H1 0.90" in only.message  # a layer guess, once made, is shown every run's head
    assert nb09.check_runs_prediction(2, runs[1:], guess_layer=1)
    extra = nb09.check_runs_prediction(2, runs[1:], guess_layer=[0, 1])
    assert not extra and "layer 1, not layers 0 and 1" in extra.message
    alone = nb09.check_runs_prediction(1, runs[:1], guess_layer=1)  # one run, its head in layer 0
    assert not alone and "layer 0, not layer 1" in alone.message
    assert "layer-0 head can find" in alone.message and "layer-1 head can also" in alone.message
    assert nb09.check_runs_prediction(1, runs[:1], guess_layer=0)


def test_runs_prediction_checks_the_layers_form_whatever_the_count():
    runs = [_run(0), _run(1), _run(1), _run(1, 0.3)]
    for bad in ("1", 1.5, -1, 2, True, [], [1, 1], [0, "1"], [[0]]):
        for count in (3, 2):  # right count and wrong count alike
            answer = nb09.check_runs_prediction(count, runs, bad)
            assert not answer and "guess_layer" in answer.message, (bad, count)
    wrong_both = nb09.check_runs_prediction(2, runs, 1)  # a wrong count and a wrong layer
    assert not wrong_both and "3 of 4, not 2" in wrong_both.message
    assert "layers 0 and 1, not layer 1" in wrong_both.message
    assert nb09.check_runs_prediction(3, runs, 1.0) == nb09.check_runs_prediction(3, runs, 1)
    none = [_run(1, 0.3), _run(0, 0.2)]
    assert nb09.check_runs_prediction(0, none)
    empty = nb09.check_runs_prediction(0, none, guess_layer=1)
    assert empty and "no layer to judge" in empty.message


def test_attractor_prediction_measures_the_model_itself_and_refuses_one_with_attractors():
    assert "not answered yet" in str(nb09.check_attractor_prediction(None, None))
    assert "not answered yet" in str(nb09.check_attractor_prediction(0.5, None))
    assert "between 0 and 1" in nb09.check_attractor_prediction(3, None).message
    assert "BertForMaskedLM you trained" in nb09.check_attractor_prediction(0.5, 0.7).message
    untrained = new_model(tiny_config(V, 1, 2, 16), 0)
    answer = nb09.check_attractor_prediction(0.5, untrained)  # a coin flip's guess on a coin flip
    assert not answer and "not learned agreement yet" in answer.message
    committed = load_run(COMMITTED / "seed0").model  # trained with attractors: refused
    refused = nb09.check_attractor_prediction(1.0, committed)
    assert not refused and "with attractors" in refused.message
    del committed.config.bertlib_recipe  # unmarked, it is still told apart by what it does
    refused = nb09.check_attractor_prediction(1.0, committed)
    assert not refused and "looks trained with attractors" in refused.message


def test_design():
    assert "not answered yet" in str(nb09.check_design(None))
    assert "BertConfig" in nb09.check_design("big").message
    assert "vocab_size" in nb09.check_design(tiny_config(50, 3, 4, 64)).message
    assert "3 layers" in nb09.check_design(tiny_config(V, 2, 4, 64)).message
    assert "= 8 dimensions" in nb09.check_design(tiny_config(V, 3, 8, 64)).message
    narrow = tiny_config(V, 3, 4, 64)
    narrow.intermediate_size = 10  # fits the budget with 4 heads, but is not tiny_config's model
    assert "feed-forward width 10" in nb09.check_design(narrow).message
    over = nb09.check_design(tiny_config(V, 3, 4, 64))
    assert not over and "over the budget" in over.message
    assert nb09.check_design(tiny_config(V, 3, 3, 48))  # the most heads of 16 that fit
    small = nb09.check_design(tiny_config(V, 3, 2, 32))
    assert not small and "one more head" in small.message
    assert nb09.design_parameters(V, 3) <= nb09.DESIGN_BUDGET < nb09.design_parameters(V, 4)


def test_attractor_prediction_judges_the_guess_against_its_measurement():
    model = load_run(COMMITTED / "seed0").model
    # marked as trained without attractors: the recipe is trusted, however well it scores
    model.config.bertlib_recipe = {"constructions": ["simple", "comp"], "max_pp": 0}
    measured = float(nb09.check_attractor_prediction(0.5, model).message.split()[1])
    assert measured >= nb09.ATTRACTOR_TRAINED  # it scores like a model trained with attractors
    assert nb09.check_attractor_prediction(measured, model)
    low = nb09.check_attractor_prediction(measured - 0.3, model)
    assert not low and "pessimistic by 0.30" in low.message and "less often" in low.message
    coin = nb09.check_attractor_prediction(0.5, model)  # above a coin's range: a coin is wrong
    assert not coin and "at a coin's 0.5, the model is above that range" in coin.message


def test_attractor_guess_first_on_the_side_of_a_coin_then_within_0_1():
    verdict = nb09._attractor_verdict  # the judgement alone, on a measured value
    below = verdict(0.5, 0.40, 210)  # the learner's run: a coin's guess does not pass
    assert not below and "below the range of a coin's accuracy on 210 verbs" in below.message
    assert "which noun stands right before" in below.message
    assert not verdict(0.55, 0.40, 210) and not verdict(0.7, 0.40, 210)
    assert verdict(0.45, 0.40, 210) and verdict(0.3, 0.40, 210)  # below, within 0.1 as printed
    far = verdict(0.2, 0.404, 210)
    assert not far and "pessimistic by 0.20" in far.message
    assert verdict(0.5, 0.52, 210) and verdict(0.45, 0.52, 210)  # at chance: 0.1 around it
    assert not verdict(0.3, 0.52, 210)
