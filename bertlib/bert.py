"""BERT's forward pass written from the equations, in numpy, on the real pretrained weights.

The whole model (Devlin et al. 2019; the encoder of Vaswani et al. 2017), for token ids t_1..t_n:

    E   = LayerNorm(W_word[t] + W_pos[0..n-1] + W_type[s])                 (n, d)
    for each of the L layers:
        A   = MultiHead(E) = Concat(head_0, ..., head_{h-1}) W_O + b_O,
              head_i = softmax(Q_i K_iᵀ / √d_k + padding mask) V_i         (n, d)
        E'  = LayerNorm(E + A)                                              (n, d)
        F   = GELU(E' W_1 + b_1) W_2 + b_2                                  (n, d_ff)->(n, d)
        E   = LayerNorm(E' + F)                                             (n, d)

with LayerNorm(x) = γ (x − mean(x)) / √(var(x) + ε) + β over the feature axis, and BERT's exact
GELU(x) = x · Φ(x) = x/2 · (1 + erf(x/√2)). Everything is float64 here; transformers computes in
float32, so the two agree to float32 rounding (a few 1e-6; tests/test_bert.py says how close).
"""

from __future__ import annotations

import math
import weakref
from typing import NamedTuple

import numpy as np

from bertlib.attention import check_finite, multi_head_attention
from bertlib.models import LoadedBert, encode, load_bert, parameters_state

__all__ = [
    "LayerWeights",
    "BertWeights",
    "BertOutput",
    "bert_weights",
    "layer_norm",
    "gelu",
    "embed",
    "encoder_layer",
    "bert_forward",
    "forward_text",
]


class LayerWeights(NamedTuple):
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


class BertWeights(NamedTuple):
    """All of BERT's encoder parameters.

    word: (vocab, d) float32 (rows are cast to float64 when looked up, to save memory);
    position: (max_positions, d), token_type: (type_vocab, d), emb_gamma, emb_beta: (d,) float64;
    layers: one LayerWeights per layer; h: heads per layer; eps: LayerNorm's ε.
    """

    word: np.ndarray
    position: np.ndarray
    token_type: np.ndarray
    emb_gamma: np.ndarray
    emb_beta: np.ndarray
    layers: tuple[LayerWeights, ...]
    h: int
    eps: float


class BertOutput(NamedTuple):
    """Every layer's output of :func:`bert_forward` for input ids of shape (..., n).

    hidden_states: (L + 1, ..., n, d); index 0 is the embedding output, l the output of layer l.
    attentions: (L, ..., h, n, n); attentions[l, ..., i, q, k] is how much query q attends to
    key k in head i of layer l (0-based). Rows sum to 1; padding keys get weight 0.
    """

    hidden_states: np.ndarray
    attentions: np.ndarray


def _np(param, transpose: bool = False) -> np.ndarray:
    a = param.detach().cpu().numpy().astype(np.float64)
    return a.T.copy() if transpose else a


#: model -> (its parameters_state when read, BertWeights); an entry goes with its model.
_WEIGHTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _weights_of(model) -> BertWeights:
    """The model's weights read once, and read again whenever a parameter has changed."""
    state = parameters_state(model)
    cached = _WEIGHTS.get(model)
    if cached is None or cached[0] != state:
        cached = _WEIGHTS[model] = (state, _read_weights(model))
    return cached[1]


