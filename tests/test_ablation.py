"""Tests for bertlib.hf.ablation: one head switched off inside a with block, the model restored."""

import numpy as np
import pytest
import torch

from bertlib.hf import ablation as ab
from bertlib.hf.corpus import sentence_vectors
from bertlib.hf.loading import load_bert


def _state(model):
    return {k: v.clone() for k, v in model.model.state_dict().items()}


def test_ablated_head_changes_only_inside_the_block_and_restores_the_model_exactly():
    bert = load_bert()
    texts = ["The cat sat on the mat.", "Bees carry pollen."]
    before_impl = bert.model.config._attn_implementation
    before_state = _state(bert)
    before = sentence_vectors(texts)
    with ab.ablated_head(3, 4, "uniform") as m:
        assert m is bert
        during = sentence_vectors(texts)
    after = sentence_vectors(texts)
    assert not np.allclose(during, before, atol=1e-4)
    assert np.array_equal(after, before)
    assert bert.model.config._attn_implementation == before_impl
    for layer in bert.model.encoder.layer:
        assert layer.attention.self.config._attn_implementation == before_impl
    assert all(torch.equal(v, before_state[k]) for k, v in bert.model.state_dict().items())


def test_ablated_head_restores_the_model_after_an_error():
    bert = load_bert()
    before_impl = bert.model.config._attn_implementation
    with pytest.raises(RuntimeError, match="boom"), ab.ablated_head(0, 0, "zero"):
        raise RuntimeError("boom")
    assert bert.model.config._attn_implementation == before_impl


def test_ablated_uniform_head_gives_uniform_weights_over_real_tokens():
    bert = load_bert()
    enc = bert.tokenizer(["a b c d e f", "a b"], padding=True, return_tensors="pt")
    with ab.ablated_head(2, 5, "uniform"), torch.no_grad():
        att = bert.model(**enc, output_attentions=True).attentions[2][:, 5]
    assert torch.allclose(att[0], torch.full_like(att[0], 1 / 8))
    assert torch.allclose(att[1, :, :4], torch.full((8, 4), 0.25)) and (att[1, :, 4:] == 0).all()
    with ab.ablated_head(2, 5, "zero"), torch.no_grad():
        att = bert.model(**enc, output_attentions=True).attentions[2]
    assert (att[:, 5] == 0).all() and torch.allclose(att[:, 4].sum(-1), torch.tensor(1.0))
    with ab.ablated_head(2, 5), torch.no_grad():  # the default: zero, as ablated_heads'
        default = bert.model(**enc, output_attentions=True).attentions[2]
    assert torch.equal(default, att)
    with ab.ablated_heads([(2, 5)]), torch.no_grad():
        assert torch.equal(bert.model(**enc, output_attentions=True).attentions[2], att)


def test_ablated_head_rejects_bad_layer_head_and_mode():
    with pytest.raises(ValueError, match=r"layer must be a whole number in 0..5 \(6 layers\), got 7"):
        with ab.ablated_head(7, 0):
            pass
    with pytest.raises(ValueError, match=r"head must be a whole number in 0..11 .*got -1"):
        with ab.ablated_head(0, -1):
            pass
    with pytest.raises(TypeError, match="whole number"):
        with ab.ablated_head(1.5, 0):
            pass
    with pytest.raises(ValueError, match="mode"):
        with ab.ablated_head(0, 0, "half"):
            pass
    with pytest.raises(ValueError, match="nested"):
        with ab.ablated_head(0, 0), ab.ablated_head(1, 1):
            pass
    assert load_bert().model.config._attn_implementation == "eager"


def test_ablated_weights_is_zero_or_uniform_over_the_real_keys():
    """The one rule both ablation paths (ablated_heads, importance's per-row) put in place."""
    scores = torch.randn(2, 3, 4, 5)
    mask = torch.zeros(2, 1, 4, 5)
    mask[1, ..., 3:] = torch.finfo(torch.float32).min  # row 1: keys 3 and 4 are padding
    zero = ab.ablated_weights(None, scores, mask, "zero")
    assert zero.shape == (2, 1, 4, 5) and not zero.any()
    uniform = ab.ablated_weights(None, scores, mask, "uniform")
    torch.testing.assert_close(uniform[0], torch.full((1, 4, 5), 1 / 5))
    torch.testing.assert_close(uniform[1, ..., :3], torch.full((1, 4, 3), 1 / 3))
    assert not uniform[1, ..., 3:].any()
