"""Tests of bertlib.paper.family: DeBERTa's disentangled attention, ALBERT's sharing and counts."""

import warnings

import numpy as np
import pytest
import torch
from transformers import AlbertConfig, AlbertModel, BertConfig, DebertaV2Config, RobertaConfig
from transformers.models.deberta_v2.modeling_deberta_v2 import DisentangledSelfAttention

from bertlib.paper import family as F


def _inputs(n=7, d=6, d_k=3, k=2, seed=0):
    rng = np.random.default_rng(seed)
    H = rng.normal(size=(n, d))
    P_rel = rng.normal(size=(2 * k, d))
    W_qc, W_kc, W_qr, W_kr, W_v = (rng.normal(size=(d, d_k)) for _ in range(5))
    return H, P_rel, W_qc, W_kc, W_qr, W_kr, W_v


# --- relative positions ---------------------------------------------------------------------

def test_bucket_follows_the_three_cases_at_and_beyond_plus_minus_k():
    k = 3
    offsets = np.array([-10, -4, -3, -2, -1, 0, 1, 2, 3, 4, 10])
    expected = [0, 0, 0, 1, 2, 3, 4, 5, 5, 5, 5]  # i-j <= -k -> 0; i-j >= k -> 2k-1; else i-j+k
    np.testing.assert_array_equal(F.relative_bucket(offsets, k), expected)


def test_relative_positions_matrix_is_delta_of_i_minus_j_in_range():
    n, k = 9, 2
    delta = F.relative_positions(n, k)
    assert delta.shape == (n, n) and delta.dtype == np.int64
    assert delta.min() == 0 and delta.max() == 2 * k - 1
    for i in range(n):
        for j in range(n):
            d = i - j
            want = 0 if d <= -k else 2 * k - 1 if d >= k else d + k
            assert delta[i, j] == want
    np.testing.assert_array_equal(np.diag(delta), k)


def test_relative_positions_with_large_k_never_clips():
    delta = F.relative_positions(5, 10)
    np.testing.assert_array_equal(delta - delta.T, 2 * (np.arange(5)[:, None] - np.arange(5)))


@pytest.mark.parametrize("k", [0, -1])
def test_k_not_positive_is_refused(k):
    with pytest.raises(ValueError, match=f"k must be a whole number >= 1, got {k}"):
        F.relative_positions(4, k)
    H, P_rel, *W = _inputs()
    with pytest.raises(ValueError, match="k must be"):
        F.disentangled_attention(H, P_rel, *W[:4], k=k)


def test_k_not_whole_is_refused():
    with pytest.raises(TypeError, match="k must be a whole number"):
        F.relative_positions(4, 2.5)


# --- disentangled attention -----------------------------------------------------------------

def test_scores_are_the_sum_of_three_terms_scaled_by_root_3_d_k():
    H, P_rel, W_qc, W_kc, W_qr, W_kr, W_v = _inputs(d_k=3)
    r = F.disentangled_attention(H, P_rel, W_qc, W_kc, W_qr, W_kr, k=2, W_v=W_v)
    assert r.scale == pytest.approx(1 / np.sqrt(3 * 3))
    np.testing.assert_allclose(r.scores, (r.c2c + r.c2p + r.p2c) / np.sqrt(9), atol=1e-12)
    e = np.exp(r.scores - r.scores.max(-1, keepdims=True))
    np.testing.assert_allclose(r.weights, e / e.sum(-1, keepdims=True), atol=1e-12)
    np.testing.assert_allclose(r.output, r.weights @ H @ W_v, atol=1e-12)


def test_terms_match_the_paper_formula_by_loops():
    H, P_rel, W_qc, W_kc, W_qr, W_kr, _ = _inputs(n=6, k=2)
    k = 2
    r = F.disentangled_attention(H, P_rel, W_qc, W_kc, W_qr, W_kr, k)
    Qc, Kc, Qr, Kr = H @ W_qc, H @ W_kc, P_rel @ W_qr, P_rel @ W_kr

    def delta(i, j):
        return 0 if i - j <= -k else 2 * k - 1 if i - j >= k else i - j + k

    for i in range(6):
        for j in range(6):
            assert r.c2c[i, j] == pytest.approx(Qc[i] @ Kc[j])
            assert r.c2p[i, j] == pytest.approx(Qc[i] @ Kr[delta(i, j)])
            assert r.p2c[i, j] == pytest.approx(Kc[j] @ Qr[delta(j, i)])
    r_ij = F.disentangled_attention(H, P_rel, W_qc, W_kc, W_qr, W_kr, k, p2c_delta="ij")
    assert r_ij.p2c[0, 5] == pytest.approx(Kc[5] @ Qr[delta(0, 5)])
    np.testing.assert_array_equal(r_ij.c2p, r.c2p)


