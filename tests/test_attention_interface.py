"""bertlib.hf.attention_interface: the written-out eager attention equals transformers' own, its
hook sees the scores, a registered attention comes with the additive mask, and a layer's
projection is cut into heads as transformers cuts it, and merged again as it merges them."""

import ast
from pathlib import Path

import numpy as np
import pytest
import torch

from bertlib.hf.attention_interface import (
    eager_attention,
    merge_heads_torch,
    project_heads_torch,
    register_attention,
    scaled_scores,
    softmax_weights,
)
from bertlib.paper.attention import merge_heads, project_heads


def test_register_attention_pairs_the_function_with_the_additive_mask():
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import eager_mask

    def fn(module, query, key, value, attention_mask, **kwargs):  # pragma: no cover - not run
        raise AssertionError

    register_attention("bertlib_test_registration", fn)
    assert AttentionInterface()["bertlib_test_registration"] is fn
    assert AttentionMaskInterface()["bertlib_test_registration"] is eager_mask


def test_eager_attention_equals_transformers_eager_and_its_hook_sees_the_scores():
    from transformers.models.bert.modeling_bert import eager_attention_forward

    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 4) for _ in range(3))
    mask = torch.zeros(2, 1, 5, 5)
    mask[1, ..., 3:] = torch.finfo(torch.float32).min  # the second input has 3 real tokens
    module = torch.nn.Module().eval()
    ours = eager_attention(module, q, k, v, mask, scaling=0.5)
    theirs = eager_attention_forward(module, q, k, v, mask, scaling=0.5)
    assert ours[0].shape == (2, 5, 3, 4) and ours[1].shape == (2, 3, 5, 5)
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True))
    seen = {}

    def weights_of(module, scores, attention_mask):
        seen["scores"] = scores
        return softmax_weights(module, scores, attention_mask)

    eager_attention(module, q, k, v, None, weights_of=weights_of)  # scaling 1/√d_k by default
    assert torch.allclose(seen["scores"], q @ k.transpose(2, 3) / 2.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_two_torch_attentions_are_one_equation(dtype):
    # kernels.naive_attention (paper/, the n × n lesson of notebook 05) and eager_attention (hf/,
    # the one registered with transformers) both compute softmax(Q Kᵀ · s) V: with no mask and
    # no dropout they agree, to rounding
    from bertlib.paper.kernels import naive_attention

    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 4, dtype=dtype) for _ in range(3))
    module = torch.nn.Module().eval()
    for scale in (None, 0.3):
        out, _ = eager_attention(module, q, k, v, None, scaling=scale)
        naive = naive_attention(q, k, v, scale=scale)
        tol = 1e-6 if dtype == torch.float32 else 1e-14
        assert torch.allclose(out.transpose(1, 2), naive, rtol=0, atol=tol)



def test_project_heads_torch_is_the_layers_own_cut_and_the_numpy_projection():
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(vocab_size=20, hidden_size=12, num_hidden_layers=1, num_attention_heads=3,
                        intermediate_size=16)
    model, seen = BertModel(config).eval(), {}

    def capture(module, query, key, value, attention_mask, **kwargs):
        seen.update(query=query, key=key, value=value)
        return eager_attention(module, query, key, value, attention_mask, **kwargs)

    register_attention("bertlib_test_heads", capture)
    model.set_attn_implementation("bertlib_test_heads")
    ids = torch.tensor([[2, 5, 7, 1, 3], [4, 4, 9, 8, 6]])
    with torch.no_grad():
        X = model.embeddings(input_ids=ids)  # (2, 5, 12): layer 0's input
        model(input_ids=ids)
        sa = model.encoder.layer[0].attention.self
        for name in ("query", "key", "value"):  # bit for bit what the layer hands its attention
            ours = project_heads_torch(X, getattr(sa, name), 3)
            assert ours.shape == (2, 3, 5, 4) and torch.equal(ours, seen[name])
        lin = sa.query.double()  # the numpy twin, in float64, with W = weightᵀ
        np.testing.assert_allclose(project_heads_torch(X.double(), lin, 3).numpy(), project_heads(
            X.double().numpy(), lin.weight.T.numpy(), lin.bias.numpy(), 3), rtol=0, atol=1e-12)


def test_merge_heads_torch_is_the_layers_own_merge_and_the_numpy_merge():
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(vocab_size=20, hidden_size=12, num_hidden_layers=1, num_attention_heads=3,
                        intermediate_size=16)
    sa = BertModel(config).eval().encoder.layer[0].attention.self
    X = torch.randn(2, 5, 12)
    with torch.no_grad():
        q, k, v = (project_heads_torch(X, m, 3) for m in (sa.query, sa.key, sa.value))
        output = eager_attention(sa, q, k, v, None)[0]  # (2, 5, 3, 4): positions before heads
        merged = merge_heads_torch(output)
        assert merged.shape == (2, 5, 12)
        torch.testing.assert_close(merged, sa(X)[0], rtol=0, atol=1e-6)  # the layer's own merge
    heads = np.random.default_rng(0).normal(size=(2, 3, 5, 4))  # (..., h, n, d_k), numpy's layout
    assert np.array_equal(merge_heads_torch(torch.as_tensor(heads).transpose(-3, -2)).numpy(),
                          merge_heads(heads))
    with pytest.raises(ValueError, match=r"output must have shape \(..., n, h, d_k\)"):
        merge_heads_torch(torch.ones(4, 6))
    with pytest.raises(TypeError, match="output must be a torch.Tensor"):
        merge_heads_torch(heads)


@pytest.mark.parametrize("X, linear, h, error, message", [
    (torch.ones(5, 6), torch.nn.Linear(6, 8), 3, ValueError, r"Valid h for d = 8: \[1, 2, 4, 8\]"),
    (torch.ones(5, 7), torch.nn.Linear(6, 8), 2, ValueError, r"X must have shape \(..., n, d_in\)"),
    (np.ones((5, 6)), torch.nn.Linear(6, 8), 2, TypeError, r"X must be a torch.Tensor"),
    (torch.ones(5, 6), np.ones((6, 8)), 2, TypeError, r"linear must be a torch.nn.Linear"),
])
def test_project_heads_torch_names_what_is_wrong(X, linear, h, error, message):
    with pytest.raises(error, match=message):
        project_heads_torch(X, linear, h)


def test_scaled_scores_are_eager_attentions_scores_written_once_in_hf():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 3, 5, 4, generator=g), torch.randn(2, 3, 6, 4, generator=g)
    scores = scaled_scores(q, k)
    assert torch.equal(scores, q @ k.transpose(-1, -2) * 0.5)  # 1/√4
    assert torch.equal(scaled_scores(q, k, 2.0), q @ k.transpose(-1, -2) * 2.0)
    seen = []
    eager_attention(torch.nn.Module(), q, k, torch.randn(2, 3, 6, 4, generator=g), None,
                    weights_of=lambda module, s, mask: seen.append(s) or softmax_weights(None, s, None))
    assert torch.equal(seen[0], scores)
    hf = Path(__file__).resolve().parents[1] / "bertlib" / "hf"
    scales = [f"{path.name}: {ast.unparse(node)}" for path in sorted(hf.glob("*.py"))
              for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
              if isinstance(node, ast.Call) and ast.unparse(node.func) == "attention_scale"]
    assert scales == ["attention_interface.py: attention_scale(query.shape[-1])"], (
        "hf/ scales Q Kᵀ in one place, scaled_scores: call it", scales)
