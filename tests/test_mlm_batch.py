"""Tests of bertlib.paper.mlm.mask_batch: BERT's 80/10/10 corruption on a padded batch."""

import numpy as np
import pytest

from bertlib.checks import IGNORE_INDEX
from bertlib.paper.mlm import mask_batch

PAD, CLS, SEP, MASK, V = 0, 2, 3, 4, 50


def _batch(rows=400, n=20, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, V, size=(rows, n))
    lengths = rng.integers(3, n + 1, size=rows)
    ids[:, 0] = CLS
    for r, m in enumerate(lengths):
        ids[r, m - 1] = SEP
        ids[r, m:] = PAD
    return ids, lengths


def test_each_row_gets_round_15_percent_of_its_ordinary_tokens():
    ids, lengths = _batch()
    out = mask_batch(ids, MASK, V, (PAD, CLS, SEP), np.random.default_rng(1))
    m = lengths - 2
    assert (out.chosen.sum(1) == np.maximum(1, np.rint(0.15 * m))).all()
    assert not out.chosen[np.isin(ids, [PAD, CLS, SEP])].any()
    assert (out.labels[out.chosen] == ids[out.chosen]).all()
    assert (out.labels[~out.chosen] == IGNORE_INDEX).all()


def test_fates_are_80_10_10_and_unchosen_tokens_unchanged():
    ids, _ = _batch(rows=3000)
    out = mask_batch(ids, MASK, V, (PAD, CLS, SEP, MASK), np.random.default_rng(2))
    fates = out.action[out.chosen]
    share = {a: np.mean(fates == a) for a in ("mask", "random", "keep")}
    # about 9,000 chosen tokens: 3 binomial standard deviations are below 0.01
    assert abs(share["mask"] - 0.8) < 0.015 and abs(share["random"] - 0.1) < 0.015
    assert (out.input_ids[out.action == "mask"] == MASK).all()
    assert (out.input_ids[out.action == "keep"] == ids[out.action == "keep"]).all()
    assert not np.isin(out.input_ids[out.action == "random"], [PAD, CLS, SEP, MASK]).any()
    assert (out.input_ids[~out.chosen] == ids[~out.chosen]).all()


def test_same_generator_state_gives_the_same_corruption():
    ids, _ = _batch()
    a = mask_batch(ids, MASK, V, (PAD, CLS, SEP), np.random.default_rng(3))
    b = mask_batch(ids, MASK, V, (PAD, CLS, SEP), np.random.default_rng(3))
    assert (a.input_ids == b.input_ids).all()


@pytest.mark.parametrize("ids, message", [
    (np.zeros(5, dtype=int), "2-D"),
    (np.full((2, 3), 99), "in 0..49"),
    (np.array([[CLS, SEP], [CLS, 7]]), r"row\(s\) \[0\] have no ordinary tokens"),
])
def test_bad_batches_are_named(ids, message):
    with pytest.raises(ValueError, match=message):
        mask_batch(ids, MASK, V, (PAD, CLS, SEP))


def test_bad_fractions_are_named():
    ids, _ = _batch(rows=2)
    with pytest.raises(ValueError, match="mask_prob must be a number in"):
        mask_batch(ids, MASK, V, (PAD,), mask_prob=1.5)
    with pytest.raises(ValueError, match="at most 1"):
        mask_batch(ids, MASK, V, (PAD,), mask_frac=0.9, random_frac=0.2)


def test_the_draws_stay_those_the_committed_tiny_bert_runs_were_trained_with():
    """25 seeded batches: the same chosen positions, fates and random ids as before issue 28
    (the same draws gave the same tiny-BERT state dict after 25 training steps of seed 0)."""
    import hashlib
    rng, h = np.random.default_rng(0), hashlib.sha256()
    for step in range(25):
        ids = rng.integers(5, 60, size=(16, 12))
        ids[:, 0], ids[:, -1], ids[step % 16, 8:] = 1, 2, 0
        out = mask_batch(ids, 4, 60, (0, 1, 2, 3, 4), rng, mask_prob=0.15 + 0.01 * (step % 3))
        for a in out:
            h.update(repr(a.tolist()).encode())
    assert h.hexdigest() == "04268d3f2fb8394af8e59e7e32a09138eccff108fc8430d4504ab3901ee22ff7"
