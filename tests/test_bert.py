"""bertlib.paper.bert: the numpy forward pass equals transformers' BertModel on the real weights.

Reference: transformers' BertModel (float32, eager attention) on the bundled pretrained model.
Ours computes in float64, so the difference is transformers' float32 rounding: one rounding is
eps = 1.2e-7 relative; the errors of d-term sums grow like sqrt(d) and add up over the L layers,
eps * sqrt(d * L) = 1.2e-7 * sqrt(384 * 6) = 5.7e-6 relative. Attention weights are <= 1, so
ATOL_ATTENTION = 1e-5; hidden states reach |h| ~ 11, 6e-5, so ATOL_HIDDEN = 1e-4. (Measured on
one machine with torch's default, AVX2 and AVX-512 kernels: at most 1.5e-6 and 3.4e-6.)
"""

import math

import numpy as np
import pytest
import torch

from bertlib.hf.models import encode
from bertlib.hf.params import bert_params, forward_text
from bertlib.paper.attention import multi_head_attention
from bertlib.paper.bert import (
    BertParams,
    LayerParams,
    bert_forward,
    embed,
    encoder_layer,
    gelu,
    layer_norm,
)

ATOL_ATTENTION = 1e-5
ATOL_HIDDEN = 1e-4
SENTENCES = [
    "The cat sat on the mat",
    "The quick brown fox jumps over the lazy dog.",
    "Unbelievably, the tokenizer splits rare words into pieces!",
    "I sat by the bank of the river.",
]


def reference(bert, **enc):
    with torch.no_grad():
        out = bert.model(**enc, output_attentions=True, output_hidden_states=True)
    return (torch.stack(out.hidden_states).numpy().astype(np.float64),
            torch.stack(out.attentions).numpy().astype(np.float64))


def max_diff(a, b):
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.abs(a - b).max())


@pytest.mark.parametrize("text", SENTENCES)
def test_every_layer_equals_transformers_on_single_sentences(bert, text):
    enc = encode(text, model=bert)
    hidden_ref, att_ref = reference(bert, **enc)
    ours = forward_text(text, model=bert)
    assert ours.hidden_states.shape == (7, enc["input_ids"].shape[1], 384)
    assert ours.attentions.shape == (6, 12) + (enc["input_ids"].shape[1],) * 2
    for layer in range(7):
        assert max_diff(ours.hidden_states[layer], hidden_ref[layer, 0]) <= ATOL_HIDDEN, layer
    for layer in range(6):
        assert max_diff(ours.attentions[layer], att_ref[layer, 0]) <= ATOL_ATTENTION, layer


def test_sentence_pair_with_token_types_equals_transformers(bert):
    enc = encode("The man went to the store.", "He bought a gallon of milk.", model=bert)
    types = enc["token_type_ids"][0].numpy()
    assert types.min() == 0 and types.max() == 1  # both sentence types are used
    hidden_ref, att_ref = reference(bert, **enc)
    ours = bert_forward(bert_params(bert), enc["input_ids"][0].numpy(), types)
    assert max_diff(ours.hidden_states, hidden_ref[:, 0]) <= ATOL_HIDDEN
    assert max_diff(ours.attentions, att_ref[:, 0]) <= ATOL_ATTENTION


def test_token_types_change_the_result(bert):
    enc = encode("The man went to the store.", "He bought milk.", model=bert)
    ids = enc["input_ids"][0].numpy()
    with_types = bert_forward(bert_params(bert), ids, enc["token_type_ids"][0].numpy())
    without = bert_forward(bert_params(bert), ids, None)
    assert np.abs(with_types.hidden_states[-1] - without.hidden_states[-1]).max() > 1e-3


def test_padded_batch_equals_transformers_and_ignores_padding(bert):
    texts = ["A short one.", "A much longer sentence that needs no padding at all, really."]
    enc = bert.tokenizer(texts, padding=True, return_tensors="pt")
    mask = enc["attention_mask"].numpy()
    assert mask.min() == 0  # there is padding to mask
    hidden_ref, att_ref = reference(bert, **enc)
    ours = bert_forward(bert_params(bert), enc["input_ids"].numpy(), enc["token_type_ids"].numpy(),
                        mask)
    assert ours.hidden_states.shape == hidden_ref.shape
    assert max_diff(ours.attentions, att_ref) <= ATOL_ATTENTION
    for b in range(2):
        real = mask[b].astype(bool)
        assert max_diff(ours.hidden_states[:, b][:, real], hidden_ref[:, b][:, real]) <= ATOL_HIDDEN
    short = mask[0].astype(bool)
    assert np.all(ours.attentions[:, 0][..., ~short] == 0)  # nobody attends to padding
    alone = forward_text(texts[0], model=bert)  # padding changes nothing for the real tokens
    # both float64, summed in other blockings: 2.2e-16 * sqrt(d * L) * |h| = 1.2e-13 -> 1e-11
    assert max_diff(ours.hidden_states[:, 0][:, short], alone.hidden_states) <= 1e-11


