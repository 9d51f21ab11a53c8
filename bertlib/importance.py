"""What a head contributes to BERT's output, two ways.

- The size of what each token passes on through a head (Kobayashi, Kuribayashi, Yokoi & Inui
  2020, "Attention is Not Only a Weight: Analyzing Transformers with Vector Norms"): a weight on
  a token whose value vector is short adds little.
- How much the sentence vector changes when the head is switched off (Michel, Levy & Neubig
  2019, "Are Sixteen Heads Really Better than One?"), with :func:`bertlib.ablation.ablated_head`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from bertlib.ablation import ABLATION_MODES, ablated_head
from bertlib.bert import bert_params
from bertlib.checks import as_array, one_of
from bertlib.corpus import Text, mean_pool, tokenize_batch
from bertlib.loading import bert_module, load_bert

__all__ = ["value_norms", "head_importance"]


def value_norms(hidden_states, model=None, output_projection: bool = True) -> np.ndarray:
    """Length of what each token can add through each head, per layer (Kobayashi et al. 2020).

    Head h of a layer writes Σ_j α_ij f_h(x_j) into the residual stream, with
    f_h(x_j) = (x_j W_V^h + b_V^h) W_O^h: the token's value vector v_j^h = x_j W_V^h + b_V^h
    (d_k numbers) mapped by the head's slice W_O^h (d_k × d) of the output projection. Weight on
    a token whose ‖f_h(x_j)‖ is small adds little, however large α_ij is.
    output_projection=True returns ‖f_h(x_j)‖ (their measure); False returns ‖v_j^h‖ alone.
    hidden_states: (layers + 1, n, d), the input of each layer (``BertRun.hidden_states``;
    index l is what layer l reads). model: a LoadedBert (default the bundled one); its
    parameters are read by :func:`bertlib.bert.bert_params`. Returns (layers, heads, n).
    """
    params = bert_params(bert_module(model))
    L, d, H = len(params.layers), len(params.emb_gamma), params.h
    X = as_array(hidden_states, "hidden_states", shape=(L + 1, None, d),
                 layout="(layers + 1, n, d)")
    d_k = d // H
    norms = []
    for p, x in zip(params.layers, X[:-1], strict=True):
        V = (x @ p.W_V + p.b_V).reshape(len(x), H, d_k).transpose(1, 0, 2)  # (H, n, d_k): v_j^h
        if output_projection:
            V = V @ p.W_O.reshape(H, d_k, d)  # (H, n, d): f_h(x_j) = v_j^h W_O^h
        norms.append(np.linalg.norm(V, axis=-1))  # (H, n)
    return np.stack(norms)


def _cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def head_importance(texts: Sequence[Text], mode: str = "uniform", model=None) -> np.ndarray:
    """How much the sentence vector changes when one head is disabled, for every head.

    importance[l, h] = 1 − mean_s cos(v_s, v_s^(l,h)), with v_s the sentence vector of text s
    (:func:`bertlib.corpus.sentence_vectors`) and v_s^(l,h) the same with head h of layer l
    ablated (``mode`` as in :func:`bertlib.ablation.ablated_head`). texts: N sentences (or N
    pairs). Returns (layers, heads); 0 means the head could go without any change.
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
    # the additive key mask eager attention expects: 0 for real tokens, very negative for padding
    key_mask = (1.0 - enc["attention_mask"][:, None, None, :].to(dtype)) * torch.finfo(dtype).min
    layers = bert.encoder.layer
    importance = np.zeros((len(layers), bert.config.num_attention_heads))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # many tiny passes: one thread is as fast, and immune to a busy CPU
    try:
        for layer, head in np.ndindex(importance.shape):
            with ablated_head(layer, head, mode, model), torch.no_grad():
                hidden = out.hidden_states[layer]
                for block in layers[layer:]:
                    hidden = block(hidden, key_mask)
            changed = mean_pool(hidden, enc["attention_mask"])
            importance[layer, head] = 1.0 - _cosine(base, changed).mean()
    finally:
        torch.set_num_threads(threads)
    return importance
