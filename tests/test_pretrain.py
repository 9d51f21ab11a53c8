"""Tests of bertlib.tiny.pretrain: config, training, ablation, fill-mask."""

import numpy as np
import pytest
import torch

from bertlib.checks import IGNORE_INDEX
from bertlib.hf.ablation import ablated_head
from bertlib.paper.mlm import mask_batch
from bertlib.tiny import agreement, linear_probe
from bertlib.tiny import grammar as g
from bertlib.tiny import pretrain as pt


def test_config_needs_hidden_divisible_by_heads():
    with pytest.raises(ValueError, match=r"hidden = 66 is not divisible by heads = 4: .* Valid heads for hidden = 66: \[1, 2, 3, 6, 11, 22, 33, 66\]"):
        pt.tiny_config(100, heads=4, hidden=66)
    with pytest.raises(ValueError, match="layers must be a whole number >= 1"):
        pt.tiny_config(100, layers=0)
    config = pt.tiny_config(100, layers=3, heads=2, hidden=32)
    assert (config.num_hidden_layers, config.num_attention_heads, config.hidden_size) == (3, 2, 32)


SMALL = dict(layers=2, heads=2, hidden=16, steps=30, batch_size=16, warmup=5, every=10)


def test_recipe_checks_its_numbers_and_builds_its_config():
    recipe = pt.Recipe(**SMALL)
    config = recipe.config(100)
    assert (config.num_hidden_layers, config.num_attention_heads, config.hidden_size) == (2, 2, 16)
    assert recipe.to_json()["constructions"] == list(g.TRAIN_CONSTRUCTIONS)
    with pytest.raises(ValueError, match="steps must be a whole number >= 1"):
        pt.Recipe(steps=0)
    with pytest.raises(ValueError, match="not divisible by heads = 3"):
        pt.Recipe(heads=3, hidden=16)
    with pytest.raises(ValueError, match="weight_decay must be a number >= 0"):
        pt.Recipe(weight_decay=-0.1)
    assert pt.Recipe().weight_decay == 0.01  # BERT's, and what every committed run used
    with pytest.raises(ValueError, match=r"max_pp .* in 1..3 \(constructions .* include 'pp'"):
        pt.Recipe(max_pp=0)  # the default constructions keep pp: refused when built, not in train
    with pytest.raises(ValueError, match=r"max_pp .* in 0..3, got 4"):
        pt.Recipe(max_pp=4, constructions=("simple", "comp"))
    assert pt.Recipe(max_pp=0, constructions=("simple", "comp")).max_pp == 0


def test_mlm_step_loss_is_transformers_own_and_it_updates_the_weights(tok):
    model = pt.new_model(pt.Recipe(**SMALL).config(tok.get_vocab_size()), 0)
    ids, attention = agreement.encode_texts(tok, [s.text for s in g.generate(8, seed=1)])
    special = [tok.token_to_id(s) for s in agreement.SPECIALS]
    masked = mask_batch(ids, tok.token_to_id("[MASK]"), tok.get_vocab_size(), special,
                        np.random.default_rng(0))
    x, a, y = (torch.as_tensor(v) for v in (masked.input_ids, attention, masked.labels))
    model.train()
    with torch.no_grad():
        expected = model(input_ids=x, attention_mask=a, labels=y).loss.item()
    before = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    assert pt.mlm_step(model, opt, x, a, y) == pytest.approx(expected, rel=1e-6)
    assert any(not torch.equal(b, p) for b, p in zip(before, model.parameters(), strict=True))


def test_mlm_step_takes_numpy_arrays_as_the_same_tensors(tok):
    ids, attention = agreement.encode_texts(tok, [s.text for s in g.generate(4, seed=2)])
    special = [tok.token_to_id(s) for s in agreement.SPECIALS]
    masked = mask_batch(ids, tok.token_to_id("[MASK]"), tok.get_vocab_size(), special, 0)
    batches = [(masked.input_ids, attention, masked.labels)]
    batches.append(tuple(torch.as_tensor(v) for v in batches[0]))
    steps = []
    for batch in batches:
        model = pt.new_model(pt.Recipe(**SMALL).config(tok.get_vocab_size()), 0)
        torch.manual_seed(5)  # the same dropout draw in both
        loss = pt.mlm_step(model, torch.optim.SGD(model.parameters(), lr=0.1), *batch)
        steps.append((loss, [p.detach().clone() for p in model.parameters()]))
    assert steps[0][0] == steps[1][0]
    assert all(torch.equal(a, b) for a, b in zip(steps[0][1], steps[1][1], strict=True))