def test_default_values_are_the_identity():
    H, P_rel, W_qc, W_kc, W_qr, W_kr, _ = _inputs()
    r = F.disentangled_attention(H, P_rel, W_qc, W_kc, W_qr, W_kr, k=2)
    np.testing.assert_allclose(r.output, r.weights @ H, atol=1e-12)


def test_scale_gives_unit_variance_scores_for_unit_variance_inputs():
    rng = np.random.default_rng(1)
    n, d, k = 300, 64, 200
    H = rng.normal(size=(n, d))
    P_rel = rng.normal(size=(2 * k, d))
    eye = np.eye(d)
    r = F.disentangled_attention(H, P_rel, eye, eye, eye, eye, k)
    for term in (r.c2c, r.c2p, r.p2c):  # each term: a dot product of d unit-variance products
        off = term[~np.eye(n, dtype=bool)]
        assert off.var() == pytest.approx(d, rel=0.1)
    off = r.scores[~np.eye(n, dtype=bool)]
    assert off.var() == pytest.approx(1.0, rel=0.1)


def test_relative_terms_do_not_change_when_the_sentence_shifts_right():
    H, P_rel, W_qc, W_kc, W_qr, W_kr, _ = _inputs(n=6, k=3)
    filler = np.random.default_rng(5).normal(size=(4, H.shape[1]))
    base = F.disentangled_attention(H, P_rel, W_qc, W_kc, W_qr, W_kr, 3)
    shifted = F.disentangled_attention(np.vstack([filler, H]), P_rel, W_qc, W_kc, W_qr, W_kr, 3)
    s = slice(4, None)
    for name in ("c2c", "c2p", "p2c"):
        np.testing.assert_allclose(getattr(shifted, name)[s, s], getattr(base, name), atol=1e-12)


def test_absolute_positions_do_change_when_the_sentence_shifts_right():
    H, _, W_qc, W_kc, *_ = _inputs(n=6)
    P_abs = np.random.default_rng(6).normal(size=(16, H.shape[1]))

    def scores(start):
        X = H + P_abs[start:start + len(H)]
        return (X @ W_qc) @ (X @ W_kc).T

    assert np.abs(scores(4) - scores(0)).max() > 0.1


@pytest.mark.parametrize("p2c_delta", ["ij", "ji"])
def test_matches_transformers_deberta_v2_only_with_its_p2c_index(p2c_delta):
    n, d, d_k, k = 7, 6, 3, 2
    H, P_rel, W_qc, W_kc, W_qr, W_kr, W_v = _inputs(n, d, d_k, k)
    config = DebertaV2Config(hidden_size=d, num_attention_heads=1, attention_head_size=d_k,
                             relative_attention=True, position_buckets=-1,
                             max_relative_positions=k, pos_att_type=["c2p", "p2c"],
                             share_att_key=False, hidden_dropout_prob=0.0,
                             attention_probs_dropout_prob=0.0)
    att = DisentangledSelfAttention(config).double().eval()
    with torch.no_grad():
        for lin, W in ((att.query_proj, W_qc), (att.key_proj, W_kc), (att.pos_query_proj, W_qr),
                       (att.pos_key_proj, W_kr), (att.value_proj, W_v)):
            lin.weight.copy_(torch.from_numpy(W.T))
            lin.bias.zero_()
        out, probs = att(torch.from_numpy(H)[None], torch.ones(1, 1, n, n, dtype=torch.bool),
                         output_attentions=True, rel_embeddings=torch.from_numpy(P_rel))
    r = F.disentangled_attention(H, P_rel, W_qc, W_kc, W_qr, W_kr, k, W_v, p2c_delta=p2c_delta)
    gap = np.abs(r.weights - probs[0, 0].numpy()).max()
    if p2c_delta == "ij":  # 1e-6: transformers computes √(3·d_k) in float32 even in float64
        assert gap < 1e-6
        np.testing.assert_allclose(r.output, out[0].numpy(), atol=1e-6)
    else:  # the paper's δ(j, i) is not what transformers computes
        assert gap > 1e-2


