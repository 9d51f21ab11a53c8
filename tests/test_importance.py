"""Tests for bertlib.importance: value norms by hand and through torch, head importance equal to
full forward passes with the head ablated."""

import numpy as np
import pytest
import torch

from bertlib import importance as im
from bertlib.ablation import ablated_head
from bertlib.corpus import sentence_vectors
from bertlib.loading import load_bert
from bertlib.models import run_bert


def test_head_importance_equals_full_forward_passes_with_the_head_ablated():
    texts = ["The kettle whistled.", "Snow fell on the quiet village overnight."]
    importance = im.head_importance(texts, mode="zero")
    assert importance.shape == (6, 12) and (importance >= -1e-6).all()
    base = sentence_vectors(texts)
    for layer, head in [(0, 2), (4, 7)]:
        with ablated_head(layer, head, "zero"):
            changed = sentence_vectors(texts)
        cos = (base * changed).sum(-1) / np.linalg.norm(base, axis=-1) / np.linalg.norm(changed, axis=-1)
        assert importance[layer, head] == pytest.approx(1 - cos.mean(), abs=1e-6)
    uniform = im.head_importance(texts, mode="uniform")  # padded batch: uniform over real tokens
    with ablated_head(3, 4, "uniform"):
        changed = sentence_vectors(texts)
    cos = (base * changed).sum(-1) / np.linalg.norm(base, axis=-1) / np.linalg.norm(changed, axis=-1)
    assert uniform[3, 4] == pytest.approx(1 - cos.mean(), abs=1e-6)
    assert not np.allclose(uniform, importance, atol=1e-4)


def test_value_norms_match_the_value_projection_by_hand():
    bert = load_bert()
    run = run_bert("The fox slipped under the fence.")
    norms = im.value_norms(run.hidden_states, output_projection=False)
    L, H = 6, 12
    assert norms.shape == (L, H, len(run.tokens))
    sd = bert.model.state_dict()
    layer, head = 3, 7
    W = sd[f"encoder.layer.{layer}.attention.self.value.weight"].numpy()
    b = sd[f"encoder.layer.{layer}.attention.self.value.bias"].numpy()
    V = run.hidden_states[layer] @ W.T + b  # (n, d)
    expected = np.linalg.norm(V[:, head * 32:(head + 1) * 32], axis=-1)
    np.testing.assert_allclose(norms[layer, head], expected, rtol=1e-4)
    with pytest.raises(ValueError, match=r"\(7, n, 384\)"):
        im.value_norms(run.hidden_states[:3])


def test_value_norms_through_the_output_projection_match_torch():
    """‖f_h(x_j)‖: the head's value vector alone (other heads zero) through W_O, no bias."""
    bert = load_bert()
    run = run_bert("Bees carry pollen home.")
    norms = im.value_norms(run.hidden_states)
    attention = bert.model.encoder.layer[2].attention
    head = 5
    with torch.no_grad():
        V = attention.self.value(torch.tensor(run.hidden_states[2]))  # (n, d)
        only_h = torch.zeros_like(V)
        only_h[:, head * 32:(head + 1) * 32] = V[:, head * 32:(head + 1) * 32]
        f = attention.output.dense(only_h) - attention.output.dense.bias
    np.testing.assert_allclose(norms[2, head], f.norm(dim=-1).numpy(), rtol=1e-4)
    assert not np.allclose(norms, im.value_norms(run.hidden_states, output_projection=False))
