"""Tests of the notebook 09 checkers: each computes what it checks, names the mistake, never
raises."""

from types import SimpleNamespace

import numpy as np

from bertlib.exercises import nb09, reset_tries
from bertlib.tiny.agreement import build_tokenizer
from bertlib.tiny.pretrain import new_model, tiny_config
from bertlib.tiny.runs import COMMITTED, load_run

V = build_tokenizer().get_vocab_size()


def _run(layer, share=0.9):
    final = np.zeros((2, 4))
    final[layer, 1] = share
    return SimpleNamespace(history={"heads/subject_far": np.stack([np.zeros((2, 4)), final])})


def test_runs_prediction_counts_the_subject_heads_itself():
    reset_tries()
    runs = [_run(0), _run(1), _run(1), _run(1, 0.3)]
    assert nb09.subject_heads(runs) == [(0, 1, 0.9), (1, 1, 0.9), (1, 1, 0.9), None]
    assert "not answered yet" in str(nb09.check_runs_prediction(None, runs))
    right = nb09.check_runs_prediction(3, runs)
    assert right and "run 0, run 1, run 2" in right.message and "L1" not in right.message
    wrong = nb09.check_runs_prediction(4, runs)
    assert not wrong and "not 4 of 4" in wrong.message and "fewer runs" in wrong.message
    too_few = nb09.check_runs_prediction(1, runs)
    assert not too_few and "more runs than you expected" in too_few.message
    for answer in (wrong, too_few):  # a wrong count gives away neither the count nor the runs
        assert "3 of" not in answer.message and "run 0" not in answer.message
        assert "L0" not in answer.message and "L1" not in answer.message
    assert "in 0..4" in nb09.check_runs_prediction(7, runs).message
    assert not nb09.check_runs_prediction(True, runs)
    assert "load_runs" in nb09.check_runs_prediction(1, "runs").message
    assert "load_runs" in nb09.check_runs_prediction(0, []).message  # no run: no "0 of 0"


def test_runs_prediction_takes_a_set_of_layers_when_heads_sit_in_several():
    reset_tries()
    runs = [_run(0), _run(1), _run(1), _run(1, 0.3)]
    for both in ([0, 1], (1, 0), {0, 1}, np.array([0, 1])):
        assert nb09.check_runs_prediction(3, runs, both), both
    assert "L0H1 0.90" in nb09.check_runs_prediction(3, runs, [0, 1]).message  # shown when right
    for one in (0, 1):
        reset_tries()
        only = nb09.check_runs_prediction(3, runs, one)
        assert not only and "3 of 4, right" in only.message  # the count was right: it may say so
        assert f"layer guess (layer {one}) is not where" in only.message
        assert "L0H1" not in only.message and "run 0" not in only.message
    assert nb09.check_runs_prediction(2, runs[1:], guess_layer=1)
    extra = nb09.check_runs_prediction(2, runs[1:], guess_layer=[0, 1])
    assert not extra and "(layers 0 and 1) is not where" in extra.message
    alone = nb09.check_runs_prediction(1, runs[:1], guess_layer=1)  # one run, its head in layer 0
    assert not alone and "layer-0 head can find" in alone.message
    assert "layer-1 head can also" in alone.message
    assert nb09.check_runs_prediction(1, runs[:1], guess_layer=0)


def test_runs_prediction_checks_the_layers_form_whatever_the_count():
    reset_tries()
    runs = [_run(0), _run(1), _run(1), _run(1, 0.3)]
    for bad in ("1", 1.5, -1, 2, True, [], [1, 1], [0, "1"], [[0]]):
        for count in (3, 2):  # right count and wrong count alike
            answer = nb09.check_runs_prediction(count, runs, bad)
            assert not answer and "guess_layer" in answer.message, (bad, count)
    wrong_both = nb09.check_runs_prediction(2, runs, 1)  # a wrong count and a wrong layer
    assert not wrong_both and "not 2 of 4" in wrong_both.message
    assert "(layer 1) is not where" in wrong_both.message and "layers 0 and 1" not in (
        wrong_both.message)
    wrong_count = nb09.check_runs_prediction(2, runs, [0, 1])  # a wrong count, the right layers
    assert not wrong_count and "layer guess is right" in wrong_count.message
    reset_tries()
    assert nb09.check_runs_prediction(3, runs, 1.0).message.split(" (explained")[0] == (
        nb09.check_runs_prediction(3, runs, 1).message.split(" (explained")[0])
    none = [_run(1, 0.3), _run(0, 0.2)]
    assert nb09.check_runs_prediction(0, none)
    reset_tries()
    wrong_none = nb09.check_runs_prediction(1, none, 1)  # no head anywhere: not given away
    assert not wrong_none and "No run has such a head" not in wrong_none.message
    assert "not where the heads sit" in wrong_none.message and "?." not in wrong_none.message
    lone = nb09.check_runs_prediction(1, none[:1])
    assert not lone and "Same recipe, other seeds" not in lone.message  # one run: no other seeds
    for count_runs in (none, runs):  # 0 runs and a layer contradict each other, whatever the runs
        empty = nb09.check_runs_prediction(0, count_runs, guess_layer=1)
        assert not empty and empty.form and "no head there is no layer" in empty.message
    assert not nb09.check_runs_prediction(1, none, guess_layer=1)  # no head: no layer is right