def test_shapes_that_do_not_match_d_are_refused():
    H, P_rel, W_qc, W_kc, W_qr, W_kr, W_v = _inputs(d=6, k=2)
    with pytest.raises(ValueError, match=r"P_rel must have shape \(2k, d\) = \(4, 6\)"):
        F.disentangled_attention(H, P_rel[:, :5], W_qc, W_kc, W_qr, W_kr, 2)
    with pytest.raises(ValueError, match=r"P_rel must have shape \(2k, d\) = \(6, 6\)"):
        F.disentangled_attention(H, P_rel, W_qc, W_kc, W_qr, W_kr, 3)
    with pytest.raises(ValueError, match=r"W_kr must have shape \(d, d_k\) = \(6, d_k\) \(d from X's last axis\)"):
        F.disentangled_attention(H, P_rel, W_qc, W_kc, W_qr, W_kr[:5], 2)
    with pytest.raises(ValueError, match="must all have the same shape"):
        F.disentangled_attention(H, P_rel, W_qc, W_kc, W_qr[:, :2], W_kr, 2)
    with pytest.raises(ValueError, match="W_v must have shape"):
        F.disentangled_attention(H, P_rel, W_qc, W_kc, W_qr, W_kr, 2, W_v=W_v[:4])
    with pytest.raises(ValueError, match=r"X must have 2 dimensions \(one sequence of shape \(n, d\)\)"):
        F.disentangled_attention(H[None], P_rel, W_qc, W_kc, W_qr, W_kr, 2)


def test_nan_and_bad_p2c_option_are_refused():
    H, P_rel, W_qc, W_kc, W_qr, W_kr, _ = _inputs()
    H[2, 1] = np.nan
    with pytest.raises(ValueError, match="X contains 1 NaN"):
        F.disentangled_attention(H, P_rel, W_qc, W_kc, W_qr, W_kr, 2)
    with pytest.raises(ValueError, match="p2c_delta must be"):
        F.disentangled_attention(H, P_rel, W_qc, W_kc, W_qr, W_kr, 2, p2c_delta="paper")


# --- ALBERT: factorised embedding and counts ------------------------------------------------

def test_factorised_embedding_counts_and_lookup():
    count = F.factorised_embedding_parameters(30000, 128, 768)
    assert count == (30000 * 768, 30000 * 128 + 128 * 768)
    rng = np.random.default_rng(2)
    table, W = rng.normal(size=(10, 3)), rng.normal(size=(3, 5))
    out = F.factorised_embedding([4, 0, 9], table, W)
    np.testing.assert_allclose(out, table[[4, 0, 9]] @ W)


def test_embedding_size_larger_than_hidden_size_warns_with_the_reason():
    with pytest.warns(UserWarning, match=r"E=1024 .* H=768.*adds parameters"):
        count = F.factorised_embedding_parameters(30000, 1024, 768)
    assert count.factorised > count.full
    with pytest.warns(UserWarning, match="E=1024"):
        F.albert_parameter_count(30000, 1024, 768, 12, 3072)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.factorised_embedding_parameters(30000, 128, 768)


def test_factorised_embedding_refuses_bad_ids_and_shapes():
    table, W = np.zeros((10, 3)), np.zeros((3, 5))
    with pytest.raises(ValueError, match=r"token_ids must be in 0..9 \(a vocabulary of 10\), got 10"):
        F.factorised_embedding([1, 10], table, W)
    with pytest.raises(ValueError, match=r"W_EH must have shape \(E, H\) = \(3, H\) \(E shared with word_table"):
        F.factorised_embedding([1], table, np.zeros((4, 5)))
    with pytest.raises(TypeError, match="whole numbers"):
        F.factorised_embedding([1.5], table, W)
    with pytest.raises(ValueError, match="E must be a whole number >= 1, got 0"):
        F.factorised_embedding_parameters(100, 0, 10)


def test_layer_count_formula_is_bert_base_per_layer():
    assert F.layer_parameter_count(768, 3072) == 7_087_872