def test_attention_rows_sum_to_one(bert):
    att = forward_text("Rows of attention weights sum to one.", model=bert).attentions
    # float64 rows of n = 10 weights: n * 2.2e-16 = 2e-15 -> 1e-12
    np.testing.assert_allclose(att.sum(-1), 1.0, rtol=0, atol=1e-12)
    assert (att >= 0).all()


def test_one_layer_by_hand_matches_the_stack(bert):
    params = bert_params(bert)
    enc = encode("One layer at a time.", model=bert)
    ids = enc["input_ids"][0].numpy()
    X = embed(params, ids)
    out = bert_forward(params, ids)
    # bert_forward calls these very functions on the same arrays: equal to the last bit
    np.testing.assert_array_equal(X, out.hidden_states[0])
    X1, A1 = encoder_layer(X, params.layers[0], params.h, eps=params.eps)
    np.testing.assert_array_equal(X1, out.hidden_states[1])
    np.testing.assert_array_equal(A1, out.attentions[0])


def test_gelu_is_the_exact_erf_form():
    x = np.linspace(-5, 5, 101)
    expected = torch.nn.functional.gelu(torch.tensor(x), approximate="none").numpy()
    # two float64 erf implementations, values <= 5: a few ulps (1e-15) -> 1e-12
    assert np.abs(gelu(x) - expected).max() < 1e-12
    assert gelu(np.array([1.0]))[0] == pytest.approx(0.5 * (1 + math.erf(1 / math.sqrt(2))))


def test_gelu_is_elementwise_over_arrays_and_agrees_with_math_erf_in_the_tails():
    x = np.concatenate([np.linspace(-40, 40, 8000), [0.0, -0.0, 1e-300, -1e-300]])
    expected = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x])
    got = gelu(x.reshape(2, -1)).reshape(-1)  # any shape, one array out
    assert got.dtype == np.float64
    # float64 erf within 1 ulp of math.erf, times x/2 (|x| <= 40): 40 * 2.2e-16 = 9e-15 -> 1e-13
    np.testing.assert_allclose(got, expected, rtol=1e-15, atol=1e-13)
    assert np.isnan(gelu(np.array([np.nan]))).all()
    assert gelu(np.float32(2.0)).dtype == np.float64
    with pytest.raises(TypeError, match="x must hold real numbers"):
        gelu(np.array(["1"]))


def test_layer_norm_matches_torch():
    rng = np.random.default_rng(0)
    x, g, b = rng.normal(size=(3, 5, 8)), rng.normal(size=8), rng.normal(size=8)
    expected = torch.nn.functional.layer_norm(torch.tensor(x), (8,), torch.tensor(g),
                                              torch.tensor(b), eps=1e-12).numpy()
    # float64 over 8 features, divided by a std that may be small: 1e-14 -> 1e-10
    assert np.abs(layer_norm(x, g, b) - expected).max() < 1e-10


def test_params_are_transposed_to_x_times_w(bert):
    params = bert_params(bert)
    assert isinstance(params, BertParams) and len(params.layers) == 6 and params.h == 12
    linear = bert.model.encoder.layer[0].intermediate.dense
    assert params.layers[0].W_1.shape == (384, 1536)
    # float32 -> float64 is exact: the same numbers, transposed
    np.testing.assert_array_equal(params.layers[0].W_1, linear.weight.detach().numpy().T)
    assert bert_params(bert) is params  # cached


def test_bad_inputs_give_clear_errors(bert):
    ids, params = encode("Fine.", model=bert)["input_ids"][0].numpy(), bert_params(bert)
    with pytest.raises(ValueError, match=r"input_ids must be in 0\.\.30521"):
        bert_forward(params, np.array([101, 40000, 102]))
    with pytest.raises(TypeError, match="whole numbers"):
        bert_forward(params, ids.astype(float))
    with pytest.raises(ValueError, match=r"the number of word pieces of the input must be a whole number >= 1, got 0"):
        bert_forward(params, np.array([], dtype=int))
    with pytest.raises(ValueError, match="token_type_ids must be in 0..1"):
        bert_forward(params, ids, np.full_like(ids, 2))
    with pytest.raises(ValueError, match="token_type_ids and input_ids must have the same shape"):
        bert_forward(params, ids, ids[:2] * 0)
    with pytest.raises(ValueError, match="attention_mask and input_ids must have the same shape"):
        bert_forward(params, ids, attention_mask=np.ones(2, dtype=int))
    with pytest.raises(ValueError, match="0/1 or bool"):
        bert_forward(params, ids, attention_mask=np.full(ids.shape, 2))
    with pytest.raises(ValueError, match="at least one real token"):
        bert_forward(params, ids, attention_mask=np.zeros(ids.shape, dtype=int))
    with pytest.raises(ValueError, match=r"^the input is 513 word pieces long but this model has "
                                         r"512 positions .*; shorten it$"):
        bert_forward(params, np.full(513, 1000))
    with pytest.raises(TypeError, match="LoadedBert .* or a transformers BertModel"):
        bert_params("bert")


