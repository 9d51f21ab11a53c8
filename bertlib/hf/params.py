"""BERT's parameters as numpy arrays, read out of a transformers model (the numpy BERT's hf side).

``bertlib.paper.bert`` holds the equations and the types they take (``LayerParams``,
``BertParams``: every W transposed to (in, out), so the equations read x W); this module reads a
model into them: ``bert_params(model)``, once per model and again whenever a parameter changed
(one layer by :func:`layer_params`, each matrix by :func:`as_xW`). Then the equations on a real
model: :func:`forward_text` (``bert_forward`` on a sentence), :func:`bert_qkv` (one layer's Q, K,
V), :func:`bert_layer` (one layer with each head's attention swapped for a variant) and
:func:`mask_sentence` (BERT's masking rule, ``bertlib.paper.mlm.mask_tokens``, on a sentence
tokenised by the model's tokenizer).
"""

from __future__ import annotations

import weakref

import numpy as np
import torch

from bertlib.checks import as_array, kind
from bertlib.hf.loading import bert_module, load_bert
from bertlib.hf.models import check_layer_head, encode, parameters_state
from bertlib.paper.attention import project_heads
from bertlib.paper.bert import BertOutput, BertParams, LayerParams, bert_forward, encoder_layer
from bertlib.paper.mlm import MaskedInput, mask_tokens

__all__ = [
    "bert_params",
    "layer_params",
    "as_xW",
    "forward_text",
    "bert_qkv",
    "bert_layer",
    "mask_sentence",
]


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


# ---------------------------------------------------------------- the equations on a real model

def forward_text(text: str, text_pair: str | None = None, model=None) -> BertOutput:
    """:func:`bertlib.paper.bert.bert_forward` on one sentence (or pair), tokenised by
    :func:`bertlib.hf.models.encode`, on the parameters of ``model`` (None = the bundled BERT).

    Returns hidden_states (L+1, n, d) and attentions (L, h, n, n) for the n word pieces
    (the tokens are ``bertlib.hf.models.run_bert(text, text_pair).tokens``).
    """
    loaded = load_bert() if model is None else model
    enc = encode(text, text_pair, loaded)
    return bert_forward(bert_params(loaded), enc["input_ids"][0].numpy(),
                        enc["token_type_ids"][0].numpy())


def bert_qkv(hidden, layer: int, model=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Q, K, V of every head of BERT's layer ``layer`` from its input hidden states.

        Q = X W_Q + b_Q (likewise K, V), split into h heads of d_k = d/h features.
    hidden: X (n, d), the layer's input (``run_bert(text).hidden_states[layer]``).
    model: a LoadedBert or BertModel (default: the bundled BERT).
    Returns Q, K, V each (h, n, d_k) float64.
    """
    p, params = _layer_params(model, layer)
    X = as_array(hidden, "hidden", shape=(None, p.W_Q.shape[0]), layout="(n, d)",
                 why="(d of this model)").astype(np.float64)
    return tuple(project_heads(X, W, b, params.h)
                 for W, b in ((p.W_Q, p.b_Q), (p.W_K, p.b_K), (p.W_V, p.b_V)))


def bert_layer(hidden, layer: int, attend=None, model=None) -> np.ndarray:
    """One BERT encoder layer in numpy, with each head's attention computed by ``attend``:
    :func:`bertlib.paper.bert.encoder_layer` with the attention swapped,

        M = Concat_i attend(Q_i, K_i, V_i) W_O + b_O;  X' = LayerNorm(X + M)
        out = LayerNorm(X' + GELU(X' W_1 + b_1) W_2 + b_2)
    hidden: X (n, d), the layer's input; attend(Q, K, V) -> (n, d_k) for one head, with Q, K, V
    (n, d_k), e.g. ``lambda Q, K, V: sliding_window_attention(Q, K, V, 4)``; None = BERT's
    full softmax attention. No padding (one unpadded sequence).
    Returns the layer's output (n, d) float64 (``hidden_states[layer + 1]`` when attend is None).
    """
    p, params = _layer_params(model, layer)
    return encoder_layer(hidden, p, params.h, eps=params.eps, attend=attend)[0]


def mask_sentence(text: str, text_pair: str | None = None, model=None,
                  seed: int = 0) -> tuple[list[str], list[str], MaskedInput]:
    """:func:`bertlib.paper.mlm.mask_tokens` on a sentence (or pair) tokenised by the model's
    tokenizer (so one row for ``mask_batch``); [CLS], [SEP], [PAD] are never chosen.
    Returns (tokens before, tokens after, MaskedInput of (n,) arrays)."""
    tok, ids = _tokenised(text, text_pair, model)  # (n,) piece ids
    masked = mask_tokens(ids, tok.mask_token_id, len(tok), tok.all_special_ids, seed)
    return (tok.convert_ids_to_tokens(ids.tolist()),
            tok.convert_ids_to_tokens(masked.input_ids.tolist()), masked)


def _tokenised(text: str, text_pair: str | None, model):
    """The model's tokenizer (the bundled model's for None) and the text's ids, (n,)."""
    loaded = load_bert() if model is None else model
    return loaded.tokenizer, encode(text, text_pair, loaded)["input_ids"][0].numpy()


def _layer_params(model, layer) -> tuple[LayerParams, BertParams]:
    """(LayerParams of ``layer``, BertParams) of ``model`` (None = the bundled BERT)."""
    bert = bert_module(model)
    layer, _ = check_layer_head(bert, layer)
    params = bert_params(bert)
    return params.layers[layer], params


# ---------------------------------------------------------------- the checks, once at the edge

def _check_bert(model):
    """The BertModel inside ``model`` (:func:`bert_module`), whose feed-forward is the exact GELU
    that the numpy BERT implements."""
    bert = bert_module(model)
    if getattr(bert.config, "hidden_act", "gelu") != "gelu":
        raise ValueError(f"this forward pass implements BERT's exact GELU; the model uses "
                         f"{bert.config.hidden_act!r}")
    return bert