def test_mlm_step_names_a_bad_batch_before_it_steps(tok, tiny):
    x = torch.tensor([[2, 5, 6, 3]])
    a, y = torch.ones_like(x), torch.full_like(x, IGNORE_INDEX)
    opt = torch.optim.SGD(tiny.parameters(), lr=0.1)
    before = [p.detach().clone() for p in tiny.parameters()]
    vocab = tok.get_vocab_size()
    for args, error, words in (
            ((x[0], a[0], y[0]), ValueError, r"input_ids must be a 2-D \(B, N\) array"),
            ((x + vocab, a, y), ValueError, rf"input_ids must be in 0..{vocab - 1}"),
            ((x, a[:, :3], y), ValueError, "attention_mask and input_ids must have the same shape"),
            ((x, a * 2, y), ValueError, "attention_mask must hold 0/1 or bool flags"),
            ((x, a, y.float()), TypeError, "labels .* whole numbers"),
            ((x, a, y - IGNORE_INDEX + vocab), ValueError,
             rf"labels \(token ids, or {IGNORE_INDEX} .*\) must be in")):
        with pytest.raises(error, match=words):
            pt.mlm_step(tiny, opt, *args)
    assert all(torch.equal(b, p) for b, p in zip(before, tiny.parameters(), strict=True))


def test_training_is_deterministic_and_lowers_the_loss(tok):
    torch.set_num_threads(1)
    check_set = agreement.make_sentence_set(tok, g.generate(4, seed=0, split="test"))
    recipe = pt.Recipe(**SMALL)
    control = linear_probe.control_labels(tok, check_set)
    runs, seen = [], []
    for _ in range(2):
        model = pt.new_model(recipe.config(tok.get_vocab_size()), 0)
        runs.append(pt.train(model, tok, recipe, check_set, snapshot_steps=(0, 30), progress=False,
                             on_record=lambda r: seen.append(r.steps[-1]),
                             number_probe=lambda m, p: linear_probe.verb_number_probe(m, p, control)))
    a, b = runs
    assert np.array_equal(a.loss, b.loss) and np.array_equal(a.log_odds, b.log_odds)
    assert a.steps == [0, 10, 20, 30] and sorted(a.snapshots) == [0, 30]
    assert seen == [10, 20, 30] * 2
    assert a.heads["subject"].shape == a.heads["subject_far"].shape == (4, 2, 2)
    assert a.log_odds.shape == (4,) and a.number_probe.shape == (4, 2, 4)  # (T, layers, columns)
    assert np.array_equal(a.number_probe, b.number_probe, equal_nan=True)
    assert a.loss[-5:].mean() < a.loss[:5].mean()
    first = pt.train(pt.new_model(recipe.config(tok.get_vocab_size()), 0), tok, recipe, check_set,
                     steps=10, progress=False)
    assert np.array_equal(first.loss, a.loss[:10])  # the first steps of the same recipe
    plain = pt.train(pt.new_model(recipe.config(tok.get_vocab_size()), 0), tok, recipe, check_set,
                     progress=False)
    assert plain.number_probe is None and np.array_equal(plain.loss, a.loss)  # same training
    asked = []  # until(recorder): stop after the first measurement at which it holds
    early = pt.train(pt.new_model(recipe.config(tok.get_vocab_size()), 0), tok, recipe, check_set,
                     progress=False, until=lambda r: asked.append(r.steps[-1]) or r.steps[-1] >= 20)
    assert asked == [10, 20] and early.steps == [0, 10, 20]
    assert np.array_equal(early.loss, a.loss[:20]) and np.array_equal(early.accuracy, a.accuracy[:3])
    with pytest.raises(ValueError, match=r"steps must be a whole number in 1..30"):
        pt.train(model, tok, recipe, check_set, steps=31)
    with pytest.raises(TypeError, match="recipe must be a bertlib.tiny.pretrain.Recipe"):
        pt.train(model, tok, 30, check_set)


def test_ablation_changes_only_inside_the_block_and_checks_its_range(tok, tiny):
    check_set = agreement.make_sentence_set(tok, g.generate(4, seed=0, split="test"))
    before = agreement.measure_on(tiny, check_set)["p_right"]
    with ablated_head(1, 0, "zero", tiny):
        during = agreement.measure_on(tiny, check_set)
    assert np.allclose(during["subject"][1, 0], 0.0)
    assert not np.allclose(during["p_right"], before)
    assert np.allclose(agreement.measure_on(tiny, check_set)["p_right"], before)
    with pytest.raises(ValueError, match=r"layer must be a whole number in 0..1 \(2 layers\)"):
        with ablated_head(2, 0, "zero", tiny):
            pass
    with pytest.raises(ValueError, match=r"head must be a whole number in 0..1"):
        with ablated_head(0, 2, "zero", tiny):
            pass