def test_bert_forward_takes_parameters_and_names_how_to_read_a_model(bert):
    """bert_forward applies the equations to a BertParams; a model (or the ids in the first
    place, the old order) is refused with the one call that reads a model's parameters."""
    ids = encode("Fine.", model=bert)["input_ids"][0].numpy()
    how = r"params must be a BertParams: read a model's with bertlib\.hf\.params\.bert_params\(model\)"
    with pytest.raises(TypeError, match=how + ", got LoadedBert"):
        bert_forward(bert, ids)
    with pytest.raises(TypeError, match=how + ", got ndarray"):
        bert_forward(ids, None)  # the ids where the parameters go


def _random_layer(d=8, d_ff=16, seed=0) -> LayerParams:
    rng = np.random.default_rng(seed)
    shapes = {"W_1": (d, d_ff), "b_1": (d_ff,), "W_2": (d_ff, d)}
    return LayerParams(**{
        name: rng.normal(size=shapes.get(name, (d, d) if name.startswith("W") else (d,)))
        for name in LayerParams._fields})


def test_encoder_layer_with_attend_is_the_same_layer_with_another_attention():
    p, X = _random_layer(), np.random.default_rng(1).normal(size=(2, 5, 8))
    out, weights = encoder_layer(X, p, 2)

    def softmax_head(Q, K, V):  # one head, (n, d_k) each: BERT's own attention again
        s = Q @ K.T / np.sqrt(Q.shape[1])
        e = np.exp(s - s.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True) @ V

    out_attend, none = encoder_layer(X, p, 2, attend=softmax_head)
    assert none is None and weights.shape == (2, 2, 5, 5)
    # the same float64 arithmetic in another order: 1e-15 relative on values of size ~1 -> 1e-12
    np.testing.assert_allclose(out_attend, out, rtol=0, atol=1e-12)
    uniform = encoder_layer(X, p, 2, attend=lambda Q, K, V: np.broadcast_to(V.mean(0), V.shape))
    assert not np.allclose(uniform[0], out)  # the attention really is swapped


def test_encoder_layer_attends_as_multi_head_attention():
    """encoder_layer's M is attention.multi_head_attention's (split, attend, merge), and its
    output the paper's two Add & Norm steps around it: equal, bit for bit."""
    p, X = _random_layer(), np.random.default_rng(2).normal(size=(2, 5, 8))
    mask = np.array([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], bool)[:, None, None, :]
    out, A = encoder_layer(X, p, 2, mask)
    M, weights = multi_head_attention(X, p.W_Q, p.W_K, p.W_V, p.W_O, 2, mask,
                                      biases=(p.b_Q, p.b_K, p.b_V, p.b_O))
    np.testing.assert_array_equal(A, weights)
    Y = layer_norm(X + M, p.ln1_gamma, p.ln1_beta, 1e-12)
    F = gelu(Y @ p.W_1 + p.b_1) @ p.W_2 + p.b_2
    np.testing.assert_array_equal(out, layer_norm(Y + F, p.ln2_gamma, p.ln2_beta, 1e-12))


def test_encoder_layer_checks_its_arguments_once():
    p, X = _random_layer(), np.ones((5, 8))
    with pytest.raises(ValueError, match=r"X must have shape \(..., n, d\) = \(..., n, 8\) \(d of this layer\), got \(5, 6\)"):
        encoder_layer(np.ones((5, 6)), p, 2)
    with pytest.raises(ValueError, match="h = 3"):
        encoder_layer(X, p, 3)
    with pytest.raises(ValueError, match="custom attend .* no mask"):
        encoder_layer(X, p, 2, mask=np.ones(5, bool), attend=lambda Q, K, V: V)
    with pytest.raises(ValueError, match=r"attend must return one head's output of shape \(5, 4\)"):
        encoder_layer(X, p, 2, attend=lambda Q, K, V: V[:2])
    bad = X.copy()
    bad[0, 3] = np.nan
    with pytest.raises(ValueError, match="X contains 1 NaN"):
        encoder_layer(bad, p, 2)


def test_layer_functions_name_bad_arguments():
    with pytest.raises(TypeError, match=r"params must be a LayerParams .*, got dict"):
        encoder_layer(np.ones((5, 8)), {"W_Q": np.ones((8, 8))}, 2)
    with pytest.raises(TypeError, match="x must hold real numbers"):
        layer_norm(np.array(["a", "b"]), np.ones(2), np.zeros(2))
    assert layer_norm(np.ones((2, 4), np.float32), np.ones(4), np.zeros(4)).dtype == np.float64
