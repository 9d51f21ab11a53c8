"""Tests for bertlib.lab.analysis: constructed maps with known answers, bad inputs, the real model."""

import re
from pathlib import Path

import numpy as np
import pytest

from bertlib.hf.loading import load_bert
from bertlib.hf.models import run_bert
from bertlib.lab import analysis as an


def prev_head(n):
    """A pure previous-token head; the first token (no previous) attends to itself."""
    A = np.zeros((n, n))
    A[0, 0] = 1.0
    A[np.arange(1, n), np.arange(n - 1)] = 1.0
    return A


def next_head(n):
    A = np.zeros((n, n))
    A[n - 1, n - 1] = 1.0
    A[np.arange(n - 1), np.arange(1, n)] = 1.0
    return A


def column_head(n, j):
    A = np.zeros((n, n))
    A[:, j] = 1.0
    return A


def random_maps(shape, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random(shape)
    return x / x.sum(-1, keepdims=True)


TOKENS = ["[CLS]", "the", "cat", "sat", ".", "[SEP]"]


# ---------------------------------------------------------------- check_maps
def test_maps_and_pictures_share_one_rule_for_attention_weights():
    """check_maps and viz.check_attention_weights both apply checks.attention_rows: entries
    outside [0, 1] fail both; rows off 1 fail the statistics only (pictures draw rounded maps)."""
    from bertlib.pictures import viz

    tokens = ["a", "b", "c"]
    for A, ok in ((random_maps((3, 3)), (True, True)), (random_maps((3, 3)) * 1.01, (False, True)),
                  (np.eye(3) * 1.5, (False, False)), (np.eye(3) - 2e-3, (False, False)),
                  (np.round(np.full((3, 3), 1 / 3), 1), (False, True))):
        results = []
        for check in (an.check_maps, lambda W: viz.check_attention_weights(W, tokens)):
            try:
                check(A)
                results.append(True)
            except ValueError as err:
                assert ("must be attention weights in [0, 1]" in str(err)
                        or "every row of an attention map must sum to 1" in str(err))
                results.append(False)
        assert tuple(results) == ok, A


def test_key_share_is_the_share_to_chosen_keys_by_text_or_by_position():
    n = 5
    A = np.stack([np.eye(n, k=-1) + np.diag([1.0] + [0] * (n - 1)), np.full((n, n), 1 / n)])
    assert np.allclose(an.key_share(A, [0]), [2 / n, 1 / n])
    assert np.allclose(an.key_share(A, [n - 1]), [0, 1 / n])
    assert np.allclose(an.key_share(A, np.arange(n) >= 3), [1 / n, 2 / n])
    shares = an.to_token_shares(A[None], ["[CLS]", "a", "b", "c", "[SEP]"])
    np.testing.assert_array_equal(shares["[CLS]"][0], an.key_share(A, [0]))  # one formula
    np.testing.assert_array_equal(shares["[SEP]"][0], an.key_share(A, [n - 1]))
    with pytest.raises(ValueError, match=r"keys\[1\] must be a whole number in 0..4 .*, got 5"):
        an.key_share(A, [0, 5])
    with pytest.raises(ValueError, match=r"keys\[0\] must be a whole number in 0..4 .*, got -1"):
        an.key_share(A, [-1])  # checks.positions: the one rule, as agreement.pair_share's
    with pytest.raises(ValueError, match=r"n \(shares need at least 2 tokens\) .* >= 2, got 1"):
        an.to_token_shares(np.ones((1, 1)), ["[CLS]"])
    with pytest.raises(ValueError, match=r"keys must have shape \(n,\) = \(5,\) \(one bool per key\)"):
        an.key_share(A, np.ones(4, bool))


def test_offset_weights_are_each_querys_weight_to_its_neighbour_and_their_mean_the_share():
    A = np.arange(2 * 16, dtype=float).reshape(2, 4, 4) / 100  # not maps: the entries show where
    np.testing.assert_array_equal(an.offset_weights(A, -1)[1], [A[1, 1, 0], A[1, 2, 1], A[1, 3, 2]])
    np.testing.assert_array_equal(an.offset_weights(A, 2)[0], [A[0, 0, 2], A[0, 1, 3]])
    np.testing.assert_array_equal(an.offset_share(A, -1), an.offset_weights(A, -1).mean(-1))
    maps = random_maps((3, 2, 6, 6))
    shares = an.to_token_shares(maps, TOKENS)  # one formula
    np.testing.assert_array_equal(shares["next"], an.offset_share(maps, 1))
    np.testing.assert_array_equal(shares["previous"], an.offset_share(maps, -1))
    weights = an.offset_weights(A, 1)
    weights[:] = 0  # a copy, not a view: the maps stay as they were
    assert A[0, 0, 1] == 0.01
    np.testing.assert_array_equal(an.offset_weights(A, 0), np.diagonal(A, axis1=1, axis2=2))
    np.testing.assert_array_equal(shares["self"], an.offset_share(maps, 0))  # 0: itself
    with pytest.raises(ValueError, match=r"offset must be a whole number in -3..3"):
        an.offset_weights(A, 4)



def test_check_maps_promotes_rank_2_and_3_to_rank_4():
    A = random_maps((6, 6))
    assert an.check_maps(A).shape == (1, 1, 6, 6)
    assert an.check_maps(random_maps((3, 6, 6))).shape == (1, 3, 6, 6)
    assert an.check_maps(random_maps((2, 3, 6, 6))).shape == (2, 3, 6, 6)


@pytest.mark.parametrize("shape", [(6,), (1, 2, 3, 6, 6)])
def test_check_maps_rejects_wrong_rank(shape):
    with pytest.raises(ValueError, match="rank"):
        an.check_maps(random_maps(shape))


def test_check_maps_rejects_rows_not_summing_to_one():
    A = random_maps((2, 2, 5, 5))
    A[1, 0, 3] *= 2
    with pytest.raises(ValueError, match=r"sum to 1.*\(1, 0, 3\) sums to 2"):
        an.check_maps(A)


def test_check_maps_rejects_nan():
    A = random_maps((5, 5))
    A[2, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        an.check_maps(A)


def test_check_maps_rejects_non_square_and_negative_and_non_numbers():
    with pytest.raises(ValueError, match="square"):
        an.check_maps(np.full((3, 4), 0.25))
    A = np.array([[1.5, -0.5], [0.5, 0.5]])
    with pytest.raises(ValueError, match=r"in \[0, 1\].*from -0.5 to 1.5"):
        an.check_maps(A)
    with pytest.raises(TypeError):
        an.check_maps(np.ones((2, 2), dtype=bool))
    with pytest.raises(TypeError):
        an.check_maps([["a", "b"], ["c", "d"]])


def test_analysis_functions_validate_their_maps():
    bad = random_maps((4, 4))
    bad[0, 0] = np.nan
    for fn in (an.attention_entropy, an.attention_distance, an.attention_rollout):
        with pytest.raises(ValueError, match="NaN"):
            fn(bad)
    with pytest.raises(ValueError, match="4 tokens for maps of size n = 5"):
        an.to_token_shares(random_maps((5, 5)), ["a"] * 4)


# ---------------------------------------------------------------- shares
def test_pure_previous_token_head_is_positional_with_share_one():
    n = len(TOKENS)
    A = np.stack([prev_head(n), next_head(n), random_maps((n, n))])[None]  # (1, 3, n, n)
    shares = an.to_token_shares(A, TOKENS)
    assert shares["previous"][0, 0] == pytest.approx(1.0)
    assert shares["next"][0, 1] == pytest.approx(1.0)
    found = an.positional_heads(shares)
    assert found[0] == an.PositionalHead(0, 0, "previous", pytest.approx(1.0))
    assert found[1] == an.PositionalHead(0, 1, "next", pytest.approx(1.0))
    assert len(found) == 2


def test_shares_sum_over_targets_and_average_over_queries():
    n = len(TOKENS)
    A = np.full((n, n), 1.0 / n)
    A[0] = 0.0
    A[0, 0] = 1.0  # [CLS] attends only to itself
    s = an.to_token_shares(A, TOKENS)
    assert s["[CLS]"][0, 0] == pytest.approx((1.0 + (n - 1) / n) / n)
    assert s["[SEP]"][0, 0] == pytest.approx(((n - 1) / n) / n)
    assert s["punctuation"][0, 0] == pytest.approx(((n - 1) / n) / n)
    assert s["self"][0, 0] == pytest.approx((1.0 + (n - 1) / n) / n)
    assert an.to_token_shares(column_head(n, n - 1), TOKENS)["[SEP]"][0, 0] == 1.0


def test_token_classes_marks_punctuation_pieces_only():
    c = an.token_classes(["[CLS]", "hello", ",", "'", "don", "?", "a.b", "[SEP]"])
    assert c["punctuation"].tolist() == [False, False, True, True, False, True, False, False]
    assert c["[CLS]"].tolist()[0] and c["[SEP]"].tolist()[-1]


def test_corpus_average_of_dicts_and_arrays_and_zero_sentences():
    a = {"x": np.array([1.0, 3.0])}
    b = {"x": np.array([3.0, 5.0])}
    assert an.corpus_average([a, b])["x"].tolist() == [2.0, 4.0]
    assert an.corpus_average([np.ones((2, 2)), np.zeros((2, 2))]).tolist() == [[0.5] * 2] * 2
    with pytest.raises(ValueError, match="zero sentences"):
        an.corpus_average([])


def test_positional_heads_threshold_is_strict_and_checked():
    shares = {"previous": np.array([[0.5, 0.51]]), "next": np.array([[0.0, 0.0]])}
    assert [p.head for p in an.positional_heads(shares)] == [1]
    with pytest.raises(KeyError, match="next"):
        an.positional_heads({"previous": shares["previous"]})
    with pytest.raises(ValueError, match="threshold"):
        an.positional_heads(shares, threshold=2)


# ---------------------------------------------------------------- entropy, distance
@pytest.mark.parametrize("n", [2, 7, 30])
def test_uniform_head_has_entropy_log_n(n):
    assert an.attention_entropy(np.full((n, n), 1.0 / n))[0, 0] == pytest.approx(np.log(n))


def test_one_hot_head_has_entropy_of_the_smoothing_only():
    n = 10
    H = an.attention_entropy(column_head(n, 0))[0, 0]
    p_top, p_rest = 0.9999 + 0.0001 / n, 0.0001 / n
    assert H == pytest.approx(-(p_top * np.log(p_top) + (n - 1) * p_rest * np.log(p_rest)))
    assert an.attention_entropy(column_head(n, 0), smoothing=0.0)[0, 0] == 0.0


def test_entropy_is_below_log_n_for_random_heads():
    A = random_maps((2, 3, 8, 8))
    H = an.attention_entropy(A)
    assert H.shape == (2, 3) and (H < np.log(8)).all() and (H > 0).all()


def test_attention_distance_of_known_heads():
    n = 6
    assert an.attention_distance(np.eye(n))[0, 0] == 0.0
    assert an.attention_distance(prev_head(n))[0, 0] == pytest.approx((n - 1) / n)
    assert an.attention_distance(column_head(n, 0))[0, 0] == pytest.approx(np.arange(n).mean())


# ---------------------------------------------------------------- word level
def test_word_ids_from_pieces_follows_double_hash():
    tokens = ["[CLS]", "the", "hedge", "##hog", "##s", "ran", "[SEP]", "##x", "[SEP]"]
    assert an.word_ids_from_pieces(tokens) == [None, 0, 1, 1, 1, 2, None, 3, None]


def test_word_level_merging_sums_to_and_averages_from_a_split_word():
    tokens = ["[CLS]", "play", "##ing", "now", "[SEP]"]
    A = random_maps((2, 2, 5, 5), seed=3)
    wm = an.word_level_maps(A, tokens)
    assert wm.words == ["[CLS]", "playing", "now", "[SEP]"]
    assert wm.groups == [[0], [1, 2], [3], [4]]
    W = wm.attentions
    assert W.shape == (2, 2, 4, 4)
    # to the split word: summed over its pieces
    assert np.allclose(W[..., 0, 1], A[..., 0, 1] + A[..., 0, 2])
    # from the split word: averaged over its pieces
    assert np.allclose(W[..., 1, 2], (A[..., 1, 3] + A[..., 2, 3]) / 2)
    assert np.allclose(W[..., 1, 1], (A[..., 1, 1] + A[..., 1, 2] + A[..., 2, 1] + A[..., 2, 2]) / 2)
    assert np.allclose(W.sum(-1), 1.0)


def test_word_level_maps_accepts_tokenizer_word_ids_and_checks_their_length():
    tokens = ["[CLS]", "a", "b", "[SEP]"]
    A = random_maps((4, 4))
    wm = an.word_level_maps(A, tokens, word_ids=[None, 0, 0, None])
    assert wm.words == ["[CLS]", "ab", "[SEP]"]
    with pytest.raises(ValueError, match=r"word_ids and tokens must have the same shape, got \(3,\) and \(4,\)"):
        an.word_level_maps(A, tokens, word_ids=[None, 0, None])


def test_word_level_maps_with_no_split_words_is_unchanged():
    A = random_maps((1, 2, 6, 6))
    assert np.allclose(an.word_level_maps(A, TOKENS).attentions, A)


# ---------------------------------------------------------------- patterns
def feat(A, tokens=TOKENS, seg=None):
    return an.pattern_features(A, tokens, seg)


def test_pattern_rules_on_synthetic_maps():
    tokens = ["[CLS]"] + [f"w{i}" for i in range(10)] + ["[SEP]"]
    n = len(tokens)
    maps = np.stack([
        column_head(n, 0),  # everyone looks at [CLS]
        prev_head(n),  # the band below the diagonal
        0.5 * column_head(n, n - 1) + 0.5 * np.eye(n),  # [SEP] stripe and the diagonal
        np.full((n, n), 1.0 / n),  # spread out
    ])
    labels = an.pattern_labels(feat(maps, tokens))
    assert labels[0].tolist() == ["vertical", "diagonal", "vertical+diagonal", "heterogeneous"]
    special = np.isin(tokens, ["[CLS]", "[SEP]"])  # "vertical" is key_share to [CLS] and [SEP]
    np.testing.assert_array_equal(feat(maps, tokens)["vertical"][0], an.key_share(maps, special))


def test_each_share_is_written_once_in_analysis():
    """The share to chosen keys (key_share) and the mean of a diagonal (offset_weights: self,
    previous, next) are each written once; the other measures call them."""
    source = Path(an.__file__).read_text(encoding="utf-8")
    assert len(re.findall(r"\[\.\.\., \w+\]\.sum\(-1\)\.mean\(-1\)", source)) == 1, "key_share"
    assert source.count("np.diagonal(") == 1, "offset_weights"


def test_block_pattern_needs_a_pair_that_stays_within_its_sentence():
    words = [f"w{i}" for i in range(12)]
    tokens = ["[CLS]", *words, "[SEP]", *words, "[SEP]"]
    seg = [0] * 14 + [1] * 13
    n = len(tokens)
    block = np.zeros((n, n))
    for rows in (list(range(14)), list(range(14, n))):
        block[np.ix_(rows, rows)] = 1.0 / len(rows)
    spread = np.full((n, n), 1.0 / n)
    f = feat(np.stack([block, spread]), tokens, seg)
    chance = f["within_chance"][0, 0]
    assert 0.3 < chance < 0.6  # about half of a word's far keys are in its own sentence
    assert f["within_segment"][0].tolist() == pytest.approx([1.0, chance])  # spread = chance
    assert f["far_mass"][0, 0] > 0.5
    assert an.pattern_labels(f)[0].tolist() == ["block", "heterogeneous"]
    single = feat(block, tokens)  # no segments given: no block
    for key in ("far_mass", "within_segment", "within_chance"):
        assert np.isnan(single[key][0, 0])
    assert an.pattern_labels(single)[0, 0] == "heterogeneous"


def test_cls_stripe_plus_neighbour_band_is_not_a_block():
    words = [f"w{i}" for i in range(8)]
    tokens = ["[CLS]", *words, "[SEP]", *words, "[SEP]"]
    seg = [0] * 10 + [1] * 9
    n = len(tokens)
    stripe = 0.45 * column_head(n, 0) + 0.55 * prev_head(n)  # stays "in its sentence" trivially
    f = feat(stripe, tokens, seg)
    assert f["far_mass"][0, 0] == pytest.approx(0.0)
    assert an.pattern_labels(f)[0, 0] != "block"


@pytest.mark.parametrize("changes, label", [
    ({}, "block"),
    ({"far_mass": 0.1}, "heterogeneous"),  # too little attention to judge
    ({"within_chance": 0.75}, "heterogeneous"),  # not clearly above an even spread
    ({"within_segment": 0.75}, "heterogeneous"),
])
def test_block_rule_needs_mass_and_a_margin_over_chance(changes, label):
    f = {"vertical": 0.2, "diagonal": 0.2, "far_mass": 0.5, "within_segment": 0.9,
         "within_chance": 0.45, **changes}
    assert an.pattern_labels(f) == label


def test_pattern_thresholds_can_be_overridden_and_features_are_checked():
    f = {"vertical": np.array(0.45), "diagonal": np.array(0.1), "far_mass": np.nan,
         "within_segment": np.nan, "within_chance": np.nan}
    assert an.pattern_labels(f) == "heterogeneous"
    assert an.pattern_labels(f, {"vertical": 0.4}) == "vertical"
    with pytest.raises(KeyError, match="diagonal"):
        an.pattern_labels({"vertical": 0.9, "within_segment": np.nan})
    with pytest.raises(KeyError, match="far_mass"):
        an.pattern_labels({"vertical": 0.9, "diagonal": 0.1, "within_segment": np.nan})
    with pytest.raises(ValueError, match="token_type_ids"):
        an.pattern_features(np.eye(len(TOKENS)), TOKENS, [0, 1])


# ---------------------------------------------------------------- rollout
def test_rollout_of_identity_layers_is_identity():
    A = np.broadcast_to(np.eye(5), (4, 3, 5, 5))
    R = an.attention_rollout(A)
    assert R.shape == (4, 5, 5)
    assert np.allclose(R, np.eye(5))


def test_rollout_matches_the_recursion_by_hand():
    A = random_maps((3, 2, 4, 4), seed=5)
    mix = [0.5 * A[l].mean(0) + 0.5 * np.eye(4) for l in range(3)]
    expected = mix[2] @ mix[1] @ mix[0]
    R = an.attention_rollout(A)
    assert np.allclose(R[0], mix[0]) and np.allclose(R[2], expected)
    assert np.allclose(R.sum(-1), 1.0)
    assert np.allclose(an.attention_rollout(A, residual=0.0)[1], A[1].mean(0) @ A[0].mean(0))
    with pytest.raises(ValueError, match="residual"):
        an.attention_rollout(A, residual=1.5)


def test_word_grouping_matches_the_fast_tokenizer_on_a_pair():
    bert = load_bert()
    first, second = "Sunflowers grow behind the hand-made shed.", "Hedgehogs sleep there."
    run = run_bert(first, second)
    A = run.attentions
    ours = an.word_level_maps(A, run.tokens)
    theirs = an.word_level_maps(A, run.tokens, bert.tokenizer(first, second).word_ids())
    assert ours.groups == theirs.groups
    assert ours.words[:4] == ["[CLS]", "sunflowers", "grow", "behind"]
    assert "hedgehogs" in ours.words and ours.words.count("[SEP]") == 2
    np.testing.assert_allclose(ours.attentions, theirs.attentions)


def test_block_score_is_zero_at_chance_one_for_a_pure_block_and_keeps_nan():
    features = {"within_segment": np.array([[0.4, 1.0, 0.2, np.nan]]),
                "within_chance": np.array([[0.4, 0.4, 0.4, np.nan]])}
    score = an.block_score(features)
    np.testing.assert_allclose(score[0, :3], [0.0, 1.0, -1 / 3])
    assert np.isnan(score[0, 3])
    with pytest.raises(ValueError):
        an.block_score({"within_segment": np.zeros((2, 3)), "within_chance": np.zeros((3, 2))})
