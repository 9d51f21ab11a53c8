"""Tests of bertlib.tiny.linear_probe: the number probe, its control task and controls."""

import numpy as np
import pytest
import torch

from bertlib.tiny import agreement
from bertlib.tiny import grammar as g
from bertlib.tiny import linear_probe as lp


def test_control_labels_flip_a_coin_per_noun_and_the_verb_probe_has_one_row_per_layer(tok, tiny):
    sentence_set = agreement.make_sentence_set(tok, g.generate(40, g.CONSTRUCTIONS, seed=6, split="test"))
    control = lp.control_labels(tok, sentence_set)
    nouns = [tok.id_to_token(int(i)).removesuffix("s")
             for i in sentence_set.ids[np.arange(len(sentence_set.ids)), sentence_set.subject]]
    by_noun = {}
    for noun, c in zip(nouns, control, strict=True):
        assert by_noun.setdefault(noun, c) == c  # singular and plural share one label
    assert 0 < control.mean() < 1 and np.array_equal(control, lp.control_labels(tok, sentence_set))
    scores = lp.verb_number_probe(tiny, sentence_set, control)
    assert scores.shape == (2, len(lp.PROBE_COLUMNS))
    assert ((scores[:, [0, 1, 3]] >= 0) & (scores[:, [0, 1, 3]] <= 1)).all()


def test_the_conflict_rows_catch_a_probe_that_reads_the_nearest_noun():
    rng = np.random.default_rng(0)
    subject = rng.random(400) < 0.5
    nearest = np.where(rng.random(400) < 0.3, ~subject, subject)  # 30 % conflict rows
    control = rng.random(400) < 0.5
    noise = rng.normal(size=(400, 6))
    reads_nearest = noise + 3.0 * nearest[:, None]
    reads_subject = noise + 3.0 * subject[:, None]
    s_all, c, s_conflict, near = lp.number_probe_controls(reads_nearest, subject, nearest,
                                                             control)
    assert 0.6 < s_all < 0.85 and s_conflict < 0.2 and near > 0.9 and abs(c - 0.5) < 0.15
    s_all, _, s_conflict, near = lp.number_probe_controls(reads_subject, subject, nearest,
                                                             control)
    assert s_all > 0.9 and s_conflict > 0.9 and near < 0.85
    same = lp.number_probe_controls(reads_subject, subject, subject, control)
    assert np.isnan(same[2])  # no conflict row: nothing to score
    with pytest.raises(ValueError, match="nearest"):
        lp.number_probe_controls(reads_subject, subject, nearest[:-1], control)


def test_number_probe_finds_a_planted_direction_and_not_random_labels():
    rng = np.random.default_rng(0)
    y = rng.random(400) < 0.5
    x = rng.standard_normal((400, 8))
    x[:, 3] += np.where(y, 2.0, -2.0)
    acc, control = lp.number_probe(x, y, rng.random(400) < 0.5)
    assert acc > 0.9 and 0.35 < control < 0.65
    with pytest.raises(ValueError, match="labels must have shape"):
        lp.number_probe(x, y[:10], y)


def _lbfgs_fit(x, y, l2):  # the plain twin: L-BFGS run to a tight tolerance
    w = torch.zeros(x.shape[1], dtype=torch.float64, requires_grad=True)
    b = torch.zeros((), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=5000, tolerance_grad=1e-12, tolerance_change=1e-15,
                            line_search_fn="strong_wolfe")

    def loss():
        opt.zero_grad()
        value = torch.nn.functional.binary_cross_entropy_with_logits(x @ w + b, y) + l2 * (w @ w)
        value.backward()
        return value

    opt.step(loss)
    return w.detach(), b.detach()


