"""bertlib.paper.attention's multi-head functions against torch.nn.MultiheadAttention and BERT layer 0."""

import numpy as np
import pytest
import torch

from bertlib.hf.models import encode, run_bert
from bertlib.paper import toy
from bertlib.paper.attention import (
    head_columns,
    merge_heads,
    multi_head_attention,
    project_heads,
    scaled_dot_product_attention,
    split_heads,
)

# float64 on both sides (eps 2.2e-16), sums of d <= 24 terms through 3 products and a softmax:
# ~1e-14 relative -> RTOL; ATOL for the entries near 0
RTOL, ATOL = 1e-10, 1e-12


def random_weights(d, seed, biases=True):
    rng = np.random.default_rng(seed)
    Ws = [rng.normal(scale=d**-0.5, size=(d, d)) for _ in range(4)]
    bs = [rng.normal(scale=0.1, size=d) for _ in range(4)] if biases else None
    return Ws, bs


def torch_mha(Ws, bs, h, X, X_kv=None, key_padding=None):
    """torch.nn.MultiheadAttention with our weights copied in; returns (output, weights) numpy.

    torch computes x @ W.T + b, stacks (W_Q, W_K, W_V) as rows of in_proj_weight (3d, d), and its
    key_padding_mask is True where a key must be IGNORED (ours: True = may attend).
    """
    d = Ws[0].shape[0]
    mha = torch.nn.MultiheadAttention(d, h, batch_first=True, dtype=torch.float64).eval()
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.from_numpy(np.concatenate([W.T for W in Ws[:3]])))
        mha.in_proj_bias.copy_(torch.from_numpy(np.concatenate(bs[:3])))
        mha.out_proj.weight.copy_(torch.from_numpy(Ws[3].T))
        mha.out_proj.bias.copy_(torch.from_numpy(bs[3]))
        q = torch.from_numpy(X)
        kv = q if X_kv is None else torch.from_numpy(X_kv)
        pad = None if key_padding is None else torch.from_numpy(~key_padding)
        out, w = mha(q, kv, kv, key_padding_mask=pad, need_weights=True,
                     average_attn_weights=False)
    return out.numpy(), w.numpy()


# --- split / merge ---------------------------------------------------------------------------

