"""The BERT family: what ALBERT and DeBERTa change in or around BERT's attention.

- DeBERTa (He et al. 2021): *disentangled* attention. Every token has a content vector and,
  for every pair (i, j), a relative-position vector picked by the bucket δ(i, j). The score is
  content→content + content→position + position→content, scaled by 1/√(3·d_k).
- ALBERT (Lan et al. 2020): a factorised embedding (V×E + E×H instead of V×H) and one set of
  layer parameters used by every layer (cross-layer sharing). Parameter-count formulas for BERT
  and ALBERT live here too, so a notebook can check them against ``transformers``' own counts.

Symbols: X holds hidden states, one sequence ``(n, d)``; relative-position embeddings are
``(2k, d)``, one row per bucket; projections are ``(d, d_k)``. The parameter counts use the
ALBERT paper's letters: V vocabulary, E embedding size, H hidden size (d above), L layers,
I feed-forward size.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Literal, NamedTuple

import numpy as np
import torch
from torch import nn

from bertlib.checks import as_array, has_shape, one_of, vocab_ids, whole
from bertlib.paper.attention import attention_scale, cosine, softmax

__all__ = [
    "relative_bucket",
    "relative_positions",
    "DisentangledAttention",
    "disentangled_attention",
    "EmbeddingCount",
    "factorised_embedding_parameters",
    "factorised_embedding",
    "ParameterCount",
    "layer_parameter_count",
    "bert_parameter_count",
    "albert_parameter_count",
    "config_parameter_count",
    "meta_model",
    "LayerStack",
    "consecutive_cosine",
]


def relative_bucket(i_minus_j, k: int) -> np.ndarray:
    """DeBERTa's relative-distance bucket δ for offsets i − j (any shape, whole numbers).

    δ(i, j) = 0 if i − j ≤ −k;  2k − 1 if i − j ≥ k;  i − j + k otherwise,
    i.e. clip(i − j + k, 0, 2k − 1). Returns an int array of the input's shape, values in [0, 2k).
    """
    k = whole(k, "k", 1)
    offsets = np.asarray(i_minus_j)
    if not np.issubdtype(offsets.dtype, np.integer):
        raise TypeError(f"i - j must be whole numbers (integer dtype), got dtype {offsets.dtype}")
    return np.clip(offsets + k, 0, 2 * k - 1).astype(np.int64)


def relative_positions(n: int, k: int) -> np.ndarray:
    """The (n, n) int matrix δ(i, j), query i and key j, values in [0, 2k); see relative_bucket."""
    n = whole(n, "n", 0)
    idx = np.arange(n)
    return relative_bucket(idx[:, None] - idx[None, :], k)


class DisentangledAttention(NamedTuple):
    """Result of :func:`disentangled_attention` for one sequence of n tokens.

    output: (n, d_v).  weights: (n, n), rows sum to 1.  scores: (n, n), (c2c + c2p + p2c) · scale.
    c2c, c2p, p2c: (n, n) unscaled score terms.  scale: 1/√(3·d_k).
    """

    output: np.ndarray
    weights: np.ndarray
    scores: np.ndarray
    c2c: np.ndarray
    c2p: np.ndarray
    p2c: np.ndarray
    scale: float


def disentangled_attention(X, P_rel, W_qc, W_kc, W_qr, W_kr, k: int, W_v=None,
                           p2c_delta: Literal["ji", "ij"] = "ji") -> DisentangledAttention:
    """DeBERTa's disentangled self-attention for one head (He et al. 2021, eq. 4).

    Q_c = X W_qc, K_c = X W_kc (content);  Q_r = P_rel W_qr, K_r = P_rel W_kr (relative positions)
        c2c[i, j] = Q_c[i] · K_c[j]
        c2p[i, j] = Q_c[i] · K_r[δ(i, j)]
        p2c[i, j] = K_c[j] · Q_r[δ(j, i)]         (p2c_delta="ji", the paper's formula)
                  = K_c[j] · Q_r[δ(i, j)]         (p2c_delta="ij", what transformers computes)
        weights = softmax((c2c + c2p + p2c) / √(3·d_k)),  output = weights · V,  V = X W_v.
    Position→position is left out, as in the paper.

    X: (n, d) token states.  P_rel: (2k, d), row m embeds bucket m of δ.
    W_qc, W_kc, W_qr, W_kr: (d, d_k) (d_k = d in the paper's single-head notation).
    W_v: (d, d_v); None means V = X.  k: the maximum relative distance, a whole number >= 1.
    Returns a :class:`DisentangledAttention` (output, weights, scores and the three terms).
    """
    one_of(p2c_delta, "p2c_delta", ("ji", "ij"))  # the paper's, or transformers'
    X, P_rel, (W_qc, W_kc, W_qr, W_kr), W_v = _check_disentangled(
        X, P_rel, (W_qc, W_kc, W_qr, W_kr), W_v, whole(k, "k", 1))
    n, d_k = X.shape[0], W_qc.shape[1]
    Q_c, K_c = X @ W_qc, X @ W_kc
    Q_r, K_r = P_rel @ W_qr, P_rel @ W_kr
    delta = relative_positions(n, k)  # delta[i, j] = δ(i, j)
    rows = np.arange(n)[:, None]
    c2c = Q_c @ K_c.T
    c2p = (Q_c @ K_r.T)[rows, delta]  # (n, 2k) table, read at δ(i, j) in row i
    p2c_index = delta.T if p2c_delta == "ji" else delta
    p2c = (K_c @ Q_r.T)[rows.T, p2c_index]  # (n, 2k) table of keys j, read at δ(j, i) or δ(i, j)
    scale = np.float64(attention_scale(3 * d_k))  # DeBERTa's 1/√(3 d_k), float64 as before
    scores = (c2c + c2p + p2c) * scale
    weights = softmax(scores, axis=-1)
    return DisentangledAttention(weights @ (X @ W_v), weights, scores, c2c, c2p, p2c, scale)


def _check_disentangled(X, P_rel, Ws, W_v, k: int):
    """disentangled_attention's arrays checked once: X (n, d), P_rel (2k, d), the four
    projections (d, d_k) of one shape, W_v (d, d_v) (None = the identity)."""
    X = as_array(X, "X", 2, layout="(one sequence of shape (n, d))")
    n, d = X.shape
    P_rel = as_array(P_rel, "P_rel", shape=(2 * k, d), layout="(2k, d)",
                     why=f"for k={k} and X of shape {X.shape}")
    names = ("W_qc", "W_kc", "W_qr", "W_kr", "W_v")
    W = [np.eye(d) if w is None else as_array(
            w, name, shape=(d, None), layout="(d, d_v)" if name == "W_v" else "(d, d_k)",
            why="(d from X's last axis)") for w, name in zip((*Ws, W_v), names, strict=True)]
    if len({w.shape for w in W[:4]}) != 1:
        shapes = ", ".join(f"{name} {w.shape}" for name, w in zip(names, W[:4], strict=False))
        raise ValueError(f"W_qc, W_kc, W_qr, W_kr must all have the same shape (d, d_k): {shapes}")
    return X, P_rel, tuple(W[:4]), W[4]


class EmbeddingCount(NamedTuple):
    """Word-embedding parameters: ``full`` = V·H (BERT), ``factorised`` = V·E + E·H (ALBERT)."""

    full: int
    factorised: int


def factorised_embedding_parameters(V: int, E: int, H: int) -> EmbeddingCount:
    """Parameters of a V×H embedding table against ALBERT's V×E table followed by an E×H map.

    Warns (UserWarning) when the factorisation saves nothing, which is always so when E > H:
    V·E + E·H >= V·H exactly when E >= V·H / (V + H).
    """
    V, E, H = (whole(x, name, 1) for x, name in ((V, "V"), (E, "E"), (H, "H")))
    full, factorised = V * H, V * E + E * H
    if factorised >= full:
        warnings.warn(
            f"embedding size E={E} is not small enough for hidden size H={H}: V×E + E×H = "
            f"{factorised:,} >= V×H = {full:,}, so factorising adds parameters; it saves only "
            f"when E < V·H/(V+H) = {V * H / (V + H):.1f} (ALBERT uses E much smaller than H)",
            UserWarning, stacklevel=2)
    return EmbeddingCount(full, factorised)


def factorised_embedding(token_ids, word_table, W_EH) -> np.ndarray:
    """ALBERT's factorised word embedding: look up E numbers per token, then map them to H.

    token_ids: (n,) whole numbers in [0, V).  word_table: (V, E).  W_EH: (E, H).
    Returns (n, H) = word_table[token_ids] @ W_EH. (ALBERT's own map also has a bias of size H.)
    """
    word_table = as_array(word_table, "word_table", 2, layout="(V, E)")
    W_EH = as_array(W_EH, "W_EH", shape=(word_table.shape[1], None), layout="(E, H)",
                    why="(E shared with word_table (V, E))")
    ids = vocab_ids(token_ids, "token_ids", word_table.shape[0], 1, "a 1-D array")
    return word_table[ids] @ W_EH


class ParameterCount(NamedTuple):
    """Parameters by part: embeddings (tables + LayerNorm), projection (ALBERT's E→H map),
    layers (all distinct encoder layers), pooler. ``total`` is their sum."""

    embeddings: int
    projection: int
    layers: int
    pooler: int

    @property
    def total(self) -> int:
        return self.embeddings + self.projection + self.layers + self.pooler


def layer_parameter_count(H: int, I: int) -> int:
    """One BERT/ALBERT encoder layer: 4(H² + H) attention (Q, K, V, output) + 2H LayerNorm
    + (H·I + I) + (I·H + H) feed-forward + 2H LayerNorm = 4H² + 2HI + 9H + I."""
    H, I = whole(H, "H", 1), whole(I, "I", 1)
    return 4 * H * H + 2 * H * I + 9 * H + I


def bert_parameter_count(V: int, H: int, L: int, I: int, P: int = 512, T: int = 2,
                         pooler: bool = True) -> ParameterCount:
    """BertModel (also RobertaModel): embeddings (V + P + T)·H + 2H, L layers of
    :func:`layer_parameter_count`, pooler H² + H. V vocabulary, P positions, T token types."""
    V, H, L, P = (whole(x, name, 1) for x, name in ((V, "V"), (H, "H"), (L, "L"), (P, "P")))
    T = whole(T, "T", 0)
    return ParameterCount((V + P + T) * H + 2 * H, 0, L * layer_parameter_count(H, I),
                          H * H + H if pooler else 0)


def albert_parameter_count(V: int, E: int, H: int, L: int, I: int, P: int = 512, T: int = 2,
                           groups: int = 1, pooler: bool = True) -> ParameterCount:
    """AlbertModel: embeddings (V + P + T)·E + 2E, projection E·H + H, ``groups`` distinct layers
    (1 = all L layers share one set of parameters; L = no sharing), pooler H² + H."""
    V, E, H, L, P = (whole(x, name, 1)
                     for x, name in ((V, "V"), (E, "E"), (H, "H"), (L, "L"), (P, "P")))
    T = whole(T, "T", 0)
    groups = whole(groups, "groups", 1, L, why=f"(1..L={L}: 1 = full sharing, L = none)")
    factorised_embedding_parameters(V, E, H)  # warns, with the reason, if E saves nothing
    return ParameterCount((V + P + T) * E + 2 * E, E * H + H,
                          groups * layer_parameter_count(H, I), H * H + H if pooler else 0)


def config_parameter_count(config) -> ParameterCount:
    """The formula count for a transformers BertConfig, RobertaConfig or AlbertConfig
    (the model with its pooler, as ``AutoModel.from_config`` builds it)."""
    kind = one_of(getattr(config, "model_type", None),
                  "config.model_type (a BertConfig, RobertaConfig or AlbertConfig)",
                  ("bert", "roberta", "albert"))
    c = config
    if kind in ("bert", "roberta"):
        return bert_parameter_count(c.vocab_size, c.hidden_size, c.num_hidden_layers,
                                    c.intermediate_size, c.max_position_embeddings,
                                    c.type_vocab_size)
    whole(c.inner_group_num, "inner_group_num", 1, 1, why="(only 1 is counted here)")
    return albert_parameter_count(c.vocab_size, c.embedding_size, c.hidden_size,
                                  c.num_hidden_layers, c.intermediate_size,
                                  c.max_position_embeddings, c.type_vocab_size,
                                  c.num_hidden_groups)


def meta_model(config) -> nn.Module:
    """``AutoModel.from_config(config)`` built on torch's meta device: the real module tree
    and parameter shapes, with no memory for the values (count with ``.num_parameters()``)."""
    from transformers import AutoModel

    with torch.device("meta"):
        return AutoModel.from_config(config)


class LayerStack(nn.Module):
    """L encoder layers drawn from ``layers``, ALBERT-style.

    Layer i (0-based) uses ``layers[int(i / (L / G))]`` with G = len(layers), as ALBERT's
    encoder does: G = 1 shares one layer's parameters across all L layers; G = L shares nothing.
    Each layer maps hidden states (batch, n, H) -> (batch, n, H) (e.g. transformers'
    ``AlbertLayer`` or ``BertLayer``). ``parameters()`` counts a shared layer once.
    forward(hidden (batch, n, H), attention_mask=None) -> (L + 1, batch, n, H): the input and
    every layer's output; attention_mask is handed to each layer as it is (for a transformers
    layer, its additive float mask).
    """

    def __init__(self, layers: Sequence[nn.Module], num_layers: int):
        super().__init__()
        num_layers = whole(num_layers, "num_layers", 1)
        whole(len(layers), "the number of distinct layers", 1, num_layers,
              why=f"(num_layers={num_layers})")
        self.layers = nn.ModuleList(layers)
        self.num_layers = num_layers

    def forward(self, hidden: torch.Tensor, attention_mask: torch.Tensor | None = None):
        has_shape(hidden, "hidden", (None, None, None), "(batch, n, H)")
        states = [hidden]
        G = len(self.layers)
        for i in range(self.num_layers):
            states.append(self.layers[int(i / (self.num_layers / G))](states[-1], attention_mask))
        return torch.stack(states)


def consecutive_cosine(hidden_states) -> np.ndarray:
    """Mean cosine similarity between each layer's token vectors and the previous layer's.

    hidden_states: (L + 1, n, H) (e.g. LayerStack output for one sequence).
    Returns (L,): entry l = mean over tokens t of cos(X_l[t], X_{l+1}[t]).
    """
    X = as_array(hidden_states, "hidden_states", 3, layout="(L + 1, n, H)").astype(np.float64)
    whole(X.shape[0] - 1, "L (hidden_states has shape (L + 1, n, H))", 1)
    cos = cosine(X[:-1], X[1:], ("hidden_states[:-1]", "hidden_states[1:]"))  # (L, n)
    return cos.mean(axis=-1)