def test_fill_mask_returns_probabilities_and_names_bad_text(tok, tiny):
    top, tokens, maps, where = pt.tiny_fill_mask(tiny, tok, "the cat [MASK]", k=3)
    assert len(top) == 3 and tokens[where] == "[MASK]" and maps.shape == (2, 2, 5, 5)
    assert top[0][1] >= top[1][1] >= top[2][1] > 0
    with pytest.raises(ValueError, match="exactly one \\[MASK\\], got 0"):
        pt.tiny_fill_mask(tiny, tok, "the cat sleeps")
    with pytest.raises(ValueError, match=r"not words of the language: \['unicorn', 'Cat'\]"):
        pt.tiny_fill_mask(tiny, tok, "the unicorn near the Cat [MASK]")
    with pytest.raises(TypeError, match="text must be a string"):
        pt.tiny_fill_mask(tiny, tok, None)


def test_training_batches_are_the_tokenizer_s_own_encoding(tok):
    rng, again = np.random.default_rng(4), np.random.default_rng(4)
    ids, attention = pt._batch_ids(tok, 64, rng, g.TRAIN_CONSTRUCTIONS, 2)
    seed = int(again.integers(2**31))  # the same draw _batch_ids makes
    texts = [s.text for s in g.generate(64, g.TRAIN_CONSTRUCTIONS, seed, max_pp=2)]
    expected = agreement.encode_texts(tok, texts)
    assert np.array_equal(ids, expected[0]) and np.array_equal(attention, expected[1])
    assert (attention == 0).any()  # sentences of several lengths: the padding is checked too


def test_train_documents_every_option_it_passes_on():
    """train's docstring names each keyword option (the private loop only carries them out)."""
    import inspect

    options = [p.name for p in inspect.signature(pt._Loop.__init__).parameters.values()
               if p.kind is p.KEYWORD_ONLY]
    assert options and all(name in pt.train.__doc__ for name in options), options


def test_the_tiny_bert_is_the_numpy_bert_of_the_equations():
    """bertlib.paper.bert.bert_forward on a BertForMaskedLM of tiny_config gives transformers'
    hidden states and attention weights within float32 rounding (notebook 09 asserts the same on
    the committed runs)."""
    from bertlib.hf.params import bert_params
    from bertlib.paper.bert import bert_forward

    model = pt.new_model(pt.tiny_config(40), seed=3)
    ids = np.random.default_rng(0).integers(5, 40, (3, 12))
    flags = np.ones_like(ids)
    flags[1, 9:] = 0  # a padded row
    with torch.no_grad():
        out = model(input_ids=torch.as_tensor(ids), attention_mask=torch.as_tensor(flags),
                    output_hidden_states=True, output_attentions=True)
    ours = bert_forward(bert_params(model), ids, attention_mask=flags)
    real = flags.astype(bool)
    assert np.abs(ours.hidden_states - torch.stack(out.hidden_states).numpy())[:, real].max() < 1e-5
    assert np.abs(ours.attentions - torch.stack(out.attentions).numpy()).max() < 1e-5


def test_train_steps_as_the_plain_per_parameter_adamw_would(tok):
    """train's AdamW makes one foreach call for all parameters: the same numbers as the plain
    per-parameter loop (foreach=False), step by step, here replayed by hand."""
    torch.set_num_threads(1)
    recipe = pt.Recipe(**SMALL)
    check_set = agreement.make_sentence_set(tok, g.generate(4, seed=0, split="test"))
    fast = pt.new_model(recipe.config(tok.get_vocab_size()), 0)
    history = pt.train(fast, tok, recipe, check_set, steps=4, progress=False)
    model = pt.new_model(recipe.config(tok.get_vocab_size()), 0)
    plain = torch.optim.AdamW(model.parameters(), recipe.lr, weight_decay=recipe.weight_decay,
                              foreach=False)
    schedule = pt._schedule(plain, recipe.warmup, recipe.steps)
    rng, (mask_id, vocab, special) = np.random.default_rng(recipe.seed), agreement.masking_ids(tok)
    losses = []
    for _ in range(4):  # train's loop, by hand: the same draws in the same order
        ids, attention = pt._batch_ids(tok, recipe.batch_size, rng, recipe.constructions,
                                       recipe.max_pp)
        masked = mask_batch(ids, mask_id, vocab, special, rng, recipe.mask_prob)
        losses.append(pt.mlm_step(model, plain, masked.input_ids, attention, masked.labels))
        schedule.step()
    assert np.array_equal(history.loss, losses)
    assert all(torch.equal(a, b) for a, b in zip(fast.parameters(), model.parameters(),
                                                 strict=True))
