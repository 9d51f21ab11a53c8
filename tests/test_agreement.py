"""Tests of bertlib.tiny.probes: tokenizer, probes, measures on constructed maps."""

import numpy as np
import pytest
import torch

from bertlib.lab.analysis import offset_share
from bertlib.tiny import grammar as g
from bertlib.tiny import probes


def test_tokenizer_round_trip_and_special_tokens(tok):
    texts = [s.text for s in g.generate(50, g.CONSTRUCTIONS, seed=0)]
    ids, mask = probes.encode_texts(tok, texts)
    for row, m, text in zip(ids, mask, texts, strict=True):
        real = row[m == 1].tolist()
        assert real[0] == tok.token_to_id("[CLS]") and real[-1] == tok.token_to_id("[SEP]")
        assert tok.decode(real) == text
        assert len(real) == len(text.split()) + 2
        assert (row[m == 0] == tok.token_to_id("[PAD]")).all()
    assert [tok.token_to_id(s) for s in probes.SPECIALS] == [0, 1, 2, 3, 4]
    assert tok.get_vocab_size() == len(g.vocabulary()) + 5
    assert tok.encode("the unicorn sleeps").ids[2] == tok.token_to_id("[UNK]")


def test_masking_ids_are_the_tokenizers_own():
    tok = probes.build_tokenizer()
    ids = probes.masking_ids(tok)
    assert ids.mask_id == tok.token_to_id("[MASK]") == probes.SPECIALS.index("[MASK]")
    assert ids.vocab_size == tok.get_vocab_size()
    assert ids.special_ids == list(range(len(probes.SPECIALS)))  # ids 0..4, in SPECIALS' order


def test_tokenizer_rejects_clashing_words():
    with pytest.raises(ValueError, match="clash"):
        probes.build_tokenizer(["cat", "[MASK]"])


def test_shares_on_constructed_maps():
    n = 5
    prev = np.eye(n, k=-1)
    prev[0, 0] = 1.0  # the first token has no previous one: it looks at itself
    nxt = np.eye(n, k=1)
    nxt[-1, -1] = 1.0
    A = np.stack([prev, nxt, np.full((n, n), 1 / n)])  # (3 heads, n, n)
    assert np.allclose(offset_share(A, -1), [1, 0, 1 / n])
    assert np.allclose(offset_share(A, 1), [0, 1, 1 / n])
    assert np.allclose(probes.pair_share(A, [3, 4], [2, 3]), [1, 0, 1 / n])


@pytest.mark.parametrize("call, message", [
    (lambda: offset_share(np.ones((2, 3)), 1), r"shape \(..., n, n\)"),
    (lambda: offset_share(np.eye(3), 0), r"abs\(offset\) .* in 1..2, got 0"),
    (lambda: offset_share(np.eye(3), 3), r"offset must be a whole number in -2..2"),
    (lambda: probes.pair_share(np.eye(3), [0, 1], [0]), r"queries and keys must have the same shape, got \(2,\) and \(1,\)"),
    (lambda: probes.pair_share(np.eye(3), [0], [5]), r"non-empty lists of positions in 0..2, got \[0\] and \[5\]"),
    (lambda: probes.first_crossing([0, 1], [0.1], 0.5), r"values and steps must have the same shape, got \(1,\) and \(2,\)"),
])
def test_measures_name_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_first_crossing():
    assert probes.first_crossing([0, 50, 100], [0.1, 0.6, 0.9], 0.5) == 50
    assert probes.first_crossing([0, 50], [0.1, 0.2], 0.5) is None
    assert probes.first_crossing([0, 1, 2, 3], [0.6, 0.1, 0.7, 0.8], 0.5) == 0
    assert probes.first_crossing([0, 1, 2, 3], [0.6, 0.1, 0.7, 0.8], 0.5, stay=True) == 2
    assert probes.first_crossing([0, 1], [0.6, 0.1], 0.5, stay=True) is None


