"""Tests of bertlib.tiny.mechanism: heads ablated together, the number sentence_set, activation patching."""

import copy

import numpy as np
import pytest
import torch

from bertlib.hf.ablation import ablated_heads
from bertlib.paper.attention import attention_scale
from bertlib.tiny import agreement
from bertlib.tiny import grammar as g
from bertlib.tiny import mechanism as mech
from bertlib.tiny.runs import COMMITTED, load_run


def test_head_groups_are_singles_pairs_within_a_layer_and_layers():
    groups = mech.head_groups(2, 3)
    labels = [label for label, _ in groups]
    assert labels[:6] == ["L0H0", "L0H1", "L0H2", "L1H0", "L1H1", "L1H2"]
    assert labels[6:9] == ["L0H0+H1", "L0H0+H2", "L0H1+H2"] and labels[-1] == "L1 all"
    assert dict(groups)["L1 all"] == [(1, 0), (1, 1), (1, 2)]
    assert len(groups) == 6 + 2 * 3 + 2


def test_cross_layer_groups_pair_every_head_with_every_head_of_a_later_layer():
    groups = mech.cross_layer_groups(3, 2)
    assert len(groups) == 3 * 2 * 2  # layer pairs (0,1) (0,2) (1,2), 2 x 2 heads each
    assert groups[0] == ("L0H0+L1H0", [(0, 0), (1, 0)]) and groups[-1][0] == "L1H1+L2H1"
    with pytest.raises(ValueError, match="heads must be a whole number >= 1"):
        mech.cross_layer_groups(2, 0)


def test_agreement_correct_is_measure_s_correct_without_padding(tok, tiny):
    sentence_set = agreement.make_sentence_set(tok, g.generate(20, g.CONSTRUCTIONS, seed=5, split="test"))
    assert len(set(sentence_set.length)) > 2  # rows of several lengths, so the padding is really cut
    expected = agreement.measure_on(tiny, sentence_set)["correct"]
    assert np.array_equal(mech.agreement_correct(tiny, sentence_set), expected)


def test_ablated_heads_switches_off_exactly_the_listed_heads(tok, tiny):
    sentence_set = agreement.make_sentence_set(tok, g.generate(4, seed=0, split="test"))
    before = agreement.measure_on(tiny, sentence_set)
    with ablated_heads([(0, 0), (0, 1)], model=tiny):
        during = agreement.measure_on(tiny, sentence_set)
    assert np.allclose(during["subject"][0], 0.0) and not np.allclose(during["subject"][1], 0.0)
    assert np.allclose(agreement.measure_on(tiny, sentence_set)["p_right"], before["p_right"])
    with pytest.raises(ValueError, match=r"head must be a whole number in 0..1"):
        with ablated_heads([(0, 2)], model=tiny):
            pass


def test_ablation_grid_row_zero_is_the_intact_model(tok, tiny):
    sentence_set = agreement.make_sentence_set(tok, g.generate(12, g.CONSTRUCTIONS, seed=0, split="test"))
    labels, names, acc = mech.ablation_grid(tiny, sentence_set, mech.head_groups(2, 2))
    table = agreement.agreement_table(sentence_set, agreement.measure_on(tiny, sentence_set)["correct"])
    assert labels[0] == "none" and names == list(table)
    assert acc.shape == (1 + 4 + 2 + 2, len(names))
    assert np.allclose(acc[0], [table[n]["model"] for n in names])
    verdicts = mech.ablated_correct(tiny, sentence_set, mech.head_groups(2, 2))
    assert np.array_equal(mech.ablation_table(sentence_set, verdicts)[1], acc)  # one pass, two uses
    with pytest.raises(ValueError, match="groups, rows"):
        mech.ablation_table(sentence_set, verdicts[0])
    with ablated_heads([(0, 1), (1, 0)], model=tiny):
        off = agreement.agreement_table(sentence_set, agreement.measure_on(tiny, sentence_set)["correct"])
    labels, _, acc = mech.ablation_grid(tiny, sentence_set, mech.cross_layer_groups(2, 2))
    assert np.allclose(acc[labels.index("L0H1+L1H0")], [off[n]["model"] for n in names])
    base, drops = mech.ablation_drops(tiny, sentence_set, mech.cross_layer_groups(2, 2))
    whole = agreement.measure_on(tiny, sentence_set)["correct"].mean()
    assert base == pytest.approx(whole) and drops.shape == (4,)
    n = np.array([table[k]["n"] for k in names])  # the overall drop is the rows' weighted mean
    assert drops[1] == pytest.approx(whole - (acc[labels.index("L0H1+L1H0")] * n).sum() / n.sum())


