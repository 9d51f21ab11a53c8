"""BERT's forward pass written from the equations, in numpy, on the real pretrained parameters.

The whole model (Devlin et al. 2019; the encoder of Vaswani et al. 2017), for token ids t_1..t_n:

    X   = LayerNorm(W_word[t] + W_pos[0..n-1] + W_type[seg])               (n, d)
    for each of the L layers:
        M   = MultiHead(X) = Concat(head_0, ..., head_{h-1}) W_O + b_O,
              head_i = softmax(Q_i K_iᵀ / √d_k) V_i, padding keys excluded   (n, d)
        Y   = LayerNorm(X + M)                                              (n, d)
        F   = GELU(Y W_1 + b_1) W_2 + b_2                                   (n, d_ff)->(n, d)
        X   = LayerNorm(Y + F)                                              (n, d)

with LayerNorm(x) = γ (x − mean(x)) / √(var(x) + ε) + β over the feature axis, and BERT's exact
GELU(x) = x · Φ(x) = x/2 · (1 + erf(x/√2)). X holds the hidden states, d is the hidden size, h
the number of heads; A (the attentions) are the softmax weights. Everything is float64 here;
transformers computes in float32, so the two agree to float32 rounding (a few 1e-6;
tests/test_bert.py says how close).

Equation first: the model's functions come first, each one check line and then its equations;
the checks follow, then the types: the parameters the equations take (``LayerParams``,
``BertParams``, every W as (in, out), so the equations read x W) and what ``bert_forward``
returns. Reading the parameters out of a transformers model (cached per model) and running this
forward pass on a sentence are the hf side's work, in ``bertlib.hf.params`` (``bert_params``,
``forward_text``): this module imports nothing but ``checks`` and ``paper``.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import numpy as np
import torch

from bertlib.checks import (
    as_array,
    kind,
    same_shape,
    vocab_ids,
    within_positions,
)
from bertlib.paper.attention import key_mask, multi_head_attention, scaled_dot_product_attention

__all__ = [
    "BertOutput",
    "LayerParams",
    "BertParams",
    "layer_norm",
    "gelu",
    "embed",
    "encoder_layer",
    "bert_forward",
]


def bert_forward(params, input_ids, token_type_ids=None, attention_mask=None) -> BertOutput:
    """X_0 = LayerNorm(W_word[t] + W_pos + W_type[seg]), X_l = EncoderLayer_l(X_{l−1}) for l = 1..L.
    params: BertParams (hf.params.bert_params); input_ids, token_type_ids, attention_mask (0/1,
    0 = padding): (..., n) ints. -> BertOutput(hidden (L+1, ..., n, d), A (L, ..., h, n, n))."""
    _check_forward(params, input_ids, attention_mask)  # a BertParams; flags shaped as the ids
    mask = None if attention_mask is None else key_mask(  # padding keys excluded, for every head
        attention_mask, real_in_each_row=True)[..., None, :, :]  # and query: (..., 1, 1, n) bool
    X = embed(params, input_ids, token_type_ids)  # X_0 = LayerNorm(W_word[t] + W_pos + W_type[seg])
    hidden, attentions = [X], []
    for layer in params.layers:  # X_l = EncoderLayer_l(X_{l−1}), l = 1..L
        X, A = encoder_layer(X, layer, params.h, mask, params.eps)
        hidden.append(X)
        attentions.append(A)
    return BertOutput(np.stack(hidden), np.stack(attentions))


def encoder_layer(X, params: LayerParams, h: int, mask=None, eps: float = 1e-12, attend=None):
    """Y = LayerNorm(X + M), M = MultiHead(X); LayerNorm(Y + F), F = GELU(Y W_1 + b_1) W_2 + b_2
    on X (..., n, d); mask: bool to (..., h, n, n) or None; attend(Q, K, V) on a head, or None."""
    X, p = _check_layer(X, params, mask, attend)  # X (..., n, d); no mask beside a custom attend
    heads_attention = (scaled_dot_product_attention if attend is None  # every head at once,
                       else partial(_per_head, attend))  # or attend on each head alone
    M, A = multi_head_attention(X, p.W_Q, p.W_K, p.W_V, p.W_O, h, mask,  # M = MultiHead(X)
                                (p.b_Q, p.b_K, p.b_V, p.b_O), attention=heads_attention)
    Y = layer_norm(X + M, p.ln1_gamma, p.ln1_beta, eps)  # Add & Norm
    F = gelu(Y @ p.W_1 + p.b_1) @ p.W_2 + p.b_2  # the position-wise feed-forward
    return layer_norm(Y + F, p.ln2_gamma, p.ln2_beta, eps), A  # Add & Norm


def embed(params: BertParams, input_ids, token_type_ids=None) -> np.ndarray:
    """E = LayerNorm(W_word[t] + W_pos[0..n−1] + W_type[seg]).

    input_ids, token_type_ids: (..., n) ints (token types default to 0, "sentence A").
    Returns (..., n, d) float64.
    """
    t, seg, n = _check_ids(params, input_ids, token_type_ids)
    E = params.word[t].astype(np.float64) + params.position[:n] + params.token_type[seg]
    return layer_norm(E, params.emb_gamma, params.emb_beta, params.eps)


def layer_norm(x, gamma, beta, eps: float = 1e-12) -> np.ndarray:
    """LayerNorm(x) = γ (x − μ) / √(σ² + ε) + β, μ and σ² over the last (feature) axis.

    x: (..., d); gamma, beta: (d,). Returns (..., d) float64. BERT uses ε = 1e-12.
    """
    x = _float64(x, "x")
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return gamma * (x - mu) / np.sqrt(var + eps) + beta


def gelu(x) -> np.ndarray:
    """GELU(x) = x · Φ(x) = x/2 · (1 + erf(x / √2)), elementwise, any shape, float64 (BERT's exact
    form, not the tanh approximation)."""
    x = _float64(x, "x")
    return 0.5 * x * (1.0 + _erf(x / np.sqrt(2.0)))


# ---------------------------------------------------------------- the checks, once at the edge

def _float64(x, name: str) -> np.ndarray:
    """``x`` as a float64 array of real numbers (NaN and ±inf allowed), or a clear error."""
    return as_array(x, name, finite=False).astype(np.float64, copy=False)


def _check_forward(params, input_ids, attention_mask) -> None:
    """bert_forward's parameters, a BertParams (a model is read into one on the hf side), and its
    attention_mask, None or shaped as input_ids (its values are key_mask's to check)."""
    kind(params, "params", BertParams, "a BertParams: read a model's with "
         "bertlib.hf.params.bert_params(model)")
    if attention_mask is not None:
        same_shape(np.shape(attention_mask), np.shape(input_ids), ("attention_mask", "input_ids"))


def _check_ids(params: BertParams, input_ids, token_type_ids):
    """embed's (token ids t, token types seg, n): ids inside the vocabulary, n within positions."""
    t = vocab_ids(input_ids, "input_ids", params.word.shape[0])
    n = within_positions(t.shape[-1] if t.ndim else 0, params.position.shape[0])
    seg = np.zeros_like(t) if token_type_ids is None else vocab_ids(
        token_type_ids, "token_type_ids", params.token_type.shape[0])
    same_shape(seg, t, ("token_type_ids", "input_ids"))
    return t, seg, n


def _check_layer(X, params, mask, attend) -> tuple[np.ndarray, LayerParams]:
    """encoder_layer's own arguments checked once: X as (..., n, d) for this layer's d, the
    layer's parameters, no mask beside a custom attend. h, the mask and X's values are
    multi_head_attention's to check."""
    kind(params, "params", LayerParams, "a LayerParams (bert_params(model).layers[i])")
    X = as_array(X, "X", min_ndim=2, shape=(..., None, params.W_Q.shape[0]), layout="(..., n, d)",
                 finite=False, why="(d of this layer)")
    if mask is not None and attend is not None:
        raise ValueError("a custom attend sees one head's Q, K, V and no mask: pass mask=None")
    return X, params


def _per_head(attend, Q: np.ndarray, K: np.ndarray, V: np.ndarray, mask: None
              ) -> tuple[np.ndarray, None]:
    """attend(q, k, v) on every head (and batch item) alone, stacked: ((..., h, n_q, d_v), None),
    no attention maps (mask: None, _check_layer's rule)."""
    lead = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2])
    flat = [np.broadcast_to(x, lead + x.shape[-2:]).reshape(-1, *x.shape[-2:]) for x in (Q, K, V)]
    heads = np.stack([np.asarray(attend(q, k, v), dtype=Q.dtype)
                      for q, k, v in zip(*flat, strict=True)])
    one_head = (Q.shape[-2], V.shape[-1])
    if heads.shape[1:] != one_head:
        raise ValueError(f"attend must return one head's output of shape {one_head} "
                         f"(n_q, d_k), got {heads.shape[1:]}")
    return heads.reshape(lead + one_head), None


def _erf(x: np.ndarray) -> np.ndarray:
    """erf elementwise over a float64 array: torch's vectorised erf (within 1 ulp of math.erf)
    on the array's own memory; ~30x faster than math.erf element by element."""
    return torch.special.erf(torch.as_tensor(x)).numpy()


class BertOutput(NamedTuple):
    """Every layer's output of :func:`bert_forward` for input ids of shape (..., n).

    hidden_states: (L + 1, ..., n, d); index 0 is the embedding output, l the output of layer l.
    attentions: (L, ..., h, n, n); attentions[l, ..., i, q, k] is how much query q attends to
    key k in head i of layer l (0-based). Rows sum to 1; padding keys get weight 0.
    """

    hidden_states: np.ndarray
    attentions: np.ndarray


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