@pytest.mark.parametrize("seed", [0, 1])
def test_the_newton_fit_is_the_minimum_l_bfgs_finds(seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((300, 12))
    y = ((rng.random(300) < 0.5) | (x[:, 2] > 1)).astype(np.float64)
    w, b = lp._fit_logistic(x, y, 1e-2)
    p = 1 / (1 + np.exp(-(x @ w + b)))  # first-order condition of the strictly convex objective
    gradient = np.concatenate([x.T @ (p - y) / len(x) + 2e-2 * w, [(p - y).mean()]])
    assert np.abs(gradient).max() < 1e-10
    w_plain, b_plain = _lbfgs_fit(torch.as_tensor(x), torch.as_tensor(y), 1e-2)
    assert np.allclose(w, w_plain.numpy(), atol=1e-6) and abs(b - b_plain.item()) < 1e-6
    assert np.array_equal(x @ w + b > 0, (x @ w_plain.numpy() + b_plain.item()) > 0)


def test_a_probe_whose_training_labels_are_all_alike_predicts_that_label():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((40, 5))
    x[:, 4] = 0.0  # a feature that never varies: standardised to 0, no curvature of its own
    acc, _ = lp.number_probe(x, np.ones(40, bool), rng.random(40) < 0.5)
    assert acc == 1.0  # no minimum exists (b grows without end); the fit still answers


def test_probe_draws_repeat_the_probe_over_seeded_splits_and_control_draws():
    rng = np.random.default_rng(0)
    subject = rng.random(300) < 0.5
    nearest = np.where(rng.random(300) < 0.3, ~subject, subject)
    x = rng.normal(size=(300, 6)) + 3.0 * nearest[:, None]  # reads the nearest noun
    controls = rng.random((4, 300)) < 0.5
    acc, n_conflict = lp.probe_draws(x, subject, nearest, controls, seed=3)
    assert acc.shape == (4, len(lp.PROBE_COLUMNS)) and n_conflict.shape == (4,)
    assert (acc[:, 2] < 0.2).all() and (acc[:, 3] > 0.9).all() and (abs(acc[:, 1] - 0.5) < 0.15).all()
    assert len(set(n_conflict.tolist())) > 1  # the splits differ: another conflict count each
    assert (n_conflict <= 150).all() and n_conflict.sum() > 0
    again, _ = lp.probe_draws(x, subject, nearest, controls[:2], seed=3)
    assert np.array_equal(again, acc[:2])  # draw k is the same whatever K is
    order = np.random.default_rng([3, 1]).permutation(300)  # draw 1 by hand
    assert np.array_equal(acc[1], lp.number_probe_controls(x[order], subject[order], nearest[order],
                                                          controls[1][order]))
    assert not np.array_equal(acc, lp.probe_draws(x, subject, nearest, controls, seed=4)[0])
    with pytest.raises(ValueError, match="controls must have shape"):
        lp.probe_draws(x, subject, nearest, controls[0])
    with pytest.raises(ValueError, match="controls"):
        lp.probe_draws(x, subject, nearest, controls[:, :-1])
    with pytest.raises(ValueError, match="K"):
        lp.probe_draws(x, subject, nearest, controls[:0])
    with pytest.raises(ValueError, match="features"):
        lp.probe_draws(x[:-1], subject, nearest, controls)


def test_balanced_rows_give_every_cell_the_smallest_cells_size_seeded():
    rng = np.random.default_rng(0)
    subject = rng.random(500) < 0.5
    nearest = np.where(rng.random(500) < 0.2, ~subject, subject)  # 20 % conflict rows
    rows = lp.balanced_rows(subject, nearest, np.random.default_rng(1))
    sizes = [int(((subject == s) & (nearest == n)).sum()) for s in (0, 1) for n in (0, 1)]
    counts = [int(((subject[rows] == s) & (nearest[rows] == n)).sum()) for s in (0, 1) for n in (0, 1)]
    assert counts == [min(sizes)] * 4 and len(set(rows.tolist())) == len(rows)
    assert np.array_equal(rows, lp.balanced_rows(subject, nearest, np.random.default_rng(1)))
    assert not np.array_equal(rows, lp.balanced_rows(subject, nearest, np.random.default_rng(2)))
    with pytest.raises(ValueError, match=r"all four cells, .* cell sizes: \[\d+, 0, 0, \d+\]\), got 0"):
        lp.balanced_rows(subject, subject, np.random.default_rng(1))
    with pytest.raises(ValueError, match="nearest"):
        lp.balanced_rows(subject, nearest[:-1], np.random.default_rng(1))


def _salient_nearest_weak_subject(n=800, seed=0):
    """Features where the nearest noun's number is salient and the subject's is weaker, on
    separate directions; the two agree on 85 % of rows."""
    rng = np.random.default_rng(seed)
    subject = rng.random(n) < 0.5
    nearest = np.where(rng.random(n) < 0.15, ~subject, subject)
    x = rng.normal(size=(n, 6))
    x[:, 0] += 2.5 * np.where(nearest, 1, -1)
    x[:, 1] += 0.6 * np.where(subject, 1, -1)
    return x, subject, nearest


def test_the_balanced_probe_finds_a_subject_number_the_natural_probe_misses():
    x, subject, nearest = _salient_nearest_weak_subject()
    controls = np.zeros((4, len(subject)), bool)
    natural = lp.probe_draws(x, subject, nearest, controls)[0][:, 2]  # conflict rows
    balanced, n_conflict, n_train = lp.balanced_probe_draws(x, subject, nearest, 4)
    assert (natural < 0.4).all() and (balanced > 0.6).all()  # decodable only with balancing
    assert balanced.shape == n_conflict.shape == n_train.shape == (4,)
    for k in range(4):  # split k is probe_draws' split k: the same test rows
        order = np.random.default_rng([0, k]).permutation(len(subject))
        test = order[400:]
        assert n_conflict[k] == (subject[test] != nearest[test]).sum()
        assert n_train[k] % 4 == 0 and n_train[k] < 400
    again = lp.balanced_probe_draws(x, subject, nearest, 2)
    assert np.array_equal(again[0], balanced[:2])  # seeded: split k whatever K is
    assert not np.array_equal(balanced, lp.balanced_probe_draws(x, subject, nearest, 4, seed=5)[0])


def test_the_balanced_probe_rejects_bad_requests():
    x, subject, nearest = _salient_nearest_weak_subject(200)
    with pytest.raises(ValueError, match="k_splits"):
        lp.balanced_probe_draws(x, subject, nearest, 0)
    with pytest.raises(ValueError, match="features"):
        lp.balanced_probe_draws(x[:-1], subject, nearest, 2)
    with pytest.raises(ValueError, match="all four cells"):
        lp.balanced_probe_draws(x, subject, subject, 2)


def _grouped_rows(n_groups=150, seed=0):
    """Rows in groups of 1-3 (like a sentence's verbs): a group shares its label and its features,
    a random code of its own (as a sentence's rows share their input), plus a little noise per
    row; nothing in the features predicts the label of an unseen group."""
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(n_groups), rng.integers(1, 4, n_groups))
    label = (rng.random(n_groups) < 0.5)[groups]
    x = rng.normal(size=(n_groups, 100))[groups] + 0.1 * rng.normal(size=(len(groups), 100))
    return x, label, groups