def _read_weights(model) -> BertWeights:
    cfg = model.config
    if getattr(cfg, "hidden_act", "gelu") != "gelu":
        raise ValueError(f"this forward pass implements BERT's exact GELU; the model uses "
                         f"{cfg.hidden_act!r}")
    emb = model.embeddings
    layers = []
    for layer in model.encoder.layer:
        att, out = layer.attention, layer.output
        layers.append(LayerWeights(
            W_Q=_np(att.self.query.weight, True), b_Q=_np(att.self.query.bias),
            W_K=_np(att.self.key.weight, True), b_K=_np(att.self.key.bias),
            W_V=_np(att.self.value.weight, True), b_V=_np(att.self.value.bias),
            W_O=_np(att.output.dense.weight, True), b_O=_np(att.output.dense.bias),
            ln1_gamma=_np(att.output.LayerNorm.weight), ln1_beta=_np(att.output.LayerNorm.bias),
            W_1=_np(layer.intermediate.dense.weight, True), b_1=_np(layer.intermediate.dense.bias),
            W_2=_np(out.dense.weight, True), b_2=_np(out.dense.bias),
            ln2_gamma=_np(out.LayerNorm.weight), ln2_beta=_np(out.LayerNorm.bias),
        ))
    return BertWeights(
        word=emb.word_embeddings.weight.detach().cpu().numpy(),
        position=_np(emb.position_embeddings.weight),
        token_type=_np(emb.token_type_embeddings.weight),
        emb_gamma=_np(emb.LayerNorm.weight), emb_beta=_np(emb.LayerNorm.bias),
        layers=tuple(layers), h=int(cfg.num_attention_heads), eps=float(cfg.layer_norm_eps),
    )


def bert_weights(model=None) -> BertWeights:
    """Read a transformers ``BertModel``'s parameters into numpy (cached per model).

    model: a BertModel, a LoadedBert, or None for the bundled model (:func:`load_bert`).
    torch's Linear stores W as (out, in) and computes x Wᵀ; here every W is stored transposed,
    (in, out), so the equations read x W as in the papers. The cache is read again once any
    parameter changed (see :func:`bertlib.models.parameters_state`), so training or an edited
    weight is always seen.
    """
    model = load_bert() if model is None else model
    if isinstance(model, LoadedBert):
        model = model.model
    if not (hasattr(model, "embeddings") and hasattr(model, "encoder")):
        raise TypeError(
            f"need a transformers BertModel (or LoadedBert), got {type(model).__name__}")
    return _weights_of(model)


def layer_norm(x, gamma, beta, eps: float = 1e-12) -> np.ndarray:
    """LayerNorm(x) = γ (x − μ) / √(σ² + ε) + β, μ and σ² over the last (feature) axis.

    x: (..., d); gamma, beta: (d,). Returns (..., d). BERT uses ε = 1e-12.
    """
    x = np.asarray(x, dtype=np.float64)
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return gamma * (x - mu) / np.sqrt(var + eps) + beta


_erf = np.frompyfunc(math.erf, 1, 1)


def gelu(x) -> np.ndarray:
    """GELU(x) = x · Φ(x) = x/2 · (1 + erf(x / √2)), elementwise, any shape (BERT's exact form,
    not the tanh approximation)."""
    x = np.asarray(x, dtype=np.float64)
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)).astype(np.float64))


def _check_ids(input_ids, name: str, upper: int) -> np.ndarray:
    ids = np.asarray(input_ids)
    if ids.ndim == 0 or ids.shape[-1] == 0:
        raise ValueError(f"{name} must have shape (..., n) with n >= 1, got {ids.shape}")
    if not np.issubdtype(ids.dtype, np.integer):
        raise TypeError(f"{name} must hold whole numbers, got dtype {ids.dtype}")
    if ids.min() < 0 or ids.max() >= upper:
        raise ValueError(f"{name} must be in 0..{upper - 1}, got values {ids.min()}..{ids.max()}")
    return ids


