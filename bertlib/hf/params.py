"""BERT's parameters as numpy arrays, read out of a transformers model (the numpy BERT's hf side).

``bertlib.paper.bert`` holds the equations; this module holds what they are applied to: the types
``LayerParams`` and ``BertParams`` (every W transposed to (in, out), so the equations read x W) and
``bert_params(model)``, which reads them once per model and again whenever a parameter changed
(one layer by :func:`layer_params`, each matrix by :func:`as_xW`).
"""

from __future__ import annotations

import weakref
from typing import NamedTuple

import numpy as np
import torch

from bertlib.checks import kind
from bertlib.hf.loading import bert_module
from bertlib.hf.models import parameters_state

__all__ = ["LayerParams", "BertParams", "bert_params", "layer_params", "as_xW"]


class LayerParams(NamedTuple):
    """One encoder layer's parameters, float64, applied on the right (x W).

    W_Q, W_K, W_V, W_O: (d, d); b_Q, b_K, b_V, b_O: (d,); ln1_gamma, ln1_beta: (d,) (after
    attention); W_1: (d, d_ff), b_1: (d_ff,), W_2: (d_ff, d), b_2: (d,) (feed-forward);
    ln2_gamma, ln2_beta: (d,) (after the feed-forward).
    """

    W_Q: np.ndarray
    b_Q: np.ndarray
    W_K: np.ndarray
    b_K: np.ndarray
    W_V: np.ndarray
    b_V: np.ndarray
    W_O: np.ndarray
    b_O: np.ndarray
    ln1_gamma: np.ndarray
    ln1_beta: np.ndarray
    W_1: np.ndarray
    b_1: np.ndarray
    W_2: np.ndarray
    b_2: np.ndarray
    ln2_gamma: np.ndarray
    ln2_beta: np.ndarray


class BertParams(NamedTuple):
    """All of BERT's encoder parameters.

    word: (vocab, d) float32 (rows are cast to float64 when looked up, to save memory);
    position: (max_positions, d), token_type: (type_vocab, d), emb_gamma, emb_beta: (d,) float64;
    layers: one LayerParams per layer; h: heads per layer; eps: LayerNorm's ε.
    """

    word: np.ndarray
    position: np.ndarray
    token_type: np.ndarray
    emb_gamma: np.ndarray
    emb_beta: np.ndarray
    layers: tuple[LayerParams, ...]
    h: int
    eps: float


def bert_params(model=None) -> BertParams:
    """A ``BertModel``'s parameters in numpy, every W transposed to (in, out) so the equations read
    x W (:func:`as_xW`). model: a BertModel, a LoadedBert, or None for the bundled model. Read once
    per model, and again once any parameter changed (parameters_state): an edit is always seen."""
    model = _check_bert(model)  # the transformers BertModel inside, with BERT's exact GELU
    state, cached = parameters_state(model), _PARAMS.get(model)
    if cached is None or cached[0] != state:  # the first call, or a parameter changed since
        layers = tuple(layer_params(layer) for layer in model.encoder.layer)  # W, b = as_xW(…)
        cached = _PARAMS[model] = (state, _embedding_params(model, layers))
    return cached[1]


def layer_params(layer) -> LayerParams:
    """One transformers ``BertLayer``'s parameters, float64, each W transposed by :func:`as_xW`:
    W_Q, W_K, W_V, W_O (d, d), W_1 (d, d_ff), W_2 (d_ff, d), as the LayerParams fields say."""
    kind(layer, "layer", _bert_layer_class(), "a transformers BertLayer (model.encoder.layer[i])")
    att, out = layer.attention, layer.output
    W_Q, b_Q = as_xW(att.self.query)  # Q = X W_Q + b_Q
    W_K, b_K = as_xW(att.self.key)
    W_V, b_V = as_xW(att.self.value)
    W_O, b_O = as_xW(att.output.dense)
    W_1, b_1 = as_xW(layer.intermediate.dense)  # the feed-forward: GELU(X W_1 + b_1) W_2 + b_2
    W_2, b_2 = as_xW(out.dense)
    ln1, ln2 = att.output.LayerNorm, out.LayerNorm  # γ, β after attention, after feed-forward
    return LayerParams(W_Q, b_Q, W_K, b_K, W_V, b_V, W_O, b_O,
                       _float64(ln1.weight), _float64(ln1.bias), W_1, b_1, W_2, b_2,
                       _float64(ln2.weight), _float64(ln2.bias))


def _bert_layer_class() -> type:
    """transformers' ``BertLayer``, imported here, not at the top: a layer to read exists, so
    transformers is loaded by now, and importing this module (the numpy BERT, the variants, a
    process that measures them) stays cheap (transformers' BertModel takes seconds)."""
    from transformers.models.bert.modeling_bert import BertLayer

    return BertLayer


def as_xW(linear) -> tuple[np.ndarray, np.ndarray]:
    """torch's ``Linear`` keeps W as (out, in) and computes x Wᵀ + b; returns (Wᵀ (in, out), b
    (out,)), float64, so that the same map reads x W + b, as the papers write it."""
    kind(linear, "linear", torch.nn.Linear, "a torch.nn.Linear (one of a BertLayer's projections)")
    return _float64(linear.weight).T.copy(), _float64(linear.bias)


#: model -> (its parameters_state when read, BertParams); an entry goes with its model.
_PARAMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _embedding_params(model, layers: tuple[LayerParams, ...]) -> BertParams:
    """The embeddings' tables and LayerNorm beside the layers, with h and ε from the config."""
    emb, cfg = model.embeddings, model.config
    return BertParams(
        word=emb.word_embeddings.weight.detach().cpu().numpy(),  # float32: cast when looked up
        position=_float64(emb.position_embeddings.weight),
        token_type=_float64(emb.token_type_embeddings.weight),
        emb_gamma=_float64(emb.LayerNorm.weight), emb_beta=_float64(emb.LayerNorm.bias),
        layers=layers, h=int(cfg.num_attention_heads), eps=float(cfg.layer_norm_eps),
    )


def _float64(param) -> np.ndarray:
    """A torch parameter as a float64 numpy array (a copy, detached from the model)."""
    return param.detach().cpu().numpy().astype(np.float64)


# ---------------------------------------------------------------- the checks, once at the edge

def _check_bert(model):
    """The BertModel inside ``model`` (:func:`bert_module`), whose feed-forward is the exact GELU
    that the numpy BERT implements."""
    bert = bert_module(model)
    if getattr(bert.config, "hidden_act", "gelu") != "gelu":
        raise ValueError(f"this forward pass implements BERT's exact GELU; the model uses "
                         f"{bert.config.hidden_act!r}")
    return bert
