"""What a head contributes to BERT's output, two ways.

- The size of what each token passes on through a head (Kobayashi, Kuribayashi, Yokoi & Inui
  2020, "Attention is Not Only a Weight: Analyzing Transformers with Vector Norms"): a weight on
  a token whose value vector is short adds little.
- How much the sentence vector changes when the head is switched off (Michel, Levy & Neubig
  2019, "Are Sixteen Heads Really Better than One?"), with :func:`bertlib.hf.ablation.ablated_head`.

And what an input token contributes, for comparing attention-based accounts with the output:
:func:`norm_weighted_maps` (Kobayashi et al.'s ‖Σ_h α f_h(x_j)‖, which rollout can follow through
the layers) and :func:`occlusion` (how much a position's output changes when one input piece is
replaced by [MASK]).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from bertlib.checks import as_array, one_of, whole
from bertlib.hf.ablation import ABLATION_MODES, ablated_head
from bertlib.hf.corpus import Text, mean_pool, tokenize_batch
from bertlib.hf.loading import bert_module, load_bert
from bertlib.hf.params import bert_params
from bertlib.paper.attention import key_mask

__all__ = ["value_norms", "norm_weighted_maps", "head_importance", "occlusion"]


def value_norms(hidden_states, model=None, output_projection: bool = True) -> np.ndarray:
    """Length of what each token can add through each head, per layer (Kobayashi et al. 2020).

    Head h of a layer writes Σ_j α_ij f_h(x_j) into the residual stream, with
    f_h(x_j) = (x_j W_V^h + b_V^h) W_O^h: the token's value vector v_j^h = x_j W_V^h + b_V^h
    (d_k numbers) mapped by the head's slice W_O^h (d_k × d) of the output projection. Weight on
    a token whose ‖f_h(x_j)‖ is small adds little, however large α_ij is.
    output_projection=True returns ‖f_h(x_j)‖ (their measure); False returns ‖v_j^h‖ alone.
    hidden_states: (layers + 1, n, d), the input of each layer (``BertRun.hidden_states``;
    index l is what layer l reads). model: a LoadedBert (default the bundled one); its
    parameters are read by :func:`bertlib.hf.params.bert_params`. Returns (layers, heads, n).
    """
    params, X = _params_and_states(hidden_states, model)
    norms = [np.linalg.norm(_head_outputs(p, x, params.h, output_projection), axis=-1)
             for p, x in zip(params.layers, X[:-1], strict=True)]  # each (H, n)
    return np.stack(norms)


def _params_and_states(hidden_states, model):
    """The model's numpy parameters and the checked (layers + 1, n, d) hidden states."""
    params = bert_params(bert_module(model))
    L, d = len(params.layers), len(params.emb_gamma)
    X = as_array(hidden_states, "hidden_states", shape=(L + 1, None, d),
                 layout="(layers + 1, n, d)")
    return params, X


def _head_outputs(p, x: np.ndarray, H: int, output_projection: bool = True) -> np.ndarray:
    """(H, n, d) f_h(x_j) = (x_j W_V^h + b_V^h) W_O^h, or (H, n, d_k) v_j^h without W_O."""
    d_k = x.shape[-1] // H
    V = (x @ p.W_V + p.b_V).reshape(len(x), H, d_k).transpose(1, 0, 2)  # (H, n, d_k): v_j^h
    return V @ p.W_O.reshape(H, d_k, -1) if output_projection else V


def norm_weighted_maps(hidden_states, attentions, model=None) -> np.ndarray:
    """Kobayashi et al.'s (2020) norm-based maps of every layer, rows summing to 1.

    N_l[i, j] = ‖Σ_h α^h_ij f_h(x_j)‖ / Σ_j' ‖Σ_h α^h_ij' f_h(x_j')‖: how large a vector token j
    actually sends to token i through all the heads of layer l (weight times what is sent),
    instead of the weight α alone. A token with large α but tiny ‖f(x)‖ (a no-op target) gets
    little. hidden_states: (layers + 1, n, d) and attentions: (layers, heads, n, n) of one run
    (``BertRun``); model: a LoadedBert (default the bundled one). Returns (layers, n, n); pass
    it to :func:`bertlib.lab.analysis.attention_rollout` as ``maps[:, None]`` (one "head" per
    layer).
    """
    params, X = _params_and_states(hidden_states, model)
    n = X.shape[1]
    A = as_array(attentions, "attentions", shape=(len(params.layers), params.h, n, n),
                 layout="(layers, heads, n, n)", why="(the run that gave hidden_states)")
    maps = []
    for p, x, a in zip(params.layers, X[:-1], A, strict=True):
        sent = np.einsum("hij,hjd->ijd", a, _head_outputs(p, x, params.h))  # (n, n, d)
        size = np.linalg.norm(sent, axis=-1)
        maps.append(size / size.sum(-1, keepdims=True))
    return np.stack(maps)