def embed(weights: BertWeights, input_ids, token_type_ids=None) -> np.ndarray:
    """E = LayerNorm(W_word[t] + W_pos[0..n−1] + W_type[s]).

    input_ids, token_type_ids: (..., n) ints (token types default to 0, "sentence A").
    Returns (..., n, d) float64.
    """
    ids = _check_ids(input_ids, "input_ids", weights.word.shape[0])
    n = ids.shape[-1]
    if n > weights.position.shape[0]:
        raise ValueError(f"input has {n} tokens but the model has {weights.position.shape[0]} "
                         "positions")
    types = np.zeros_like(ids) if token_type_ids is None else _check_ids(
        token_type_ids, "token_type_ids", weights.token_type.shape[0])
    if types.shape != ids.shape:
        raise ValueError(f"token_type_ids {types.shape} must have the shape of input_ids "
                         f"{ids.shape}")
    x = weights.word[ids].astype(np.float64) + weights.position[:n] + weights.token_type[types]
    return layer_norm(x, weights.emb_gamma, weights.emb_beta, weights.eps)


def encoder_layer(X, lw: LayerWeights, h: int, mask=None,
                  eps: float = 1e-12) -> tuple[np.ndarray, np.ndarray]:
    """One BERT encoder layer: attention, add & norm, feed-forward, add & norm.

    X: (..., n, d); mask: bool broadcastable to (..., h, n, n), True = may attend (e.g. the key
    padding mask of shape (..., 1, 1, n)); None = all.
    Returns (output (..., n, d), attention weights (..., h, n, n)).
    """
    A, weights = multi_head_attention(X, lw.W_Q, lw.W_K, lw.W_V, lw.W_O, h, mask=mask,
                                      biases=(lw.b_Q, lw.b_K, lw.b_V, lw.b_O))
    X1 = layer_norm(X + A, lw.ln1_gamma, lw.ln1_beta, eps)
    F = gelu(X1 @ lw.W_1 + lw.b_1) @ lw.W_2 + lw.b_2
    return layer_norm(X1 + F, lw.ln2_gamma, lw.ln2_beta, eps), weights


def bert_forward(input_ids, token_type_ids=None, attention_mask=None, model=None) -> BertOutput:
    """BERT's whole encoder on token ids: embeddings, then every layer (see the module docstring).

    input_ids, token_type_ids: (..., n) ints, e.g. (n,) for one input or (batch, n) padded.
    attention_mask: (..., n) of 0/1 or bool, 1 = real token, 0 = padding (keys that nobody may
    attend to); None = all real. model: a BertModel / LoadedBert / BertWeights, None = bundled.
    Returns BertOutput(hidden_states (L+1, ..., n, d), attentions (L, ..., h, n, n)), float64.
    """
    w = model if isinstance(model, BertWeights) else bert_weights(model)
    X = embed(w, input_ids, token_type_ids)
    mask = None
    if attention_mask is not None:
        m = np.asarray(attention_mask)
        if m.shape != X.shape[:-1]:
            raise ValueError(f"attention_mask {m.shape} must have the shape of input_ids "
                             f"{X.shape[:-1]}")
        if not (m.dtype == bool or np.isin(m, (0, 1)).all()):
            raise ValueError("attention_mask must hold 0/1 or bool (1 = real token)")
        if not m.astype(bool).any(axis=-1).all():
            raise ValueError("every input needs at least one real token (attention_mask all 0)")
        mask = m.astype(bool)[..., None, None, :]  # (..., 1 head, 1 query, n keys)
    hidden, attentions = [X], []
    for lw in w.layers:
        X, weights = encoder_layer(X, lw, w.h, mask, w.eps)
        check_finite(X, "hidden state")
        hidden.append(X)
        attentions.append(weights)
    return BertOutput(np.stack(hidden), np.stack(attentions))


def forward_text(text: str, text_pair: str | None = None, model=None) -> BertOutput:
    """:func:`bert_forward` on one sentence (or pair), tokenised by :func:`bertlib.models.encode`.

    Returns hidden_states (L+1, n, d) and attentions (L, h, n, n) for the n word pieces
    (the tokens are ``bertlib.models.run_bert(text, text_pair).tokens``).
    """
    loaded = load_bert() if model is None else model
    enc = encode(text, text_pair, loaded)
    return bert_forward(enc["input_ids"][0].numpy(), enc["token_type_ids"][0].numpy(),
                        model=loaded)
