"""bertlib.hf.params: a transformers BERT's parameters read as numpy, each W transposed to x W.

A random 2-layer BERT (no download, no bundled model) is enough for the reading: it is the same
code for every size; tests/test_bert.py checks the bundled model through bert_forward. The
equations on one layer of the bundled model (bert_qkv, bert_layer, with a variant) come last.
"""

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertModel

from bertlib.hf.params import as_xW, bert_layer, bert_params, bert_qkv, layer_params
from bertlib.paper.attention import scaled_dot_product_attention
from bertlib.paper.bert import LayerParams
from bertlib.paper.variants import sliding_window_attention


@pytest.fixture(scope="module")
def small_bert():
    torch.manual_seed(0)
    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=32, max_position_embeddings=20)
    return BertModel(config).eval()


def test_as_xW_reads_torch_linear_as_x_times_W():
    torch.manual_seed(1)
    linear = torch.nn.Linear(5, 3)
    x = torch.randn(4, 5)
    W, b = as_xW(linear)
    assert W.shape == (5, 3) and b.shape == (3,) and W.dtype == b.dtype == np.float64
    with torch.no_grad():
        expected = linear(x).double().numpy()
    # float32 products against float64 ones: float32 rounding over 5 terms
    np.testing.assert_allclose(x.double().numpy() @ W + b, expected, atol=1e-6)
    W[0, 0] = 99.0  # a copy: the model's parameter is not touched
    assert linear.weight[0, 0].item() != 99.0
    with pytest.raises(TypeError, match=r"linear must be a torch.nn.Linear .*, got str"):
        as_xW("query")


def test_layer_params_name_each_matrix_of_one_layer(small_bert):
    layer = small_bert.encoder.layer[1]
    p = layer_params(layer)
    assert isinstance(p, LayerParams)
    assert p.W_1.shape == (16, 32) and p.W_2.shape == (32, 16) and p.W_Q.shape == (16, 16)
    # float32 -> float64 is exact: the same numbers, transposed
    np.testing.assert_array_equal(p.W_K, layer.attention.self.key.weight.detach().numpy().T)
    np.testing.assert_array_equal(p.b_O, layer.attention.output.dense.bias.detach().numpy())
    np.testing.assert_array_equal(p.ln2_gamma, layer.output.LayerNorm.weight.detach().numpy())
    with pytest.raises(TypeError, match=r"layer must be a transformers BertLayer"):
        layer_params(small_bert)


def test_bert_params_are_cached_and_read_again_after_an_edit(small_bert):
    params = bert_params(small_bert)
    assert bert_params(small_bert) is params  # read once
    assert len(params.layers) == 2 and params.h == 4
    for got, layer in zip(params.layers, small_bert.encoder.layer, strict=True):
        for a, b in zip(got, layer_params(layer), strict=True):
            np.testing.assert_array_equal(a, b)
    with torch.no_grad():
        small_bert.encoder.layer[0].attention.self.query.weight.mul_(2.0)
    edited = bert_params(small_bert)
    assert edited is not params  # the cache cannot go stale
    np.testing.assert_array_equal(edited.layers[0].W_Q, 2.0 * params.layers[0].W_Q)


def test_bert_params_refuse_a_model_without_the_exact_gelu():
    config = BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=16, hidden_act="gelu_new")
    with pytest.raises(ValueError, match="exact GELU; the model uses 'gelu_new'"):
        bert_params(BertModel(config))


# ---------------------------------------------------------------- one real BERT layer, by hand


def test_bert_qkv_and_layer_reproduce_the_model():
    from bertlib.hf.models import run_bert

    run = run_bert("The cat sat on the mat.")
    Q, K, V = bert_qkv(run.hidden_states[2], 2)
    assert Q.shape == (12, len(run.tokens), 32)
    _, weights = scaled_dot_product_attention(Q, K, V)
    np.testing.assert_allclose(weights, run.attentions[2], atol=1e-5)
    np.testing.assert_allclose(bert_layer(run.hidden_states[2], 2), run.hidden_states[3],
                               atol=1e-4)


def test_bert_layer_out_of_range_is_named():
    with pytest.raises(ValueError, match=r"layer must be a whole number in 0\.\.5 \(6 layers\), got 7"):
        bert_qkv(np.zeros((3, 384)), 7)


def test_bert_layer_with_a_window_that_sees_everything_is_the_full_layer():
    from bertlib.hf.models import run_bert

    run = run_bert("The cat sat on the mat.")
    n = len(run.tokens)
    full = bert_layer(run.hidden_states[1], 1)
    wide = bert_layer(run.hidden_states[1], 1,
                      lambda Q, K, V: sliding_window_attention(Q, K, V, 2 * n))
    # both float64, the same sums in another order (blocks): ~1e-15 relative on values up to
    # ~10 after LayerNorm -> 1e-10 leaves a wide margin
    np.testing.assert_allclose(wide, full, rtol=0, atol=1e-10)
    narrow = bert_layer(run.hidden_states[1], 1, lambda Q, K, V: sliding_window_attention(Q, K, V, 2))
    assert np.abs(narrow - full).max() > 1e-3  # a real window changes the layer
