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

import functools
from collections.abc import Sequence

import numpy as np
import torch

from bertlib.checks import as_array, items, one_of, whole
from bertlib.hf.ablation import ABLATION_MODES, ablated_weights
from bertlib.hf.attention_interface import eager_attention, register_attention, softmax_weights
from bertlib.hf.corpus import Text, mean_pool, tokenize_batch
from bertlib.hf.loading import bert_module, load_bert
from bertlib.hf.params import bert_params
from bertlib.paper.attention import cosine, head_columns, project_heads

__all__ = ["value_norms", "norm_weighted_maps", "head_importance", "occlusion", "occlusions"]


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
    V = project_heads(x, p.W_V, p.b_V, H)  # (H, n, d_k): v_j^h, the heads' one projection
    if not output_projection:
        return V
    # W_O^h: the d_k rows of W_O that head h's features meet after merge_heads, (H, d_k, d)
    return V @ np.stack([p.W_O[head_columns(h, V.shape[-1])] for h in range(H)])


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


def head_importance(texts: Sequence[Text], mode: str = "uniform", model=None,
                    per_text: bool = False) -> np.ndarray:
    """How much the sentence vector changes when one head is disabled, for every head.

    importance[l, h] = 1 − mean_s cos(v_s, v_s^(l,h)), with v_s the sentence vector of text s
    (the masked mean of :func:`bertlib.hf.corpus.sentence_vectors`, ``mean_pool``, here taken in
    float64: it differs from that function's by float32 rounding only, and the tests hold the
    importance to it within 1e-6) and v_s^(l,h) the same with head h of layer l ablated
    (``mode`` as in :func:`bertlib.hf.ablation.ablated_head`). texts: N sentences (or N pairs).
    Returns (layers, heads); 0 means the head could go without any change.
    per_text=True returns (N, layers, heads) instead: 1 − cos(v_s, v_s^(l,h)) for each text, so
    the spread over the texts can be stated (its mean over axis 0 is the default result).
    Ablating a head of layer l cannot change the layers below it, so each ablated run starts
    from the unchanged hidden states entering layer l and runs only layers l..L−1; the runs of
    all heads of a layer go in one batch (row r ablates its own head), and texts of one length
    go together, so no padding is computed.
    """
    one_of(mode, "mode", ABLATION_MODES)
    model = model or load_bert()
    enc = tokenize_batch(texts, model)
    bert = bert_module(model)
    H = bert.config.num_attention_heads
    cosines = np.zeros((len(texts), len(bert.encoder.layer), H))
    plan = {}  # the layer whose heads are ablated and the head of each row, set per pass
    register_attention(_IMPORTANCE_NAME, _per_row_ablation(plan, mode))
    previous, threads = bert.config._attn_implementation, torch.get_num_threads()
    torch.set_num_threads(1)  # many small passes: one thread is as fast, and immune to a busy CPU
    try:
        lengths = enc["attention_mask"].sum(1)
        for n in lengths.unique().tolist():
            for rows in (lengths == n).nonzero()[:, 0].split(_TEXTS_PER_PASS):
                part = {key: value[rows, :n] for key, value in enc.items()}  # no padding left
                cosines[rows.numpy()] = _importance_of_part(bert, part, plan, previous)
    finally:
        bert.set_attn_implementation(previous)
        torch.set_num_threads(threads)
    return 1.0 - cosines if per_text else 1.0 - cosines.mean(axis=0)


_IMPORTANCE_NAME = "bertlib_head_importance"
_TEXTS_PER_PASS = 32  # x heads = the rows of one batch (384 for 12 heads: tens of MB)


def _per_row_ablation(plan: dict, mode: str):
    """Eager attention in which row r of the batch has head ``plan["heads"][r]`` of layer
    ``plan["layer"]`` ablated (:func:`bertlib.hf.ablation.ablated_weights`, the one rule), as
    :func:`bertlib.hf.ablation.ablated_attention` does for one head of every row."""

    def weights_of(module, scores, attention_mask):
        weights = softmax_weights(module, scores, attention_mask)
        if module.layer_idx != plan.get("layer"):
            return weights
        rows, heads = torch.arange(len(scores)), plan["heads"]
        weights = weights.clone()
        weights[rows, heads] = ablated_weights(module, scores, attention_mask, mode)[:, 0]
        return weights

    return functools.partial(eager_attention, weights_of=weights_of)


