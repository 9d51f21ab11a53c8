"""Tests for bertlib.hf.finetune: the graded pairs, their batches, fine-tuning and Spearman's rho."""

import copy

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertModel

from bertlib.hf import custom as C
from bertlib.hf import finetune as F

A, B = "The cat sat on the mat", "A feline rested on the rug"
PAIRS = [(A, B), ("A dog ran.", "The small brown puppy is running across the big green field.")]


@pytest.fixture(scope="module")
def small_model(bert):
    """A seeded random 2-layer BERT (hidden 32) with the bundled vocabulary: the training loop's
    properties (reproducible, frozen embeddings, plain AdamW's steps, options passed on) do not
    depend on the model's size, and a step of it costs a fraction of the real model's."""
    config = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, vocab_size=len(bert.tokenizer),
                        attn_implementation="eager")
    with torch.random.fork_rng():  # seeded weights, and the other tests' random state untouched
        torch.manual_seed(0)
        return BertModel(config).eval()


def test_pairs_data():
    pairs = F.load_pairs()
    train, test = F.load_pairs("train"), F.load_pairs("test")
    assert len(pairs) >= 150 and len(train) + len(test) == len(pairs) and len(test) >= 40
    assert {p.score for p in pairs} == {0, 1, 2, 3, 4, 5}
    assert not {p.sentence_a for p in train} & {p.sentence_a for p in test}
    with pytest.raises(ValueError, match="split must be"):
        F.load_pairs("dev")


def test_pairs_groups_share_their_first_sentence_and_split():
    pairs = F.load_pairs()
    groups = {p.group for p in pairs}
    assert min(groups) >= 0 and len(groups) == 54
    for g in groups:
        members = [p for p in pairs if p.group == g]
        assert len(members) == 3 and len({(p.sentence_a, p.split) for p in members}) == 1


def test_pair_batch_shapes_and_padding(bert):
    batch = F.pair_batch(PAIRS, model=bert)
    b, n = batch.inputs["input_ids"].shape
    assert batch.prior.shape == (b, n, n) and batch.in_a.shape == batch.in_b.shape == (b, n)
    k = int(batch.inputs["attention_mask"][0].sum())
    assert (batch.prior[0, k:] == 0).all() and (batch.prior[0, :, k:] == 0).all()
    np.testing.assert_array_equal(batch.prior[0, :k, :k].numpy(), C.similarity_prior(A, B))
    assert batch.in_a[0].tolist() == [0] + [1] * 6 + [0] * (n - 7)
    assert batch.in_b[0, 8:15].tolist() == [1] * 7 and batch.in_b[0, 15:].sum() == 0


@pytest.mark.slow
def test_fine_tune_is_reproducible_and_leaves_embeddings_frozen(small_model):
    pairs = F.load_pairs("train")[:6]
    runs = []
    for _ in range(2):
        model = copy.deepcopy(small_model)
        with C.use_prior_attention(model, mode="parallel", learn_gate=True) as h:
            losses = F.fine_tune(model, pairs, epochs=1, batch_size=3, seed=4)
            gate = h.gates()[0].gate().item()
        runs.append((losses, gate, model))
    (l1, g1, m1), (l2, g2, m2) = runs
    assert len(l1) == 2 and np.isfinite(l1).all() and l1 == l2 and g1 == g2 != 0.5
    original = small_model.state_dict()
    trained = m1.state_dict()
    assert torch.equal(trained["embeddings.word_embeddings.weight"],
                       original["embeddings.word_embeddings.weight"])
    assert not torch.equal(trained["encoder.layer.0.attention.self.query.weight"],
                           original["encoder.layer.0.attention.self.query.weight"])
    assert not m1.training and not torch.are_deterministic_algorithms_enabled()
    # the frozen embeddings got no gradient at all, and are trainable again afterwards
    assert all(p.grad is None and p.requires_grad for p in m1.embeddings.parameters())


def test_fine_tune_leaves_torchs_random_state_as_it_was(small_model):
    model = copy.deepcopy(small_model)
    before = torch.get_rng_state()
    F.fine_tune(model, F.load_pairs("train")[:2], epochs=1, batch_size=2, seed=0)
    assert torch.equal(torch.get_rng_state(), before)
    assert not torch.are_deterministic_algorithms_enabled()


def _naive_average_ranks(v):
    """Rank of each value = (number smaller) + (number equal - 1) / 2: the tie rule, spelled out."""
    return [sum(w < x for w in v) + (sum(w == x for w in v) - 1) / 2 for x in v]