def test_minimal_pairs_flip_the_subject_and_its_verbs_only(tok):
    sents = g.generate(6, g.CONSTRUCTIONS, seed=3, split="test")
    a, b = mech.minimal_pairs(tok, sents)
    assert len(a.ids) == sum(len(s.verbs) for s in sents) and a.ids.shape == b.ids.shape
    r = np.arange(len(a.ids))
    assert np.all(a.ids[r, a.subject] != b.ids[r, b.subject])
    assert np.array_equal(a.right, b.wrong) and np.array_equal(a.wrong, b.right)
    changed = (a.ids != b.ids).sum(1)
    assert changed.min() >= 1 and changed.max() <= 3  # the noun, and verbs of that noun


def test_patching_the_whole_input_of_the_verb_row_reproduces_the_flipped_sentence(tok, tiny):
    a, b = mech.minimal_pairs(tok, g.generate(8, seed=4, split="test"))
    flipped = agreement.measure_on(tiny, b)["log_odds"]  # right/wrong of b = wrong/right of a
    # patching the last layer at the verb gives the verb exactly the flipped sentence's output
    last = tiny.config.num_hidden_layers
    assert np.array_equal(mech.patch_flip(tiny, a, b, last, "verb"), flipped > 0)
    none = mech.patch_flip(tiny, a, a, 1, "subject")  # patching from itself changes nothing
    assert np.array_equal(none, agreement.measure_on(tiny, a)["log_odds"] < 0)
    with pytest.raises(ValueError, match="where must be one of"):
        mech.patch_flip(tiny, a, b, 1, "object")
    assert torch.is_grad_enabled()


def test_patch_flips_is_patch_flip_at_every_layer_and_position(tok, tiny):
    sentences = g.generate(40, g.CONSTRUCTIONS, seed=8, split="test")
    a, b = mech.minimal_pairs(tok, sentences)
    assert len(set(a.length)) > 2  # rows of several lengths: the padding is really cut
    tiny = copy.deepcopy(tiny)  # weights 3 times the initial ones: patches that flip choices
    with torch.no_grad():
        for p in tiny.parameters():
            p.mul_(3)
    fast = mech.patch_flips(tiny, a, b)
    assert fast.shape == (tiny.config.num_hidden_layers + 1, len(mech.POSITIONS), len(a.verb))
    plain = [[mech.patch_flip(tiny, a, b, layer, where) for where in mech.POSITIONS]
             for layer in range(tiny.config.num_hidden_layers + 1)]
    assert np.array_equal(fast, np.array(plain))
    assert fast.any() and not fast.all()  # some patches flip and some do not: the test can fail
    with pytest.raises(ValueError, match="original's ids"):
        mech.patch_flips(tiny, a, agreement.subset(b, slice(1, None)))



def test_between_positions_reach_every_word_between_subject_and_verb(tok, tiny):
    a, b = mech.minimal_pairs(tok, g.generate(40, g.CONSTRUCTIONS, seed=8, split="test"))
    between = mech.between_positions(a)
    gap = int((a.verb - a.subject).max())
    assert list(between) == [f"subject + {k}" for k in range(2, gap)]
    at = np.stack([f(a) for f in between.values()])  # (K, R)
    inside = (at > a.subject) & (at < a.verb)
    assert (inside | (at == -1)).all() and (at == -1).any()  # absent where not strictly between
    # with "after subject" (subject + 1), every word strictly between is reached exactly once
    reached = inside.sum(0) + (a.subject + 1 < a.verb)
    assert np.array_equal(reached, np.maximum(a.verb - a.subject - 1, 0))
    tiny = copy.deepcopy(tiny)
    with torch.no_grad():
        for p in tiny.parameters():
            p.mul_(3)
    both = {**mech.POSITIONS, **between}
    fast = mech.patch_flips(tiny, a, b, both)
    assert fast.shape == (tiny.config.num_hidden_layers + 1, len(both), len(a.verb))
    plain = [[mech.patch_flip(tiny, a, b, layer, w, positions=both) for w in both]
             for layer in range(tiny.config.num_hidden_layers + 1)]
    assert np.array_equal(fast, np.array(plain))
    assert not fast[:, len(mech.POSITIONS):][:, at == -1].any()  # absent: never a flip
    assert fast[1:, len(mech.POSITIONS):].any()  # present: the test can see a flip
    heads = mech.head_patch_flips(tiny, a, b, 0, "subject + 2", positions=both)
    assert not heads[:, at[0] == -1].any()
    with pytest.raises(ValueError, match="where must be one of"):
        mech.patch_flip(tiny, a, b, 1, "subject + 2")  # not in POSITIONS alone