def test_probe_masks_each_verb_and_records_its_ground_truth(tok):
    s = g.sentence("obj_rel", np.random.default_rng(7))  # the student that the quiet trees ...
    probe = probes.make_probe(tok, [s])
    assert len(probe.ids) == 2
    mask_id = tok.token_to_id("[MASK]")
    assert probe.ids[0, 7] == mask_id and probe.ids[1, 8] == mask_id
    assert probe.subject.tolist() == [6, 2] and probe.first.tolist() == [2, 2]
    assert probe.nearest.tolist() == [6, 6]
    assert tok.id_to_token(int(probe.right[0])) == "find"
    assert tok.id_to_token(int(probe.wrong[0])) == "finds"
    table = probes.agreement_table(probe, np.array([True, False]))
    assert table["obj_rel · inner"] == {"model": 1.0, "nearest noun": 1.0, "first noun": 0.0,
                                        "n": 1}
    assert table["obj_rel · main"]["nearest noun"] == 0.0  # "trees" is plural, "laughs" is not


def test_measure_shapes_and_rows_sum(tok, tiny):
    probe = probes.make_probe(tok, g.generate(6, g.CONSTRUCTIONS, seed=2))
    m = probes.measure_probe(tiny, probe)
    assert m["correct"].shape == m["p_right"].shape == probe.verb.shape
    for key in ("subject", "subject_far", "previous", "next", "[CLS]", "[SEP]"):
        assert m[key].shape == (2, 2)
        assert ((m[key] >= 0) & (m[key] <= 1)).all()
    far = probe.verb - probe.subject > 1
    assert 0 < far.sum() < len(far)  # both kinds of rows, so the two measures differ
    assert np.allclose(m["subject_far"], probes.measure_probe(tiny, probes.subset(probe, far))["subject"])
    near = probes.measure_probe(tiny, probes.subset(probe, ~far))["subject_far"]
    assert np.isnan(near).all()  # no far row: NaN, not a number made up
    maps = probes.logits_and_attentions(tiny, probe.ids, probe.attention_mask)[1]
    by_hand = [(maps[r, ..., :n, 0].mean(-1), maps[r, ..., :n, n - 1].mean(-1))  # by position
               for r, n in enumerate(probe.length)]
    np.testing.assert_allclose(m["[CLS]"], np.mean([c for c, _ in by_hand], 0), rtol=1e-6)
    np.testing.assert_allclose(m["[SEP]"], np.mean([s for _, s in by_hand], 0), rtol=1e-6)


def test_subset_keeps_the_chosen_rows(tok):
    probe = probes.make_probe(tok, g.generate(5, g.CONSTRUCTIONS, seed=2))
    part = probes.subset(probe, probe.role == "main")
    assert len(part.verb) == (probe.role == "main").sum() and (part.role == "main").all()


def test_logits_and_attentions_are_the_model_s_in_chunks(tok, tiny):
    ids, mask = probes.encode_texts(tok, [s.text for s in g.generate(5, seed=3)])
    logits, maps = probes.logits_and_attentions(tiny, ids, mask, batch=2)  # chunks of 2, 2, 1
    R, N = ids.shape
    assert logits.shape == (R, N, tok.get_vocab_size()) and maps.shape == (R, 2, 2, N, N)
    with torch.no_grad():
        out = tiny(input_ids=torch.as_tensor(ids), attention_mask=torch.as_tensor(mask),
                   output_attentions=True)
    np.testing.assert_allclose(logits, out.logits.numpy(), rtol=0, atol=1e-5)
    np.testing.assert_allclose(maps[:, 1], out.attentions[1].numpy(), rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match="attention_mask must hold 0/1"):
        probes.logits_and_attentions(tiny, ids, mask * 3)
    with pytest.raises(ValueError, match="input_ids must be in"):
        probes.logits_and_attentions(tiny, ids + 1000, mask)
