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
    assert nb09.check_runs_prediction(3, runs)
    wrong = nb09.check_runs_prediction(4, runs)
    assert not wrong and "3 of 4, not 4" in wrong.message and "run 3: none" in wrong.message
    assert "fewer runs than you expected" in wrong.message
    too_few = nb09.check_runs_prediction(1, runs)
    assert not too_few and "more runs than you expected" in too_few.message
    layer = nb09.check_runs_prediction(3, runs, guess_layer=1)
    assert not layer and "layer(s) [0, 1]" in layer.message
    assert nb09.check_runs_prediction(2, runs[1:], guess_layer=1)
    assert "guess_layer" in nb09.check_runs_prediction(2, runs[1:], guess_layer="one").message
    assert "in 0..4" in nb09.check_runs_prediction(7, runs).message
    assert not nb09.check_runs_prediction(True, runs)
    assert "load_runs" in nb09.check_runs_prediction(1, "runs").message


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
    assert nb09.check_attractor_prediction(measured, model)
    low = nb09.check_attractor_prediction(max(0.0, measured - 0.3), model)
    assert not low and "pessimistic by 0.30" in low.message and "less often" in low.message
    assert measured >= nb09.ATTRACTOR_TRAINED  # it scores like a model trained with attractors