def test_mean_ablation_with_zero_means_is_zero_ablation_and_keeps_the_mean_otherwise(tok, tiny):
    sentence_set = agreement.make_sentence_set(tok, g.generate(24, g.CONSTRUCTIONS, seed=4, split="test"))
    groups = mech.head_groups(2, 2)[:3] + mech.cross_layer_groups(2, 2)[:1]
    means = mech.head_means(tiny, sentence_set)
    assert means.shape == (2, tiny.config.hidden_size) and np.abs(means).sum() > 0
    base, zero = mech.ablation_drops(tiny, sentence_set, groups)
    same = mech.mean_ablation_drops(tiny, sentence_set, groups, np.zeros_like(means))
    assert same[0] == base and np.allclose(same[1], zero)
    # a head replaced by its own mean over the sentences: its average contribution stays
    _, mean = mech.mean_ablation_drops(tiny, sentence_set, groups)
    assert mean.shape == (len(groups),)
    with pytest.raises(ValueError, match="means"):
        mech.mean_ablation_drops(tiny, sentence_set, groups, np.zeros((3, 5)))


def test_ablated_correct_is_each_group_switched_off_in_turn(tok, tiny):
    sentence_set = agreement.make_sentence_set(tok, g.generate(30, g.CONSTRUCTIONS, seed=7, split="test"))
    tiny = copy.deepcopy(tiny)  # weights 3 times the initial ones: heads whose removal matters
    with torch.no_grad():
        for p in tiny.parameters():
            p.mul_(3)
    groups = mech.head_groups(2, 2) + mech.cross_layer_groups(2, 2)
    expected = [mech.agreement_correct(tiny, sentence_set)]
    for _, heads in groups:  # the plain way: one group at a time, one forward pass each
        with ablated_heads(heads, "zero", tiny):
            expected.append(mech.agreement_correct(tiny, sentence_set))
    fast = mech.ablated_correct(tiny, sentence_set, groups)
    assert fast.shape == (len(groups) + 1, len(sentence_set.verb))
    assert np.array_equal(fast, np.array(expected))
    assert not (fast[1:] == fast[0]).all()  # some group changes some verb: the test can fail
    with pytest.raises(ValueError, match="layer must be a whole number in 0..1"):
        mech.ablated_correct(tiny, sentence_set, [("L2H0", [(2, 0)])])


def test_layer_at_is_the_layer_s_equations_at_one_position(tiny):
    # _layer_at runs one query a row through the layer's own parts (project_heads_torch, then the
    # one eager_attention): bit for bit the equations written out for that query, as it wrote them
    # before it called eager_attention; the whole layer, every query at once and then read at each
    # row's position, gives the same to float32 rounding (n queries at once may sum in another
    # order)
    layer, d = tiny.bert.encoder.layer[1], tiny.config.hidden_size
    sa, h = layer.attention.self, tiny.config.num_attention_heads
    x = torch.randn(5, 7, d, generator=torch.Generator().manual_seed(0))
    pos, r = torch.tensor([0, 3, 6, 2, 5]), torch.arange(5)
    head_on = torch.ones(d).index_fill_(0, torch.arange(d // h), 0.0)  # head 0 off
    fill = 1 - head_on  # ... and its columns set to 1
    with torch.inference_mode():
        q = sa.query(x[r, pos, None]).view(5, 1, h, -1).transpose(1, 2)  # (B, h, 1, d_k)
        k, v = (m(x).view(5, 7, h, -1).transpose(1, 2) for m in (sa.key, sa.value))
        weights = torch.softmax(q @ k.transpose(2, 3) * attention_scale(d // h), dim=-1)
        for on, f in ((1, 0), (head_on, fill)):
            a = layer.attention.output((weights @ v).reshape(5, d) * on + f, x[r, pos])
            assert torch.equal(mech._layer_at(layer, x, pos, on, f),
                               layer.output(layer.intermediate(a), a))
        assert torch.allclose(mech._layer_at(layer, x, pos, 1, 0), layer(x)[r, pos], atol=1e-5,
                              rtol=0)


def test_head_patch_flips_patches_one_head_at_a_time(tok, tiny):
    a, b = mech.minimal_pairs(tok, g.generate(20, g.CONSTRUCTIONS, seed=8, split="test"))
    heads, last = tiny.config.num_attention_heads, tiny.config.num_hidden_layers - 1
    none = mech.head_patch_flips(tiny, a, a, last, "verb")  # from itself: nothing changes
    assert none.shape == (heads, len(a.verb))
    assert (none == (agreement.measure_on(tiny, a)["log_odds"] < 0)).all()
    seed1 = load_run(COMMITTED / "seed1").model  # a relay: L1H2 reads the word after the subject
    a, b = mech.minimal_pairs(tok, g.generate(30, ("pp",), seed=8, split="test"))
    both = mech.agreement_correct(seed1, a) & mech.agreement_correct(seed1, b)
    share = mech.head_patch_flips(seed1, a, b, 1, "verb")[:, both].mean(1)
    assert share.argmax() == 2 and share[2] > 0.8 and np.delete(share, 2).max() < 0.2
    with pytest.raises(ValueError, match="where must be one of"):
        mech.head_patch_flips(tiny, a, b, 0, "object")