def _importance_of_part(bert, part: dict, plan: dict, previous: str) -> np.ndarray:
    """(N, layers, heads) cos(v_s, v_s^(l,h)) for N texts of one length (no padding)."""
    bert.set_attn_implementation(previous)
    with torch.no_grad():
        out = bert(**part, output_hidden_states=True)
    real = part["attention_mask"]  # (N, n) padding flags, all 1: a part holds no padding
    base = mean_pool(out.last_hidden_state.double(), real)  # (N, d) sentence vectors, in float64
    bert.set_attn_implementation(_IMPORTANCE_NAME)
    N, layers = len(base), bert.encoder.layer
    H = bert.config.num_attention_heads
    cosines = np.zeros((N, len(layers), H))
    for layer in range(len(layers)):
        plan.update(layer=layer, heads=torch.arange(H).repeat_interleave(N))  # row r: head r // N
        hidden = out.hidden_states[layer].repeat(H, 1, 1)  # (H · N, n, d)
        with torch.no_grad():
            for block in layers[layer:]:
                hidden = block(hidden, None)
        changed = mean_pool(hidden.double(), real.repeat(H, 1)).reshape(H, N, -1)
        cosines[:, layer] = cosine(base[None], changed).T
    plan.clear()
    return cosines


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
    return occlusions(texts, (position,), model, batch_size)[position]


def occlusions(texts: Sequence[str], positions: Sequence[int | None] = (0, None), model=None,
               batch_size: int = 128) -> dict:
    """:func:`occlusion` at several positions at once, from one set of forward passes.

    positions: positions p (ints) and/or None (the sentence vector), each as in
    :func:`occlusion`. Returns {p: a list of N arrays, each (n,)}: what ``occlusion(texts, p)``
    returns, for each p. The occluded variants run in order of their text's length, so a batch
    holds texts of about one length and computes little padding.
    """
    whole(batch_size, "batch_size", 1)
    positions = items(positions, "positions", "positions (an int or None each)")
    model = model or load_bert()
    enc = tokenize_batch(texts, model)
    lengths = enc["attention_mask"].sum(1).tolist()
    for position in positions:
        if position is not None:
            whole(position, "position", 0, min(lengths) - 1, why="(a piece of the shortest text)")
    order = sorted(range(len(lengths)), key=lengths.__getitem__)  # shortest texts first
    variants = []  # (text, occluded piece or -1 for none)
    for s in order:
        variants += [(s, -1)] + [(s, j) for j in range(lengths[s])]
    outputs = {position: [] for position in positions}
    for start in range(0, len(variants), batch_size):
        chunk = variants[start:start + batch_size]
        last = _occluded_outputs(model, enc, chunk, max(lengths[s] for s, _ in chunk))
        for position, found in outputs.items():
            found.append(last[1] if position is None else last[0][:, position].double().numpy())
    starts = dict(zip(order, np.cumsum([0] + [lengths[s] + 1 for s in order]), strict=False))
    return {position: [1.0 - cosine(hidden[starts[s]], hidden[starts[s] + 1:starts[s] + 1 + n])
                       for s, n in enumerate(lengths)]
            for position, hidden in ((p, np.concatenate(found)) for p, found in outputs.items())}


def _occluded_outputs(model, enc: dict, chunk: list, n: int) -> tuple:
    """(last hidden states (B, n, d), sentence vectors (B, d)) of the variants in ``chunk``
    ((text, occluded piece or -1) each), cut to the first n pieces (the longest text's)."""
    rows = torch.tensor([s for s, _ in chunk])
    ids = enc["input_ids"][rows, :n].clone()
    occluded = torch.tensor([j for _, j in chunk])
    hit = occluded >= 0
    ids[hit.nonzero()[:, 0], occluded[hit]] = model.tokenizer.mask_token_id
    attention_mask = enc["attention_mask"][rows, :n]  # padding flags: 1 for a real piece
    with torch.no_grad():
        out = bert_module(model)(input_ids=ids, attention_mask=attention_mask,
                                 token_type_ids=enc["token_type_ids"][rows, :n])
    return out.last_hidden_state, mean_pool(out.last_hidden_state, attention_mask)