def test_spearman_on_hand_cases_with_ties():
    assert F.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert F.spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    # ranks with ties: x -> [0, 1.5, 1.5, 3], y -> [0, 1, 2, 3]; r = 4.5 / sqrt(4.5 * 5)
    assert F.spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(4.5 / np.sqrt(4.5 * 5))
    # ties on both sides: x ranks [0.5, 0.5, 2, 3], y ranks [0, 2, 2, 2]; centred (mean 1.5):
    # x [-1, -1, .5, 1.5], y [-1.5, .5, .5, .5] -> r = 2 / sqrt(4.5 * 3)
    assert F.spearman([5, 5, 7, 9], [0, 1, 1, 1]) == pytest.approx(2 / np.sqrt(4.5 * 3))


def test_ranks_are_the_naive_average_ranks_exactly():
    rng = np.random.default_rng(1)
    for v in (rng.integers(0, 6, 40).astype(float), rng.random(30).astype(np.float32),
              np.array([2.0, 2.0]), np.array([7.0])):
        assert F._ranks(v).tolist() == _naive_average_ranks(v.tolist())  # half-integers: exact


def test_spearman_is_pearson_of_naively_computed_average_ranks():
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 6, 50).astype(float), np.round(rng.normal(size=50), 1)  # many ties
    expected = np.corrcoef(_naive_average_ranks(x), _naive_average_ranks(y))[0, 1]
    # float64 sums of 50 terms: 50 * 2.2e-16 = 1e-14 -> 1e-12
    assert F.spearman(x, y) == pytest.approx(expected, abs=1e-12)
    assert F.spearman(y, x) == pytest.approx(expected, abs=1e-12)




