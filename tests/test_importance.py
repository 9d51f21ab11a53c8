"""Tests for bertlib.hf.importance: value norms by hand and through torch, head importance equal to
full forward passes with the head ablated."""

import numpy as np
import pytest
import torch

from bertlib.hf import importance as im
from bertlib.hf.ablation import ablated_head
from bertlib.hf.corpus import mean_pool, sentence_vectors
from bertlib.hf.loading import load_bert
from bertlib.hf.models import run_bert
from bertlib.paper.attention import cosine

#: Two texts of different lengths (so the batch is padded).
TEXTS = ["The kettle whistled.", "Snow fell on the quiet village overnight."]


@pytest.fixture(scope="module")
def zero_importance():
    """head_importance(TEXTS, mode="zero"): 72 ablated forward passes, made once for two tests."""
    return im.head_importance(TEXTS, mode="zero")


def test_head_importance_equals_full_forward_passes_with_the_head_ablated(zero_importance):
    texts, importance = TEXTS, zero_importance
    assert importance.shape == (6, 12) and (importance >= -1e-6).all()
    base = sentence_vectors(texts)
    for layer, head in [(0, 2), (4, 7)]:
        with ablated_head(layer, head, "zero"):
            changed = sentence_vectors(texts)
        cos = cosine(base, changed)  # (texts,)
        assert importance[layer, head] == pytest.approx(1 - cos.mean(), abs=1e-6)
    uniform = im.head_importance(texts, mode="uniform")  # padded batch: uniform over real tokens
    with ablated_head(3, 4, "uniform"):
        changed = sentence_vectors(texts)
    cos = cosine(base, changed)
    assert uniform[3, 4] == pytest.approx(1 - cos.mean(), abs=1e-6)
    assert not np.allclose(uniform, importance, atol=1e-4)



def test_head_importance_pools_with_the_one_masked_mean_equal_to_a_plain_mean_without_padding():
    # head_importance runs texts of one length, so every piece is real: corpus.mean_pool (the
    # one masked mean, here in float64) is then the plain mean over the pieces, bit for bit, the
    # .mean(1) it replaced; the padded case must not be the plain mean
    g = torch.Generator().manual_seed(0)
    for N, n in [(1, 1), (3, 7), (384, 21)]:
        h = torch.randn(N, n, 384, generator=g)
        real = torch.ones(N, n, dtype=torch.int64)
        assert np.array_equal(mean_pool(h.double(), real), h.double().mean(1).numpy())
    real[:, -1] = 0
    assert not np.allclose(mean_pool(h.double(), real), h.double().mean(1).numpy())

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


def test_head_importance_per_text_gives_one_row_per_text_whose_mean_is_the_default(
        zero_importance):
    texts = TEXTS
    per_text = im.head_importance(texts, mode="zero", per_text=True)
    assert per_text.shape == (2, 6, 12) and (per_text >= -1e-6).all()
    assert not np.allclose(per_text[0], per_text[1])  # two texts, two different rows
    np.testing.assert_allclose(per_text.mean(axis=0), zero_importance, atol=1e-9)
    base = sentence_vectors(texts[1:2])
    with ablated_head(5, 3, "zero"):
        changed = sentence_vectors(texts[1:2])
    cos = float(base[0] @ changed[0] / np.linalg.norm(base[0]) / np.linalg.norm(changed[0]))
    assert per_text[1, 5, 3] == pytest.approx(1 - cos, abs=1e-5)


def test_norm_weighted_maps_by_hand_for_one_layer():
    """N[i, j] = ‖Σ_h α^h_ij f_h(x_j)‖, rows normalised, with f_h from value_norms' projection."""
    bert = load_bert()
    run = run_bert("Bees carry pollen home.")
    maps = im.norm_weighted_maps(run.hidden_states, run.attentions)
    n = len(run.tokens)
    assert maps.shape == (6, n, n)
    np.testing.assert_allclose(maps.sum(-1), 1.0, atol=1e-9)
    sd = bert.model.state_dict()
    layer = 4
    prefix = f"encoder.layer.{layer}.attention"
    V = run.hidden_states[layer] @ sd[f"{prefix}.self.value.weight"].numpy().T + \
        sd[f"{prefix}.self.value.bias"].numpy()
    W_O = sd[f"{prefix}.output.dense.weight"].numpy().T  # (d, d): rows are the heads' slices
    sent = np.zeros((n, n, 384))
    for h in range(12):
        f_h = V[:, h * 32:(h + 1) * 32] @ W_O[h * 32:(h + 1) * 32]  # (n, d)
        sent += run.attentions[layer, h][:, :, None] * f_h[None]
    size = np.linalg.norm(sent, axis=-1)
    np.testing.assert_allclose(maps[layer], size / size.sum(-1, keepdims=True), rtol=1e-4,
                               atol=1e-7)
    # weights on a token that sends little count for little: not the plain head average
    assert not np.allclose(maps[layer], run.attentions[layer].mean(0), atol=1e-2)


