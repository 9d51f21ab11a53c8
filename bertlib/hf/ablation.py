"""Switching one head off in a real transformers BERT (Michel, Levy & Neubig 2019, "Are Sixteen
Heads Really Better than One?"; Kovaleva et al. 2019 for the uniform replacement).

No class of transformers is patched: the model runs
:func:`bertlib.hf.attention_interface.eager_attention`, registered with
``transformers.AttentionInterface``, whose ``weights_of`` step replaces one head's weights in one
layer. :mod:`bertlib.hf.importance` measures what each head is worth with it;
On notebook 09's tiny BERT, :mod:`bertlib.tiny.mechanism` switches groups of heads off with its
own batched twin, tested equal to :func:`ablated_heads`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from bertlib.checks import one_of
from bertlib.hf.attention_interface import eager_attention, register_attention, softmax_weights
from bertlib.hf.loading import bert_module, load_bert
from bertlib.hf.models import check_layer_head

__all__ = ["ABLATION_MODES", "ablated_weights", "ablated_attention", "ablated_head",
           "ablated_heads"]

#: How :func:`ablated_head` replaces one head's weights.
ABLATION_MODES = ("uniform", "zero")

_ABLATION_NAME = "bertlib_head_ablation"


def ablated_attention(layer: int, head: int, mode: str):
    """Eager attention (transformers' signature) in which head ``head`` of layer ``layer`` gets

        "uniform": α_ij = softmax(0 + mask)_j = 1/n over the n real (non-padding) keys, or
        "zero":    α_ij = 0, so the head adds nothing (Michel et al.'s mask ξ_h = 0);

    every other head and layer keeps softmax(Q Kᵀ · scaling + mask). The indices are trusted:
    :func:`ablated_head` checks them.
    """

    return _ablated_attention_of({(layer, head)}, mode)


def ablated_weights(module, scores, attention_mask, mode: str) -> torch.Tensor:
    """A switched-off head's weights, the one rule: "zero" → α_ij = 0; "uniform" → softmax(0 +
    mask)_j, 1/n over the n real keys (padding still masked). module, scores (batch, h, n_q, n_k)
    and attention_mask (transformers' additive float mask or None) as in
    :func:`bertlib.hf.attention_interface.softmax_weights`; mode one of ABLATION_MODES (trusted:
    the caller checks it). Returns (batch, 1, n_q, n_k), to put in place of the head's weights."""
    no_scores = torch.zeros_like(scores[:, :1])  # every key scores 0
    return no_scores if mode == "zero" else softmax_weights(module, no_scores, attention_mask)


def _ablated_attention_of(heads: set[tuple[int, int]], mode: str):
    """As :func:`ablated_attention`, for every (layer, head) in ``heads`` at once."""

    def weights_of(module, scores, attention_mask):
        weights = softmax_weights(module, scores, attention_mask)
        off = sorted(h for l, h in heads if l == module.layer_idx)
        if not off:
            return weights
        weights = weights.clone()
        weights[:, off] = ablated_weights(module, scores, attention_mask, mode)
        return weights

    return functools.partial(eager_attention, weights_of=weights_of)


@contextmanager
def ablated_head(layer: int, head: int, mode: str = "zero", model=None) -> Iterator:
    """Within the ``with`` block, ``model`` runs with one head disabled; yields ``model``.

    model: a LoadedBert (default :func:`bertlib.hf.loading.load_bert`) or a transformers BERT, with
    or without a head. mode: "zero" (the default: the head adds nothing, as in
    :func:`ablated_heads`) or "uniform", see :func:`ablated_attention`. Registers that
    function with ``transformers.AttentionInterface`` (beside the eager additive mask, so
    padding is still masked) and switches the model to it; the previous implementation is
    restored on exit, even after an error. The parameters are never changed.
    ``bertlib.hf.models.run_bert`` sees the ablation too: its cache key holds the registered
    attention. Raises ValueError for a layer, head or mode out of range, and for nested blocks.
    """
    with ablated_heads([(layer, head)], mode, model) as model:
        yield model


@contextmanager
def ablated_heads(heads, mode: str = "zero", model=None) -> Iterator:
    """Within the ``with`` block, ``model`` runs with every (layer, head) of ``heads`` disabled
    at once (several heads of a layer, a whole layer, heads of several layers); yields ``model``.

    heads: a sequence of (layer, head) pairs, each checked against the model's sizes (an empty
    sequence switches nothing off). mode and model as in :func:`ablated_head`, which is this
    function with one pair (the same default, "zero": the heads add nothing). Raises
    ValueError for an index or mode out of range, and for nested blocks.
    """
    model = model or load_bert()
    bert = bert_module(model)
    chosen = {check_layer_head(bert, layer, head, allow_mean=False) for layer, head in heads}
    one_of(mode, "mode", ABLATION_MODES)
    previous = bert.config._attn_implementation
    if previous == _ABLATION_NAME:
        raise ValueError("ablation blocks cannot be nested: list every head in one block")
    register_attention(_ABLATION_NAME, _ablated_attention_of(chosen, mode))
    bert.set_attn_implementation(_ABLATION_NAME)
    try:
        yield model
    finally:
        bert.set_attn_implementation(previous)