def _cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def head_importance(texts: Sequence[Text], mode: str = "uniform", model=None,
                    per_text: bool = False) -> np.ndarray:
    """How much the sentence vector changes when one head is disabled, for every head.

    importance[l, h] = 1 − mean_s cos(v_s, v_s^(l,h)), with v_s the sentence vector of text s
    (:func:`bertlib.hf.corpus.sentence_vectors`) and v_s^(l,h) the same with head h of layer l
    ablated (``mode`` as in :func:`bertlib.hf.ablation.ablated_head`). texts: N sentences (or N
    pairs). Returns (layers, heads); 0 means the head could go without any change.
    per_text=True returns (N, layers, heads) instead: 1 − cos(v_s, v_s^(l,h)) for each text, so
    the spread over the texts can be stated (its mean over axis 0 is the default result).
    Ablating a head of layer l cannot change the layers below it, so each ablated run starts
    from the unchanged hidden states entering layer l and runs only layers l..L−1.
    """
    one_of(mode, "mode", ABLATION_MODES)
    model = model or load_bert()
    enc = tokenize_batch(texts, model)
    bert = bert_module(model)
    with torch.no_grad():
        out = bert(**enc, output_hidden_states=True)
    base = mean_pool(out.last_hidden_state, enc["attention_mask"])
    dtype = out.last_hidden_state.dtype
    # attention.key_mask (True = may attend) as the additive mask eager attention adds to the
    # scores: 0 where a key may be attended, very negative at padding; (B, 1, 1, n)
    additive_mask = torch.as_tensor(np.where(key_mask(enc["attention_mask"].numpy())[:, None],
                                             0.0, torch.finfo(dtype).min)).to(dtype)
    layers = bert.encoder.layer
    cosines = np.zeros((len(texts), len(layers), bert.config.num_attention_heads))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # many tiny passes: one thread is as fast, and immune to a busy CPU
    try:
        for layer, head in np.ndindex(cosines.shape[1:]):
            with ablated_head(layer, head, mode, model), torch.no_grad():
                hidden = out.hidden_states[layer]
                for block in layers[layer:]:
                    hidden = block(hidden, additive_mask)
            changed = mean_pool(hidden, enc["attention_mask"])
            cosines[:, layer, head] = _cosine(base, changed)
    finally:
        torch.set_num_threads(threads)
    return 1.0 - cosines if per_text else 1.0 - cosines.mean(axis=0)


def occlusion(texts: Sequence[str], position: int | None = 0, model=None,
              batch_size: int = 128) -> list[np.ndarray]:
    """How much each input piece matters to one position's output, by occlusion.

    For text s with n pieces and each piece j: replace input piece j by [MASK] (same position and
    token type), run the model, and measure 1 − cos(h_p, h_p^(j)) between the last hidden state
    at ``position`` p (default 0, [CLS]) before and after; with ``position=None``, between the
    sentence vectors (1/n) Σ_i h_i, the model's own output (:func:`bertlib.hf.corpus.mean_pool`).
    An attribution from the output, with no attention weight in it, to compare rollout and raw
    attention with. texts: N sentences. Returns a list of N arrays, each (n,) for that text's
    pieces, [CLS] and [SEP] included. Raises ValueError for a position outside a text's pieces.
    """
    whole(batch_size, "batch_size", 1)
    model = model or load_bert()
    enc = tokenize_batch(texts, model)
    lengths = enc["attention_mask"].sum(1).tolist()
    if position is not None:
        whole(position, "position", 0, min(lengths) - 1, why="(a piece of the shortest text)")
    variants = []  # (text, occluded piece or -1 for none)
    for s, n in enumerate(lengths):
        variants += [(s, -1)] + [(s, j) for j in range(n)]
    outputs = []
    for start in range(0, len(variants), batch_size):
        chunk = variants[start:start + batch_size]
        rows = torch.tensor([s for s, _ in chunk])
        ids = enc["input_ids"][rows].clone()
        occluded = torch.tensor([j for _, j in chunk])
        hit = occluded >= 0
        ids[hit.nonzero()[:, 0], occluded[hit]] = model.tokenizer.mask_token_id
        mask = enc["attention_mask"][rows]
        with torch.no_grad():
            out = bert_module(model)(input_ids=ids, attention_mask=mask,
                                     token_type_ids=enc["token_type_ids"][rows])
        outputs.append(mean_pool(out.last_hidden_state, mask) if position is None
                       else out.last_hidden_state[:, position].double().numpy())
    h = np.concatenate(outputs)
    starts = np.cumsum([0] + [n + 1 for n in lengths])
    return [1.0 - _cosine(h[a], h[a + 1:b]) for a, b in zip(starts[:-1], starts[1:], strict=True)]