def test_norm_weighted_maps_rejects_maps_of_another_run():
    run = run_bert("Bees carry pollen home.")
    other = run_bert("The kettle whistled loudly on the stove.")
    with pytest.raises(ValueError, match="run that gave hidden_states"):
        im.norm_weighted_maps(run.hidden_states, other.attentions)


def test_occlusion_equals_one_masked_run_per_piece():
    bert = load_bert()
    texts = ["The kettle whistled.", "Snow fell on the quiet village overnight."]
    changes = im.occlusion(texts, batch_size=5)  # batches cut across the texts
    lengths = [len(run_bert(t).tokens) for t in texts]
    assert [c.shape for c in changes] == [(n,) for n in lengths]
    enc = bert.tokenizer(texts[1], return_tensors="pt")
    with torch.no_grad():
        base = bert.model(**enc).last_hidden_state[0, 0].double().numpy()
        ids = enc["input_ids"].clone()
        ids[0, 3] = bert.tokenizer.mask_token_id
        masked = bert.model(input_ids=ids, attention_mask=enc["attention_mask"],
                            token_type_ids=enc["token_type_ids"]).last_hidden_state[0, 0]
    masked = masked.double().numpy()
    cos = base @ masked / np.linalg.norm(base) / np.linalg.norm(masked)
    assert changes[1][3] == pytest.approx(1 - cos, abs=1e-5)
    assert (changes[1] > 0).all()  # masking any piece moves [CLS] a little at least
    with pytest.raises(ValueError, match="position"):
        im.occlusion(texts, position=6)  # the first text has 6 pieces: 0..5


def test_occlusion_of_the_sentence_vector_equals_one_masked_run():
    bert = load_bert()
    texts = ["Snow fell on the quiet village overnight.", "The kettle whistled."]
    changes = im.occlusion(texts, position=None, batch_size=4)
    enc = bert.tokenizer(texts[1], return_tensors="pt")
    with torch.no_grad():
        base = bert.model(**enc).last_hidden_state[0].mean(0).double().numpy()
        ids = enc["input_ids"].clone()
        ids[0, 2] = bert.tokenizer.mask_token_id
        masked = bert.model(input_ids=ids, attention_mask=enc["attention_mask"],
                            token_type_ids=enc["token_type_ids"]).last_hidden_state[0].mean(0)
    masked = masked.double().numpy()
    cos = base @ masked / np.linalg.norm(base) / np.linalg.norm(masked)
    assert changes[1][2] == pytest.approx(1 - cos, abs=1e-5)  # padding left out of the mean
    assert not np.allclose(changes[1], im.occlusion(texts)[1], atol=1e-3)  # not [CLS]'s change


def test_occlusions_give_what_occlusion_gives_at_each_position_from_one_set_of_passes():
    texts = ["Snow fell on the quiet village overnight.", "The kettle whistled.",
             "Bees carry pollen home."]  # not in order of length: the results come back in order
    both = im.occlusions(texts, (0, None, 2), batch_size=7)
    assert list(both) == [0, None, 2]
    for position, changes in both.items():
        alone = im.occlusion(texts, position=position, batch_size=128)
        assert [c.shape for c in changes] == [c.shape for c in alone]
        for c, a in zip(changes, alone, strict=True):
            np.testing.assert_allclose(c, a, atol=1e-5)
    with pytest.raises(ValueError, match="position"):
        im.occlusions(texts, (0, 6))  # "The kettle whistled." has 6 pieces: 0..5
    with pytest.raises(TypeError, match="positions"):
        im.occlusions(texts, 0)


def test_head_importance_batches_texts_of_one_length_with_each_row_its_own_head():
    """Two texts of one length share a batch (12 heads x 2 texts = 24 rows) and a third is
    alone: each (text, head) equals a full forward pass with that head ablated."""
    texts = ["The kettle whistled.", "A dog barked.", "Bees carry pollen home today."]
    lengths = [len(run_bert(t).tokens) for t in texts]
    assert lengths[0] == lengths[1] != lengths[2]
    per_text = im.head_importance(texts, mode="uniform", per_text=True)
    base = sentence_vectors(texts)
    for layer, head in [(0, 0), (2, 11), (5, 6)]:
        with ablated_head(layer, head, "uniform"):
            changed = sentence_vectors(texts)
        cos = (base * changed).sum(-1) / np.linalg.norm(base, axis=-1) / np.linalg.norm(
            changed, axis=-1)
        np.testing.assert_allclose(per_text[:, layer, head], 1 - cos, atol=1e-6)
    assert load_bert().model.config._attn_implementation == "eager"  # put back afterwards
