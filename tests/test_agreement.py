"""Tests of bertlib.tiny.agreement: tokenizer, sets of test sentences, measures on constructed maps."""

import numpy as np
import pytest
import torch

from bertlib.lab.analysis import offset_share
from bertlib.tiny import agreement
from bertlib.tiny import grammar as g


def test_tokenizer_round_trip_and_special_tokens(tok):
    texts = [s.text for s in g.generate(50, g.CONSTRUCTIONS, seed=0)]
    ids, mask = agreement.encode_texts(tok, texts)
    for row, m, text in zip(ids, mask, texts, strict=True):
        real = row[m == 1].tolist()
        assert real[0] == tok.token_to_id("[CLS]") and real[-1] == tok.token_to_id("[SEP]")
        assert tok.decode(real) == text
        assert len(real) == len(text.split()) + 2
        assert (row[m == 0] == tok.token_to_id("[PAD]")).all()
    assert [tok.token_to_id(s) for s in agreement.SPECIALS] == [0, 1, 2, 3, 4]
    assert tok.get_vocab_size() == len(g.vocabulary()) + 5
    assert tok.encode("the unicorn sleeps").ids[2] == tok.token_to_id("[UNK]")


def test_masking_ids_are_the_tokenizers_own():
    tok = agreement.build_tokenizer()
    ids = agreement.masking_ids(tok)
    assert ids.mask_id == tok.token_to_id("[MASK]") == agreement.SPECIALS.index("[MASK]")
    assert ids.vocab_size == tok.get_vocab_size()
    assert ids.special_ids == list(range(len(agreement.SPECIALS)))  # ids 0..4, in SPECIALS' order


def test_tokenizer_rejects_clashing_words():
    with pytest.raises(ValueError, match="clash"):
        agreement.build_tokenizer(["cat", "[MASK]"])


def test_shares_on_constructed_maps():
    n = 5
    prev = np.eye(n, k=-1)
    prev[0, 0] = 1.0  # the first token has no previous one: it looks at itself
    nxt = np.eye(n, k=1)
    nxt[-1, -1] = 1.0
    A = np.stack([prev, nxt, np.full((n, n), 1 / n)])  # (3 heads, n, n)
    assert np.allclose(offset_share(A, -1), [1, 0, 1 / n])
    assert np.allclose(offset_share(A, 1), [0, 1, 1 / n])
    assert np.allclose(agreement.pair_share(A, [3, 4], [2, 3]), [1, 0, 1 / n])


@pytest.mark.parametrize("call, message", [
    (lambda: offset_share(np.ones((2, 3)), 1), r"shape \(..., n, n\)"),
    (lambda: offset_share(np.eye(3), 3), r"offset must be a whole number in -2..2"),
    (lambda: agreement.pair_share(np.eye(3), [0, 1], [0]), r"queries and keys must have the same shape, got \(2,\) and \(1,\)"),
    (lambda: agreement.pair_share(np.eye(3), [0], [5]), r"keys\[0\] must be a whole number in 0..2 \(token positions of n = 3 tokens\), got 5"),
    (lambda: agreement.pair_share(np.eye(3), [0], [-1]), r"keys\[0\] must be a whole number in 0..2 .* got -1"),  # key_share's rule
    (lambda: agreement.pair_share(np.eye(3), [], []), r"the number of \(query, key\) pairs must be a whole number >= 1, got 0"),
    (lambda: agreement.first_crossing([0, 1], [0.1], 0.5), r"values and steps must have the same shape, got \(1,\) and \(2,\)"),
])
def test_measures_name_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_first_crossing():
    assert agreement.first_crossing([0, 50, 100], [0.1, 0.6, 0.9], 0.5) == 50
    assert agreement.first_crossing([0, 50], [0.1, 0.2], 0.5) is None
    assert agreement.first_crossing([0, 1, 2, 3], [0.6, 0.1, 0.7, 0.8], 0.5) == 0
    assert agreement.first_crossing([0, 1, 2, 3], [0.6, 0.1, 0.7, 0.8], 0.5, stay=True) == 2
    assert agreement.first_crossing([0, 1], [0.6, 0.1], 0.5, stay=True) is None


def test_a_sentence_set_masks_each_verb_and_records_its_ground_truth(tok):
    s = g.sentence("obj_rel", np.random.default_rng(7))  # the student that the quiet trees ...
    sentence_set = agreement.make_sentence_set(tok, [s])
    assert len(sentence_set.ids) == 2
    mask_id = tok.token_to_id("[MASK]")
    assert sentence_set.ids[0, 7] == mask_id and sentence_set.ids[1, 8] == mask_id
    assert sentence_set.subject.tolist() == [6, 2] and sentence_set.first.tolist() == [2, 2]
    assert sentence_set.nearest.tolist() == [6, 6]
    assert tok.id_to_token(int(sentence_set.right[0])) == "find"
    assert tok.id_to_token(int(sentence_set.wrong[0])) == "finds"
    table = agreement.agreement_table(sentence_set, np.array([True, False]))
    assert table["obj_rel · inner"] == {"model": 1.0, "nearest noun": 1.0, "first noun": 0.0,
                                        "n": 1}
    assert table["obj_rel · main"]["nearest noun"] == 0.0  # "trees" is plural, "laughs" is not