def test_bad_inputs(bert):
    with pytest.raises(ValueError, match="512 positions"):
        F.pair_batch([(A, B), ("cat " * 300, "dog " * 300)], model=bert)
    with pytest.raises(ValueError, match="non-empty list"):
        F.pair_batch([], model=bert)
    with pytest.raises(ValueError, match="constant"):
        F.spearman([1, 1, 1], [1, 2, 3])
    with pytest.raises(ValueError, match="same shape"):
        F.spearman([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="finite"):
        F.spearman([1, np.nan], [1, 2])
    with pytest.raises(ValueError, match="epochs must be"):
        F.fine_tune(bert.model, F.load_pairs("train")[:2], epochs=0)


def test_link_effects_match_the_models_own_layer_0(bert):
    effects = F.link_effects(bert, [(A, B)])
    # [CLS] the cat sat on the mat [SEP] a fe ##line rested on the rug [SEP]
    assert effects.words == [("cat", "feline"), ("sat", "rested"), ("mat", "rug")]
    k, cat, feline = 0, 2, [9, 10]
    batch = F.pair_batch([(A, B)], model=bert)
    with torch.no_grad():
        standard = bert.model(**batch.inputs, output_attentions=True).attentions[0][0]
        with C.use_prior_attention(bert, layers=[0]):
            guided = bert.model(**batch.inputs, prior=batch.prior,
                                output_attentions=True).attentions[0][0]
    # two float32 routes through one layer (weights <= 1): a few roundings apart
    assert effects.standard[k] == pytest.approx(standard[:, cat, feline].sum(-1).mean().item(),
                                                abs=1e-6)
    assert effects.prior[k] == pytest.approx(guided[:, cat, feline].sum(-1).mean().item(), abs=1e-6)
    for values in effects[1:7]:
        assert values.shape == (3,)
    assert ((effects.negative_heads >= 0) & (effects.negative_heads <= 1)).all()
    assert 0 < effects.zero_negative < 1
    # the control removes the link: cat's row then has 0 at feline, like every other key of b
    assert effects.control[k] != effects.prior[k]


def test_link_effects_say_which_pair_each_link_is_in(bert):
    # links of one pair are not independent: each link carries its pair's index, so an interval
    # can resample pairs (or groups of pairs); a pair with no link adds no row
    effects = F.link_effects(bert, [(A, B), ("The sky is blue.", "A dog barked."), (A, B)])
    assert effects.pair.dtype.kind == "i"
    assert effects.pair.tolist() == [0, 0, 0, 2, 2, 2]
    assert effects.words[3:] == effects.words[:3]
    assert np.array_equal(effects.prior[3:], effects.prior[:3])


def test_link_effects_bad_inputs(bert):
    with pytest.raises(TypeError, match="LoadedBert"):
        F.link_effects(bert.model, [(A, B)])
    with pytest.raises(ValueError, match="non-empty"):
        F.link_effects(bert, [])


def test_fine_tune_passes_prior_options_to_its_batches(small_model):
    # the "." kept in BERT's input changes what is trained on, so the first loss differs
    pairs = F.load_pairs("train")[:4]
    losses = {}
    for punctuation in ("remove", "keep"):
        model = copy.deepcopy(small_model)
        losses[punctuation] = F.fine_tune(model, pairs, epochs=1, batch_size=4, seed=0,
                                          prior_options={"punctuation": punctuation})
    assert len(losses["keep"]) == len(losses["remove"]) == 1
    assert losses["keep"][0] != losses["remove"][0]


def test_fine_tune_builds_the_batches_of_the_same_pairs_once(small_model, monkeypatch):
    # notebook 08 fine-tunes six models on one set of pairs: their batches are built once
    calls = []
    real = F.pair_batch
    monkeypatch.setattr(F, "pair_batch", lambda *a, **k: calls.append(1) or real(*a, **k))
    F._cached_batches.cache_clear()
    pairs = F.load_pairs("train")[:4]
    losses = [F.fine_tune(copy.deepcopy(small_model), pairs, epochs=1, batch_size=2, seed=seed)
              for seed in (0, 1, 0)]
    assert len(calls) == 2 and losses[0] == losses[2] != losses[1]  # two batches, built once
    F.fine_tune(copy.deepcopy(small_model), pairs, epochs=1, batch_size=4, seed=0)
    assert len(calls) == 3  # another batch size: built anew
    lexicon = {("cat", "feline"): 0.9, ("feline", "cat"): 0.9}  # not a key: built each time
    for _ in range(2):
        F.fine_tune(copy.deepcopy(small_model), pairs, epochs=1, batch_size=4, seed=0,
                    prior_options={"lexicon": lexicon})
    assert len(calls) == 5


@pytest.mark.slow
def test_fine_tune_steps_are_torchs_plain_adamw(small_model):
    # fine_tune uses AdamW's fused kernel (cheaper); the same steps taken by hand with the
    # per-parameter AdamW must give the same losses and weights, up to float32 rounding
    pairs = F.load_pairs("train")[:4]
    model, ref = copy.deepcopy(small_model), copy.deepcopy(small_model)
    losses = F.fine_tune(model, pairs, epochs=1, batch_size=2, seed=3)
    for p in ref.embeddings.parameters():
        p.requires_grad_(False)
    optimizer = torch.optim.AdamW([p for p in ref.parameters() if p.requires_grad], lr=5e-5,
                                  foreach=False)
    batches = [pairs[:2], pairs[2:]]
    ref.train()
    torch.manual_seed(3)
    by_hand = []
    for k in np.random.default_rng(3).permutation(2):
        target = torch.tensor([p.score / 5 for p in batches[k]])
        loss = torch.nn.functional.mse_loss(F.pair_cosines(ref, F.pair_batch(batches[k])), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        by_hand.append(loss.item())
    np.testing.assert_allclose(losses, by_hand, rtol=1e-5)
    trained, expected = model.state_dict(), ref.state_dict()
    key = "encoder.layer.1.attention.self.query.weight"
    assert not torch.equal(trained[key], small_model.state_dict()[key])  # it moved
    for key in trained:  # weights of ~0.02 moved by ~1e-4: rounding is far below 1e-6
        torch.testing.assert_close(trained[key], expected[key], rtol=0, atol=1e-6)


def test_eval_cosines_are_pair_cosines_with_less_padding(bert):
    pairs = F.load_pairs("test")[:11]  # chunks of 4: three chunks, the last one short
    batch = F.pair_batch(pairs, model=bert)
    with torch.no_grad():
        whole = F.pair_cosines(bert.model, batch).numpy()
    for chunk in (4, 100):
        got = F.eval_cosines(bert.model, batch, chunk=chunk)
        assert got.shape == (11,) and got.dtype == np.float32
        np.testing.assert_allclose(got, whole, atol=1e-6)
    with C.use_prior_attention(bert, layers=[0]):  # the prior is cut with its chunk too
        with torch.no_grad():
            guided = F.pair_cosines(bert.model, batch).numpy()
        np.testing.assert_allclose(F.eval_cosines(bert.model, batch, chunk=3), guided, atol=1e-6)
    assert not np.allclose(guided, whole, atol=1e-4)
    with pytest.raises(ValueError, match="chunk"):
        F.eval_cosines(bert.model, batch, chunk=0)
