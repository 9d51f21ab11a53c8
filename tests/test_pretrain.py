"""Tests of bertlib.pretrain: config, training, ablation, fill-mask."""

import numpy as np
import pytest
import torch

from bertlib import grammar as g
from bertlib import pretrain as pt
from bertlib import probes


def test_config_needs_hidden_divisible_by_heads():
    with pytest.raises(ValueError, match=r"hidden = 66 is not divisible by heads = 4: .* Valid heads for hidden = 66: \[1, 2, 3, 6, 11, 22, 33, 66\]"):
        pt.tiny_config(100, heads=4, hidden=66)
    with pytest.raises(ValueError, match="layers must be a whole number >= 1"):
        pt.tiny_config(100, layers=0)
    config = pt.tiny_config(100, layers=3, heads=2, hidden=32)
    assert (config.num_hidden_layers, config.num_attention_heads, config.hidden_size) == (3, 2, 32)


def test_training_is_deterministic_and_lowers_the_loss(tok):
    torch.set_num_threads(1)
    probe = probes.make_probe(tok, g.generate(4, seed=0, split="test"))
    runs = []
    for _ in range(2):
        model = pt.new_model(pt.tiny_config(tok.get_vocab_size(), heads=2, hidden=16), 0)
        runs.append(pt.train(model, tok, 30, probe, batch_size=16, warmup=5, every=10,
                             snapshot_steps=(0, 30), progress=False))
    a, b = runs
    assert np.array_equal(a.loss, b.loss)
    assert a.steps == [0, 10, 20, 30] and sorted(a.snapshots) == [0, 30]
    assert a.heads["subject"].shape == (4, 2, 2)
    assert a.loss[-5:].mean() < a.loss[:5].mean()
    with pytest.raises(ValueError, match="steps must be a whole number >= 1"):
        pt.train(model, tok, 0, probe)


def test_ablation_changes_only_inside_the_block_and_checks_its_range(tok, tiny):
    probe = probes.make_probe(tok, g.generate(4, seed=0, split="test"))
    before = probes.measure(tiny, probe)["p_right"]
    with pt.ablated(tiny, 1, 0):
        during = probes.measure(tiny, probe)
    assert np.allclose(during["subject"][1, 0], 0.0)
    assert not np.allclose(during["p_right"], before)
    assert np.allclose(probes.measure(tiny, probe)["p_right"], before)
    with pytest.raises(ValueError, match=r"layer must be a whole number in 0..1 \(2 layers\)"):
        with pt.ablated(tiny, 2, 0):
            pass
    with pytest.raises(ValueError, match=r"head must be a whole number in 0..1"):
        with pt.ablated(tiny, 0, 2):
            pass


def test_fill_mask_returns_probabilities_and_names_bad_text(tok, tiny):
    top, tokens, maps, where = pt.fill_mask(tiny, tok, "the cat [MASK]", k=3)
    assert len(top) == 3 and tokens[where] == "[MASK]" and maps.shape == (2, 2, 5, 5)
    assert top[0][1] >= top[1][1] >= top[2][1] > 0
    with pytest.raises(ValueError, match="exactly one \\[MASK\\], got 0"):
        pt.fill_mask(tiny, tok, "the cat sleeps")
    with pytest.raises(ValueError, match=r"not words of the language: \['unicorn', 'Cat'\]"):
        pt.fill_mask(tiny, tok, "the unicorn near the Cat [MASK]")
    with pytest.raises(TypeError, match="text must be a string"):
        pt.fill_mask(tiny, tok, None)