@pytest.mark.parametrize("shape, h", [((5, 12), 1), ((5, 12), 3), ((5, 12), 12), ((2, 3, 7, 8), 4)])
def test_split_then_merge_is_the_identity(shape, h):
    X = np.random.default_rng(0).normal(size=shape)
    heads = split_heads(X, h)
    *lead, n, d = shape
    assert heads.shape == (*lead, h, n, d // h)
    np.testing.assert_array_equal(merge_heads(heads), X)
    np.testing.assert_array_equal(split_heads(merge_heads(heads), h), heads)


def test_head_i_gets_columns_i_dk_to_i_plus_1_dk():
    X = np.arange(3 * 6).reshape(3, 6)
    heads = split_heads(X, 3)
    for i in range(3):
        np.testing.assert_array_equal(heads[i], X[:, 2 * i:2 * i + 2])


def test_project_heads_is_x_w_plus_b_cut_into_heads():
    rng = np.random.default_rng(3)
    X, W, b = rng.normal(size=(2, 5, 6)), rng.normal(size=(6, 8)), rng.normal(size=8)
    heads = project_heads(X, W, b, 4)
    assert heads.shape == (2, 4, 5, 2)  # (batch, h, n, d_k): d_in 6 need not be d = 8
    for i in range(4):  # head i: columns i·d_k … of X W + b, bit for bit
        np.testing.assert_array_equal(heads[:, i], (X @ W + b)[..., 2 * i:2 * i + 2])
    np.testing.assert_array_equal(project_heads(X, W, None, 2), split_heads(X @ W, 2))
    float32 = project_heads(X.astype(np.float32), W.astype(np.float32), None, 2)
    assert float32.dtype == np.float32  # no hidden cast: float32 in, float32 out


@pytest.mark.parametrize("W, b, h, error, message", [
    (np.ones((5, 8)), None, 2, ValueError, r"W must have shape \(d_in, d\) = \(6, d\)"),
    (np.ones((6, 8)), np.ones(6), 2, ValueError, r"b must have shape \(d,\) = \(8,\)"),
    (np.ones((6, 8)), None, 3, ValueError, r"Valid h for d = 8: \[1, 2, 4, 8\]"),
    (np.full((6, 8), np.nan), None, 2, ValueError, r"W contains 48 NaN"),
    (np.ones((6, 8), bool), None, 2, TypeError, r"W must hold numbers"),
])
def test_project_heads_names_what_is_wrong(W, b, h, error, message):
    with pytest.raises(error, match=message):
        project_heads(np.ones((5, 6)), W, b, h)


# --- the per-head loop equals the batched form ---------------------------------------------------

@pytest.mark.parametrize("h", [1, 2, 4, 8])
def test_per_head_loop_equals_batched_form(h):
    d, n = 16, 7
    (W_Q, W_K, W_V, W_O), (b_Q, b_K, b_V, b_O) = random_weights(d, seed=h)
    X = np.random.default_rng(10 + h).normal(size=(n, d))
    d_k = d // h
    outs, ws = [], []
    for i in range(h):
        cols = slice(i * d_k, (i + 1) * d_k)
        o, w = scaled_dot_product_attention(X @ W_Q[:, cols] + b_Q[cols],
                                            X @ W_K[:, cols] + b_K[cols],
                                            X @ W_V[:, cols] + b_V[cols])
        outs.append(o)
        ws.append(w)
    loop_out = np.concatenate(outs, axis=-1) @ W_O + b_O
    out, w = multi_head_attention(X, W_Q, W_K, W_V, W_O, h, biases=(b_Q, b_K, b_V, b_O))
    np.testing.assert_allclose(out, loop_out, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(w, np.stack(ws), rtol=RTOL, atol=ATOL)


def test_toy_two_heads_track_sat_and_mat():
    X = toy.embeddings()
    _, w = multi_head_attention(X, *toy.two_head_projections(), h=2)
    cat, sat, mat = 1, 2, 5
    assert w[0, cat].argmax() == sat and w[1, cat].argmax() == mat
    # the values notebook 02 prints with 3 decimals
    assert w[0, cat, sat] == pytest.approx(0.625, abs=1e-3)
    assert w[1, cat, mat] == pytest.approx(0.477, abs=1e-3)


# --- torch.nn.MultiheadAttention -----------------------------------------------------------

@pytest.mark.parametrize("h", [1, 2, 4, 12])
def test_matches_torch_multihead_attention(h):
    d, B, n = 24, 2, 6
    Ws, bs = random_weights(d, seed=h)
    X = np.random.default_rng(20 + h).normal(size=(B, n, d))
    out, w = multi_head_attention(X, *Ws, h, biases=bs)
    t_out, t_w = torch_mha(Ws, bs, h, X)
    assert out.shape == (B, n, d) and w.shape == (B, h, n, n)
    # torch packs W_Q, W_K, W_V in one (3d, d) product: other blocking, same float64 bound, x10
    np.testing.assert_allclose(out, t_out, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(w, t_w, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("h", [1, 2, 4, 12])
def test_matches_torch_with_key_padding_mask(h):
    d, n = 24, 6
    Ws, bs = random_weights(d, seed=30 + h)
    X = np.random.default_rng(40 + h).normal(size=(3, n, d))
    real = np.arange(n)[None, :] < np.array([6, 4, 1])[:, None]  # (B, n_k), True = real token
    out, w = multi_head_attention(X, *Ws, h, mask=real[:, None, None, :], biases=bs)
    t_out, t_w = torch_mha(Ws, bs, h, X, key_padding=real)
    np.testing.assert_allclose(out, t_out, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(w, t_w, rtol=1e-9, atol=1e-11)
    assert np.all(w[1, :, :, 4:] == 0) and np.all(w[2, :, :, 1:] == 0)


def test_cross_attention_shapes_and_torch_values():
    d, h, n_q, n_k = 12, 3, 4, 9
    Ws, bs = random_weights(d, seed=5)
    rng = np.random.default_rng(6)
    X, X_kv = rng.normal(size=(2, n_q, d)), rng.normal(size=(2, n_k, d))
    out, w = multi_head_attention(X, *Ws, h, biases=bs, X_kv=X_kv)
    assert out.shape == (2, n_q, d) and w.shape == (2, h, n_q, n_k)
    t_out, t_w = torch_mha(Ws, bs, h, X, X_kv)
    np.testing.assert_allclose(out, t_out, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(w, t_w, rtol=1e-9, atol=1e-11)
    out1, w1 = multi_head_attention(X[0], *Ws, h, X_kv=X_kv[0])
    assert out1.shape == (n_q, d) and w1.shape == (h, n_q, n_k)


def test_without_biases_equals_zero_biases():
    Ws, _ = random_weights(8, seed=7)
    X = np.random.default_rng(8).normal(size=(5, 8))
    a = multi_head_attention(X, *Ws, 2)
    b = multi_head_attention(X, *Ws, 2, biases=[np.zeros(8)] * 4)
    c = multi_head_attention(X, *Ws, 2, biases=(None, None, None, None))
    for x, y, z in zip(a, b, c, strict=True):
        np.testing.assert_array_equal(x, y)
        np.testing.assert_array_equal(x, z)


# --- BERT's own layer 0 ------------------------------------------------------------------

@pytest.fixture(scope="module")
def bert_layer0(bert):
    text = "The cat sat on the mat, and the dog watched."
    layer = bert.model.encoder.layer[0].attention
    run = run_bert(text, model=bert)
    captured = {}

    def keep_output(module, inputs, output):  # returns None: the forward pass is unchanged
        captured["out"] = output[0].detach().numpy().copy()

    hook = layer.output.dense.register_forward_hook(keep_output)
    try:
        with torch.no_grad():
            bert.model(**encode(text, model=bert))
    finally:
        hook.remove()

    def w(linear):
        return linear.weight.detach().double().numpy().T

    def b(linear):
        return linear.bias.detach().double().numpy()

    s = layer.self
    lins = (s.query, s.key, s.value, layer.output.dense)
    return {
        "X": run.hidden_states[0].astype(np.float64),
        "Ws": [w(x) for x in lins],
        "bs": [b(x) for x in lins],
        "h": bert.model.config.num_attention_heads,
        "attentions0": run.attentions[0],
        "dense_out": captured["out"],
    }


def test_weights_equal_bert_layer0_attentions(bert_layer0):
    L = bert_layer0
    _, w = multi_head_attention(L["X"], *L["Ws"], L["h"], biases=L["bs"])
    assert w.shape == L["attentions0"].shape
    # torch's float32, one layer: sums over d = 384 round to eps * sqrt(d) = 2.3e-6 relative;
    # weights <= 1 -> 1e-5
    np.testing.assert_allclose(w, L["attentions0"], rtol=0, atol=1e-5)


def test_output_equals_bert_self_attention_before_layernorm(bert_layer0):
    L = bert_layer0
    out, _ = multi_head_attention(L["X"], *L["Ws"], L["h"], biases=L["bs"])
    scale = np.abs(L["dense_out"]).max()
    # two more d-term products than the weights (values, W_O): the same 2.3e-6 relative,
    # times the largest output -> 1e-5 * max(1, scale)
    np.testing.assert_allclose(out, L["dense_out"], rtol=0, atol=1e-5 * max(1.0, scale))


# --- bad input -> clear errors -------------------------------------------------------------

def test_h_not_dividing_d_lists_valid_h():
    Ws, _ = random_weights(12, seed=0)
    with pytest.raises(ValueError, match=r"d = 12 is not divisible by h = 5.*\[1, 2, 3, 4, 6, 12\]"):
        multi_head_attention(np.ones((3, 12)), *Ws, 5)
    with pytest.raises(ValueError, match=r"d = 12 .* h = 5"):
        split_heads(np.ones((3, 12)), 5)


@pytest.mark.parametrize("h", [0, -2])
def test_h_not_positive(h):
    Ws, _ = random_weights(4, seed=0)
    with pytest.raises(ValueError, match=f">= 1, got {h}"):
        multi_head_attention(np.ones((3, 4)), *Ws, h)
    with pytest.raises(ValueError, match=">= 1"):
        split_heads(np.ones((3, 4)), h)


@pytest.mark.parametrize("h", [2.0, True, "2"])
def test_h_not_a_whole_number(h):
    with pytest.raises(TypeError, match="whole number"):
        split_heads(np.ones((3, 4)), h)


@pytest.mark.parametrize("which", range(4))
def test_weight_shape_not_matching_d(which):
    Ws, _ = random_weights(4, seed=0)
    Ws[which] = np.ones((4, 2))
    name = ["W_Q", "W_K", "W_V", "W_O"][which]
    with pytest.raises(ValueError, match=rf"{name} must have shape \(d, d\) = \(4, 4\) \(d from the input's last axis\), got \(4, 2\)"):
        multi_head_attention(np.ones((3, 4)), *Ws, 2)


def test_bias_shape_and_biases_form():
    Ws, bs = random_weights(4, seed=0)
    bs[2] = np.ones(3)
    with pytest.raises(ValueError, match=r"b_V must have shape \(d,\) = \(4,\) .*, got \(3,\)"):
        multi_head_attention(np.ones((3, 4)), *Ws, 2, biases=bs)
    for bad in (bs[:3], np.zeros((4, 4)), 0.5):
        with pytest.raises(TypeError, match="b_Q, b_K, b_V, b_O"):
            multi_head_attention(np.ones((3, 4)), *Ws, 2, biases=bad)


def test_mask_not_broadcasting_to_h_n_n():
    Ws, _ = random_weights(4, seed=0)
    X = np.ones((5, 4))
    with pytest.raises(ValueError, match=r"mask of shape \(4, 4\) does not broadcast .*\(2, 5, 5\) \(\.\.\., h, n_q, n_k\)"):
        multi_head_attention(X, *Ws, 2, mask=np.ones((4, 4), bool))
    with pytest.raises(ValueError, match=r"\(3, 2, 5, 5\) does not broadcast"):
        multi_head_attention(X, *Ws, 2, mask=np.ones((3, 2, 5, 5), bool))
    with pytest.raises(TypeError, match="boolean"):
        multi_head_attention(X, *Ws, 2, mask=np.ones((5, 5)))


def test_valid_masks_broadcast_per_key_and_per_pair():
    Ws, _ = random_weights(4, seed=1)
    X = np.random.default_rng(2).normal(size=(5, 4))
    keys = np.array([True, True, True, False, False])
    _, w = multi_head_attention(X, *Ws, 2, mask=keys)
    assert w.shape == (2, 5, 5) and np.all(w[..., 3:] == 0)
    _, w = multi_head_attention(X, *Ws, 2, mask=np.tril(np.ones((5, 5), bool)))
    assert np.all(w[:, 0, 1:] == 0)


def test_a_per_head_mask_reaches_only_its_head():
    Ws, bs = random_weights(4, seed=3)
    X = np.random.default_rng(4).normal(size=(5, 4))
    mask = np.stack([np.tril(np.ones((5, 5), bool)), np.ones((5, 5), bool)])  # (h, n, n)
    _, w = multi_head_attention(X, *Ws, 2, mask=mask, biases=bs)
    _, w_free = multi_head_attention(X, *Ws, 2, biases=bs)
    assert np.all(w[0][~mask[0]] == 0) and np.any(w_free[0][~mask[0]] > 0)
    np.testing.assert_array_equal(w[1], w_free[1])


def test_fully_masked_query_gets_zero_weights_and_only_the_output_bias():
    Ws, bs = random_weights(4, seed=5)
    X = np.random.default_rng(6).normal(size=(3, 4))
    mask = np.ones((3, 3), bool)
    mask[1] = False  # query 1 may attend to nothing
    out, w = multi_head_attention(X, *Ws, 2, mask=mask, biases=bs)
    assert np.isfinite(out).all() and np.all(w[:, 1] == 0)
    np.testing.assert_allclose(w.sum(-1)[:, [0, 2]], 1.0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(out[1], bs[3], rtol=0, atol=1e-12)


@pytest.mark.parametrize("where", ["X", "X_kv", "W_K", "b_O"])
def test_nan_input_names_the_array(where):
    Ws, bs = random_weights(4, seed=0)
    X, X_kv = np.ones((3, 4)), np.ones((5, 4))
    target = {"X": X, "X_kv": X_kv, "W_K": Ws[1], "b_O": bs[3]}[where]
    target.flat[1] = np.nan
    with pytest.raises(ValueError, match=f"{where} contains 1 NaN"):
        multi_head_attention(X, *Ws, 2, biases=bs, X_kv=X_kv)


def test_cross_attention_input_with_other_d():
    Ws, _ = random_weights(4, seed=0)
    with pytest.raises(ValueError, match=r"X and X_kv must share d \(their last axis\): X has shape "
                                         r"\(3, 4\), X_kv has shape \(5, 6\)$"):
        multi_head_attention(np.ones((3, 4)), *Ws, 2, X_kv=np.ones((5, 6)))


def test_one_dimensional_input_and_merge_of_too_few_axes():
    Ws, _ = random_weights(4, seed=0)
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        multi_head_attention(np.ones(4), *Ws, 2)
    with pytest.raises(ValueError, match="at least 3 dimensions"):
        merge_heads(np.ones((3, 4)))


@pytest.mark.parametrize("h, d_k", [(1, 3), (3, 2), (4, 1)])
def test_head_columns_is_where_merge_heads_puts_each_head(h, d_k):
    X_heads = np.random.default_rng(h).normal(size=(2, h, 5, d_k))
    merged = merge_heads(X_heads)
    for head in range(h):
        np.testing.assert_array_equal(merged[..., head_columns(head, d_k)], X_heads[:, head])
    with pytest.raises(ValueError, match="head"):
        head_columns(-1, d_k)
    with pytest.raises(ValueError, match="d_k"):
        head_columns(0, 0)
