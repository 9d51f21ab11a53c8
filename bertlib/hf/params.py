"""BERT's parameters as numpy arrays, read out of a transformers model (the numpy BERT's hf side).

``bertlib.paper.bert`` holds the equations; this module holds what they are applied to: the types
``LayerParams`` and ``BertParams`` (every W transposed to (in, out), so the equations read x W) and
``bert_params(model)``, which reads them once per model and again whenever a parameter changed.
"""

from __future__ import annotations

import weakref
from typing import NamedTuple

import numpy as np

from bertlib.hf.loading import bert_module
from bertlib.hf.models import parameters_state

__all__ = ["LayerParams", "BertParams", "bert_params"]


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


def _np(param, transpose: bool = False) -> np.ndarray:
    a = param.detach().cpu().numpy().astype(np.float64)
    return a.T.copy() if transpose else a


#: model -> (its parameters_state when read, BertParams); an entry goes with its model.
_PARAMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _params_of(model) -> BertParams:
    """The model's parameters read once, and read again whenever one of them has changed."""
    state = parameters_state(model)
    cached = _PARAMS.get(model)
    if cached is None or cached[0] != state:
        cached = _PARAMS[model] = (state, _read_params(model))
    return cached[1]


def _read_layer(layer) -> LayerParams:
    att, out = layer.attention, layer.output
    return LayerParams(
        W_Q=_np(att.self.query.weight, True), b_Q=_np(att.self.query.bias),
        W_K=_np(att.self.key.weight, True), b_K=_np(att.self.key.bias),
        W_V=_np(att.self.value.weight, True), b_V=_np(att.self.value.bias),
        W_O=_np(att.output.dense.weight, True), b_O=_np(att.output.dense.bias),
        ln1_gamma=_np(att.output.LayerNorm.weight), ln1_beta=_np(att.output.LayerNorm.bias),
        W_1=_np(layer.intermediate.dense.weight, True), b_1=_np(layer.intermediate.dense.bias),
        W_2=_np(out.dense.weight, True), b_2=_np(out.dense.bias),
        ln2_gamma=_np(out.LayerNorm.weight), ln2_beta=_np(out.LayerNorm.bias),
    )


def _read_params(model) -> BertParams:
    cfg = model.config
    if getattr(cfg, "hidden_act", "gelu") != "gelu":
        raise ValueError(f"this forward pass implements BERT's exact GELU; the model uses "
                         f"{cfg.hidden_act!r}")
    emb = model.embeddings
    return BertParams(
        word=emb.word_embeddings.weight.detach().cpu().numpy(),
        position=_np(emb.position_embeddings.weight),
        token_type=_np(emb.token_type_embeddings.weight),
        emb_gamma=_np(emb.LayerNorm.weight), emb_beta=_np(emb.LayerNorm.bias),
        layers=tuple(_read_layer(layer) for layer in model.encoder.layer),
        h=int(cfg.num_attention_heads), eps=float(cfg.layer_norm_eps),
    )


def bert_params(model=None) -> BertParams:
    """A ``BertModel``'s parameters in numpy, every W as (in, out) so the equations read x W.

    torch's Linear stores W as (out, in) and computes x Wᵀ; here each is transposed once, when
    read. model: a BertModel, a LoadedBert, or None for the bundled model (:func:`load_bert`),
    cached per model. The cache is read again once any
    parameter changed (see :func:`bertlib.hf.models.parameters_state`), so training or an edited
    parameter is always seen.
    """
    return _params_of(bert_module(model))