def test_a_grouped_split_puts_each_group_on_one_side_seeded():
    _, _, groups = _grouped_rows()
    for k in range(4):
        order, cut = lp._split(3, k, len(groups), 0.5, groups)
        assert sorted(order.tolist()) == list(range(len(groups)))  # every row once
        assert not set(groups[order[:cut]]) & set(groups[order[cut:]])  # no group on both sides
        boundaries = [i for i in range(1, len(order)) if groups[order[i]] != groups[order[i - 1]]]
        assert cut in boundaries and abs(cut - len(groups) / 2) <= 2  # groups of at most 3
        again = lp._split(3, k, len(groups), 0.5, groups)
        assert np.array_equal(order, again[0]) and cut == again[1]
    assert not np.array_equal(order, lp._split(4, 3, len(groups), 0.5, groups)[0])
    shuffled = np.random.default_rng(1).permutation(len(groups))  # groups need not be sorted
    order, cut = lp._split(0, 0, len(groups), 0.3, groups[shuffled] * 7 - 5)
    assert not set(groups[shuffled][order[:cut]]) & set(groups[shuffled][order[cut:]])


def test_groups_none_keeps_the_row_split_and_groups_keep_sentences_apart():
    x, subject, groups = _grouped_rows()
    nearest = np.where(np.random.default_rng(2).random(len(subject)) < 0.3, ~subject, subject)
    controls = np.random.default_rng(3).random((3, len(subject))) < 0.5
    acc, n_conflict = lp.probe_draws(x, subject, nearest, controls, seed=1)
    for k in range(3):  # groups=None: split k is the row split, as before groups existed
        order = np.random.default_rng([1, k]).permutation(len(subject))
        assert np.array_equal(acc[k], lp.number_probe_controls(
            x[order], subject[order], nearest[order], controls[k][order]))
        assert n_conflict[k] == (subject != nearest)[order][len(subject) // 2:].sum()
    grouped, n_grouped = lp.probe_draws(x, subject, nearest, controls, seed=1, groups=groups)
    for k in range(3):
        order, cut = lp._split(1, k, len(subject), 0.5, groups)
        assert n_grouped[k] == (subject != nearest)[order][cut:].sum()
    # a group's rows share a code and the label: split by row, the probe recognises the groups
    # it was trained on (leakage); split by group, it is near chance, as it should be
    assert acc[:, 0].min() > 0.7 and grouped[:, 0].mean() < 0.6
    assert grouped[:, 0].max() < acc[:, 0].min()  # lower in every split
    with pytest.raises(ValueError, match=r"groups must have shape \(R,\) = \(312,\) for one .* got \(311,\)"):
        lp.probe_draws(x, subject, nearest, controls, groups=groups[1:])
    with pytest.raises(TypeError, match=r"groups\[0\] must be a whole number"):
        lp.probe_draws(x, subject, nearest, controls, groups=groups.astype(float))
    with pytest.raises(TypeError, match=r"groups\[0\] must be a whole number"):
        lp.probe_draws(x, subject, nearest, controls, groups=groups > 3)


def test_the_balanced_probe_splits_by_group_and_subsamples_the_training_side_only():
    x, subject, nearest = _salient_nearest_weak_subject()
    groups = np.arange(len(subject)) // 3  # three rows a group
    balanced, n_conflict, n_train = lp.balanced_probe_draws(x, subject, nearest, 3, groups=groups)
    for k in range(3):
        order, cut = lp._split(0, k, len(subject), 0.5, groups)
        test = order[cut:]
        assert n_conflict[k] == (subject[test] != nearest[test]).sum() and n_train[k] <= cut
    assert np.array_equal(lp.balanced_probe_draws(x, subject, nearest, 3)[0],
                          lp.balanced_probe_draws(x, subject, nearest, 3, groups=None)[0])
    with pytest.raises(TypeError, match="groups"):
        lp.balanced_probe_draws(x, subject, nearest, 2, groups=groups.astype(str))
