"""bertlib.hf.attention_interface: the written-out eager attention equals transformers' own, its
hook sees the scores, and a registered attention comes with the additive mask."""

import torch

from bertlib.hf.attention_interface import eager_attention, register_attention, softmax_weights


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

