"""Attention plugged into transformers' BERT through its registry (``AttentionInterface``).

``eager_attention`` is transformers' eager attention written out, with one hook,
``weights_of``, that turns the scores into weights; a custom attention (an ablated head, a
similarity prior) changes only that step and is registered under a name with
:func:`register_attention`, then switched on with ``model.set_attn_implementation(name)``.
No class of transformers is patched. :func:`project_heads_torch` cuts a layer's own projection
into heads, in torch, for the code that reads a layer's Q, K, V without running its attention;
:func:`merge_heads_torch` puts eager_attention's heads side by side again.
"""

from __future__ import annotations

import torch

from bertlib.checks import has_shape, heads_dividing, kind
from bertlib.paper.attention import attention_scale

__all__ = ["register_attention", "softmax_weights", "scaled_scores", "eager_attention",
           "project_heads_torch", "merge_heads_torch"]


def register_attention(name: str, fn) -> None:
    """Register a custom attention function with transformers under ``name``.

    fn(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs) ->
    (output (batch, n, heads, d_k), weights (batch, heads, n, n)), as transformers' own eager
    attention. The mask function registered beside it is transformers' ``eager_mask``: the
    additive float mask (0 or a large negative number per key), without which padding would be
    silently ignored. Switch a model to it with ``model.set_attn_implementation(name)``.
    """
    # imported when first registering, so that importing this module stays cheap
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import eager_mask

    AttentionInterface.register(name, fn)
    AttentionMaskInterface.register(name, eager_mask)


def softmax_weights(module, scores, attention_mask):
    """BERT's attention weights from the scaled scores: softmax(scores + mask) over the keys.

    scores: (batch, h, n, n) = Q Kᵀ · scaling; attention_mask: the additive float mask
    (batch, 1, n, n) (0 = may attend, a very negative number = padding) or None. The default
    ``weights_of`` of :func:`eager_attention`; ``module`` (the layer's self-attention) is unused
    here and there for hooks that need it (``module.layer_idx``).
    """
    if attention_mask is not None:
        scores = scores + attention_mask
    return torch.softmax(scores, dim=-1)


def scaled_scores(query, key, scaling=None):
    """Q Kᵀ · scaling, scaling = 1/√d_k unless given: the scores of :func:`eager_attention`, also
    for code that reads a layer's scores without running its attention (finetune.link_effects).
    query (..., n_q, d_k), key (..., n_k, d_k) tensors -> (..., n_q, n_k)."""
    scaling = attention_scale(query.shape[-1]) if scaling is None else scaling
    return torch.matmul(query, key.transpose(-2, -1)) * scaling


def eager_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                    weights_of=softmax_weights, **kwargs):
    """Scaled dot-product attention as transformers' eager implementation computes it:

        weights = softmax(Q Kᵀ · scaling + mask),    output = weights V,

    scaling = 1/√d_k unless given. query, key, value: (batch, h, n, d_k); attention_mask: the
    additive float mask, as in :func:`softmax_weights`. The hook ``weights_of(module, scores,
    attention_mask)`` turns the scores into weights (default :func:`softmax_weights`); a custom
    attention changes only that step (``functools.partial(eager_attention, weights_of=...)``)
    and registers the result with :func:`register_attention`. Dropout on the weights while
    training, as transformers does.
    Returns (output (batch, n, h, d_k), weights (batch, h, n, n)): transformers'
    ``AttentionInterface`` signature.
    """
    scores = scaled_scores(query, key, scaling)  # Q Kᵀ · scaling
    weights = weights_of(module, scores, attention_mask)
    weights = torch.nn.functional.dropout(weights, p=dropout, training=module.training)
    output = torch.matmul(weights, value).transpose(1, 2).contiguous()
    return output, weights


def project_heads_torch(X, linear, h: int):
    """Q = X W + b (or K, or V) cut into h heads, in torch: the twin of
    :func:`bertlib.paper.attention.project_heads` for a layer's own ``torch.nn.Linear`` (e.g. a
    BERT layer's ``attention.self.query``), in the layer's float type, as transformers cuts it.
    X (..., n, d_in) tensor -> (..., h, n, d_k), d_k = linear.out_features / h."""
    kind(linear, "linear", torch.nn.Linear, "a torch.nn.Linear (a layer's query, key or value)")
    kind(X, "X", torch.Tensor, "a torch.Tensor")
    has_shape(X, "X", (..., None, linear.in_features), "(..., n, d_in)", "(d_in of linear)")
    h = heads_dividing(h, linear.out_features)
    return linear(X).unflatten(-1, (h, -1)).transpose(-3, -2)


def merge_heads_torch(output):
    """Concat(head_0, …, head_{h−1}) of :func:`eager_attention`'s output, in torch: the twin of
    :func:`bertlib.paper.attention.merge_heads` for the layout transformers returns, whose
    positions already come before the heads. output (..., n, h, d_k) tensor -> (..., n, h·d_k),
    out[..., t, i·d_k : (i+1)·d_k] = output[..., t, i, :]: merge_heads(X_heads) for
    output = X_heads with its h and n axes swapped (tested)."""
    kind(output, "output", torch.Tensor, "a torch.Tensor")
    has_shape(output, "output", (..., None, None, None), "(..., n, h, d_k)",
              "(eager_attention's output)")
    return output.flatten(-2)