def test_measure_shapes_and_rows_sum(tok, tiny):
    sentence_set = agreement.make_sentence_set(tok, g.generate(6, g.CONSTRUCTIONS, seed=2))
    m = agreement.measure_on(tiny, sentence_set)
    assert m["correct"].shape == m["p_right"].shape == sentence_set.verb.shape
    for key in ("subject", "subject_far", "previous", "next", "[CLS]", "[SEP]"):
        assert m[key].shape == (2, 2)
        assert ((m[key] >= 0) & (m[key] <= 1)).all()
    far = sentence_set.verb - sentence_set.subject > 1
    assert 0 < far.sum() < len(far)  # both kinds of rows, so the two measures differ
    assert np.allclose(m["subject_far"], agreement.measure_on(tiny, agreement.subset(sentence_set, far))["subject"])
    near = agreement.measure_on(tiny, agreement.subset(sentence_set, ~far))["subject_far"]
    assert np.isnan(near).all()  # no far row: NaN, not a number made up
    maps = agreement.logits_and_attentions(tiny, sentence_set.ids, sentence_set.attention_mask)[1]
    by_hand = [(maps[r, ..., :n, 0].mean(-1), maps[r, ..., :n, n - 1].mean(-1))  # by position
               for r, n in enumerate(sentence_set.length)]
    np.testing.assert_allclose(m["[CLS]"], np.mean([c for c, _ in by_hand], 0), rtol=1e-6)
    np.testing.assert_allclose(m["[SEP]"], np.mean([s for _, s in by_hand], 0), rtol=1e-6)
    # the verb -> subject share is pair_share row by row: the same numbers, bit for bit, as the
    # indexing measure_on wrote before it called pair_share
    r = np.arange(len(sentence_set.verb))
    assert m["subject"].dtype == maps.dtype == np.float32
    assert np.array_equal(m["subject"], maps[r, :, :, sentence_set.verb, sentence_set.subject].mean(0))
    assert np.array_equal(m["subject_far"], maps[r[far], :, :, sentence_set.verb[far],
                                                 sentence_set.subject[far]].mean(0))


def test_subset_keeps_the_chosen_rows(tok):
    sentence_set = agreement.make_sentence_set(tok, g.generate(5, g.CONSTRUCTIONS, seed=2))
    part = agreement.subset(sentence_set, sentence_set.role == "main")
    assert len(part.verb) == (sentence_set.role == "main").sum() and (part.role == "main").all()


def test_accuracy_by_reads_the_chosen_rows_and_names_a_bad_selection(tok):
    sentence_set = agreement.make_sentence_set(tok, g.generate(5, g.CONSTRUCTIONS, seed=2))
    R = len(sentence_set.verb)
    correct = np.arange(R) % 2 == 0
    main = sentence_set.role == "main"
    assert agreement.accuracy_by(sentence_set, correct, main) == correct[main].mean()
    with pytest.raises(ValueError, match=rf"rows and the sentence set's rows must have the same "
                                         rf"shape, got \({R - 1},\) and \({R},\)"):
        agreement.accuracy_by(sentence_set, correct, main[1:])
    with pytest.raises(ValueError, match=r"the number of rows selected must be a whole number "
                                         r">= 1, got 0"):
        agreement.accuracy_by(sentence_set, correct, np.zeros(R, dtype=bool))


def test_logits_and_attentions_are_the_model_s_in_chunks(tok, tiny):
    ids, mask = agreement.encode_texts(tok, [s.text for s in g.generate(5, seed=3)])
    logits, maps = agreement.logits_and_attentions(tiny, ids, mask, batch=2)  # chunks of 2, 2, 1
    R, N = ids.shape
    assert logits.shape == (R, N, tok.get_vocab_size()) and maps.shape == (R, 2, 2, N, N)
    with torch.no_grad():
        out = tiny(input_ids=torch.as_tensor(ids), attention_mask=torch.as_tensor(mask),
                   output_attentions=True)
    np.testing.assert_allclose(logits, out.logits.numpy(), rtol=0, atol=1e-5)
    np.testing.assert_allclose(maps[:, 1], out.attentions[1].numpy(), rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match="attention_mask must hold 0/1"):
        agreement.logits_and_attentions(tiny, ids, mask * 3)
    with pytest.raises(ValueError, match="input_ids must be in"):
        agreement.logits_and_attentions(tiny, ids + 1000, mask)


def test_hidden_states_are_the_model_s_on_each_padded_row(tok, tiny):
    sentence_set = agreement.make_sentence_set(tok, g.generate(6, g.CONSTRUCTIONS, seed=2,
                                                               split="test"))
    states = agreement.hidden_states(tiny, sentence_set, batch=4)  # two chunks
    R, N = sentence_set.ids.shape
    assert states.shape == (R, tiny.config.num_hidden_layers + 1, N, tiny.config.hidden_size)
    with torch.no_grad():
        one = tiny.bert(input_ids=torch.as_tensor(sentence_set.ids[5:6]),
                        attention_mask=torch.as_tensor(sentence_set.attention_mask[5:6]),
                        output_hidden_states=True).hidden_states
    n = sentence_set.length[5]
    assert np.allclose(states[5, :, :n], torch.stack(one, 1)[0, :, :n].numpy(), atol=1e-5)


def test_sentence_ids_number_the_rows_of_each_sentence_alike(tok):
    sentences = g.generate(12, g.CONSTRUCTIONS, seed=4, split="test")
    sentence_set = agreement.make_sentence_set(tok, sentences + sentences[:1])  # one twice
    ids = agreement.sentence_ids(sentence_set)
    of_row = np.repeat(np.arange(13), [len(s.verbs) for s in sentences + sentences[:1]])
    assert ids.shape == (len(sentence_set.verb),) and ids.dtype.kind == "i"
    assert max(len(s.verbs) for s in sentences) > 1  # some sentence has rows to group
    distinct = len({s.text for s in sentences})
    assert sorted(set(ids.tolist())) == list(range(distinct))
    for a in range(len(ids)):  # same id exactly when the same sentence's text
        for b in range(len(ids)):
            same = sentences[of_row[a] % 12].text == sentences[of_row[b] % 12].text
            assert (ids[a] == ids[b]) == same