@pytest.mark.parametrize("groups", [1, 2, 4])
def test_albert_formula_matches_transformers_on_small_random_models(groups):
    torch.manual_seed(0)
    config = AlbertConfig(vocab_size=99, embedding_size=8, hidden_size=32, num_hidden_layers=4,
                          num_attention_heads=4, intermediate_size=64, max_position_embeddings=40,
                          num_hidden_groups=groups)
    model = AlbertModel(config)
    count = F.config_parameter_count(config)
    assert count.total == model.num_parameters()
    assert count.layers == sum(p.numel() for p in model.encoder.albert_layer_groups.parameters())
    assert count.projection == sum(
        p.numel() for p in model.encoder.embedding_hidden_mapping_in.parameters())


def test_published_base_sizes_match_transformers_counts_on_the_meta_device():
    bert = BertConfig()
    albert = AlbertConfig(embedding_size=128, hidden_size=768, num_attention_heads=12,
                          intermediate_size=3072)
    roberta = RobertaConfig(max_position_embeddings=514, type_vocab_size=1)
    for config in (bert, albert, roberta):
        model = F.meta_model(config)
        assert next(model.parameters()).device.type == "meta"
        assert F.config_parameter_count(config).total == model.num_parameters()
    assert F.config_parameter_count(bert).total == 109_482_240
    assert F.config_parameter_count(albert).total == 11_683_584


def test_counting_refuses_other_models_and_bad_sizes():
    with pytest.raises(ValueError, match="model_type .* got 'deberta-v2'"):
        F.config_parameter_count(DebertaV2Config())
    with pytest.raises(ValueError, match=r"groups must be a whole number in 1..12 \(1..L=12"):
        F.albert_parameter_count(30000, 128, 768, 12, 3072, groups=13)
    with pytest.raises(ValueError, match="H must be a whole number >= 1, got -768"):
        F.bert_parameter_count(30522, -768, 12, 3072)


# --- ALBERT: the shared stack ---------------------------------------------------------------

def _albert(groups, L=4):
    torch.manual_seed(0)
    config = AlbertConfig(vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=L,
                          num_attention_heads=2, intermediate_size=32, num_hidden_groups=groups,
                          hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return AlbertModel(config).eval()


@pytest.mark.parametrize("groups", [1, 2, 4])
def test_layer_stack_equals_albert_encoder(groups):
    model = _albert(groups)
    layers = [g.albert_layers[0] for g in model.encoder.albert_layer_groups]
    stack = F.LayerStack(layers, 4)
    x = torch.randn(2, 5, 8)
    with torch.no_grad():
        h0 = model.encoder.embedding_hidden_mapping_in(x)
        states = stack(h0)
        want = model.encoder(x).last_hidden_state
    assert states.shape == (5, 2, 5, 16)
    torch.testing.assert_close(states[-1], want, atol=1e-6, rtol=1e-6)
    assert sum(p.numel() for p in stack.parameters()) == groups * F.layer_parameter_count(16, 32)


def test_shared_stack_counts_one_layer_and_reuses_it():
    model = _albert(1)
    layer = model.encoder.albert_layer_groups[0].albert_layers[0]
    stack = F.LayerStack([layer], 6)
    assert all(stack.layers[int(i / 6)] is layer for i in range(6))
    assert sum(p.numel() for p in stack.parameters()) == F.layer_parameter_count(16, 32)


def test_layer_stack_refuses_bad_layer_counts_and_shapes():
    layer = _albert(1).encoder.albert_layer_groups[0].albert_layers[0]
    with pytest.raises(ValueError, match=r"number of distinct layers must be a whole number in 1..2 \(num_layers=2\), got 3"):
        F.LayerStack([layer] * 3, 2)
    with pytest.raises(ValueError, match="num_layers must be a whole number >= 1, got 0"):
        F.LayerStack([layer], 0)
    with pytest.raises(ValueError, match=r"hidden must have shape \(batch, n, H\)"):
        F.LayerStack([layer], 2)(torch.zeros(5, 16))


def test_consecutive_cosine_measures_layer_to_layer_similarity():
    h = np.array([[[1.0, 0.0]], [[1.0, 0.0]], [[0.0, 2.0]]])
    np.testing.assert_allclose(F.consecutive_cosine(h), [1.0, 0.0])
    with pytest.raises(ValueError, match=r"L \(hidden_states has shape \(L \+ 1, n, H\)\) must be a whole number >= 1, got 0"):
        F.consecutive_cosine(h[:1])
    with pytest.raises(ValueError, match="all-zero vector"):
        F.consecutive_cosine(np.zeros((2, 1, 2)))