def test_runs_prediction_explains_only_the_first_tries():
    reset_tries()
    runs = [_run(0), _run(1), _run(1), _run(1, 0.3)]
    for guess in (0, 1, 2):
        assert "explained try" in nb09.check_runs_prediction(guess, runs).message
    late = nb09.check_runs_prediction(4, runs)
    assert not late and "fewer" not in late.message and "Reread" in late.message
    assert nb09.check_runs_prediction(3, runs)  # a right answer always passes


def test_runs_prediction_the_same_wrong_guess_again_uses_up_no_try():
    # learner 32 (notebooks 01-03, the same mechanism): an unchanged answer checked again gets the
    # same message, noted, and is not counted; the runs are compared as themselves, not copied
    from bertlib.exercises import wrong_tries
    from bertlib.exercises.ladder import UNCHANGED_TRY

    reset_tries()
    runs = [_run(0), _run(1), _run(1), _run(1, 0.3)]
    first = nb09.check_runs_prediction(1, runs, 0)
    assert first.message.endswith("(explained try 1 of 3)")
    assert nb09.check_runs_prediction(1, runs, 0).message == first.message + UNCHANGED_TRY
    assert nb09.check_runs_prediction(1.0, runs, guess_layer=0).message.endswith(UNCHANGED_TRY)
    assert wrong_tries(nb09.check_runs_prediction) == 1
    for new in ((1, runs, 1), (1, list(runs), 0), (2, runs, 0)):  # a layer, other runs, a count
        assert not nb09.check_runs_prediction(*new).message.endswith(UNCHANGED_TRY)
    assert wrong_tries(nb09.check_runs_prediction) == 4


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
    zero = tiny_config(V, 3, 3, 48)
    zero.num_attention_heads = 0
    assert "at least one head" in nb09.check_design(zero).message  # no ZeroDivisionError
    tied = tiny_config(V, 3, 3, 48)
    tied.tie_word_embeddings = True  # a model of its own: "one more head" is counted for it
    answer = nb09.check_design(tied)
    more = nb09.design_parameters(V, 4, like=tied)
    assert answer and f"{more:,}" in answer.message and more < nb09.design_parameters(V, 4)


def test_attractor_prediction_judges_the_guess_against_its_measurement():
    reset_tries()
    model = load_run(COMMITTED / "seed0").model
    # marked as trained without attractors: the recipe is trusted, however well it scores
    model.config.bertlib_recipe = {"constructions": ["simple", "comp"], "max_pp": 0}
    measured, _ = nb09.attractor_accuracy(model)
    assert measured >= nb09.ATTRACTOR_TRAINED  # it scores like a model trained with attractors
    right = nb09.check_attractor_prediction(measured, model)
    assert right and f"measured {measured:.2f}" in right.message  # shown once guessed right
    low = nb09.check_attractor_prediction(measured - 0.25, model)
    assert not low and "too low, by 0.1 to 0.3" in low.message and "less often" in low.message
    coin = nb09.check_attractor_prediction(0.5, model)  # above a coin's range: a coin is wrong
    assert not coin and "at a coin's 0.5, but it scores above" in coin.message
    for wrong in (low, coin):  # a wrong guess is never told the measured value
        assert f"{measured:.2f}" not in wrong.message


def test_attractor_guess_first_on_the_side_of_a_coin_then_within_0_1():
    reset_tries()
    verdict = nb09._attractor_verdict  # the judgement alone, on a measured value
    below = verdict(0.5, 0.40, 210)  # the learner's run: a coin's guess does not pass
    assert not below and "below the range of a coin's accuracy on 210 verbs" in below.message
    assert "which noun stands right before" in below.message
    assert not verdict(0.55, 0.40, 210) and not verdict(0.7, 0.40, 210)
    assert verdict(0.45, 0.40, 210) and verdict(0.3, 0.40, 210)  # below, within 0.1 as printed
    far = verdict(0.2, 0.404, 210)
    assert not far and "too low, by 0.1 to 0.3" in far.message and "0.40" not in far.message
    high = verdict(0.9, 0.404, 210)  # a guess above a coin against a model below it: the side
    assert not high and "0.40" not in high.message and "scores below" in high.message
    assert "too low, by more than 0.3" in verdict(0.1, 0.52, 210).message
    # the first reply names the side, never the coin range's bounds: a guess made from them (just
    # below the lower one) would pass for the learner's run, and never may
    lo, _ = nb09.chance_interval(210)
    rest = high.message.split("0.90", 1)[1].replace("210", "").replace("a coin's 0.5", "")
    assert not any(c.isdigit() for c in rest)  # no number but the guess, 0.5 and the verbs' count
    for derived in (round(lo - 0.1, 2), round(lo - 0.05, 2), round(lo, 2)):
        assert verdict(derived, 0.40, 210)  # these would pass: so the reply must not give lo
    assert f"{lo:.2f}" not in far.message  # nor does a later reply
    assert verdict(0.5, 0.52, 210) and verdict(0.45, 0.52, 210)  # at chance: 0.1 around it
    assert not verdict(0.3, 0.52, 210)



def test_runs_prediction_on_the_committed_runs_gives_no_count_away():
    from bertlib.tiny.runs import load_runs

    reset_tries()
    runs = load_runs()[0]
    assert not any(nb09.subject_heads(runs))  # the committed runs have no subject head
    wrong = nb09.check_runs_prediction(2, runs, 1)  # count and layer both wrong
    assert not wrong and "fewer runs" in wrong.message and "No run" not in wrong.message
