"""Causal tests of how notebook 09's tiny BERT does agreement: ablation of heads together and
activation patching (the linear probe, which reads what is decodable rather than what is used, is
:mod:`bertlib.tiny.linear_probe`).

- :func:`head_groups` / :func:`ablation_grid`: every single head, every pair of heads of one
  layer and every whole layer switched off at once (as :func:`bertlib.hf.ablation.ablated_heads`
  does; a batched twin, tested equal), the agreement accuracy per "construction · role" (Michel
  et al. 2019 ablate heads; pairs show heads that stand in for each other, which one-at-a-time
  ablation cannot); :func:`cross_layer_groups`:
  every pair of heads of two layers, switched off together (a route across layers needs both);
  :func:`agreement_correct`: the agreement test alone; :func:`ablated_correct`: the same for
  every group at once (one batched forward pass, states shared by groups computed once).
  :func:`mean_ablation_drops`: the same with each head's output replaced by its mean over the
  sentences (:func:`head_means`) instead of 0, the control for zero ablation's side effect.
- :func:`minimal_pairs` / :func:`patch_flip`: each row of a sentence set beside the same sentence
  with its subject's number flipped (and every verb that agrees with it); the hidden state at one
  position after one layer is copied from the flipped sentence into the original, and we count
  how often the masked verb's preference flips (Vig et al. 2020; Meng et al. 2022 call it
  patching). A state that carries the number flips the verb; one that does not, leaves it.
  :func:`patch_flips`: every layer and position at once, its fast twin.
  :func:`between_positions`: every word between a subject and its verb, by its offset from the
  subject ("subject + 2"), beside the named :data:`POSITIONS`: a relay can pass through any.
  :func:`head_patch_flips`: one head's output alone copied at one position, for each head of a
  layer: which head carries the number there (a head-level causal test, where ablation only says
  a head is needed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from itertools import combinations

import numpy as np
import torch

from bertlib.checks import has_shape, one_of, same_shape, whole
from bertlib.hf.attention_interface import eager_attention, merge_heads_torch, project_heads_torch
from bertlib.paper.attention import head_columns
from bertlib.tiny import grammar
from bertlib.tiny.agreement import SentenceSet, agreement_table, hidden_states, make_sentence_set

__all__ = ["head_groups", "cross_layer_groups", "ablation_grid", "ablation_table", "ablation_drops",
           "ablated_correct", "agreement_correct", "head_means", "mean_ablation_drops",
           "minimal_pairs", "patch_flip", "patch_flips", "head_patch_flips", "POSITIONS",
           "between_positions"]


def head_groups(layers: int, heads: int) -> list[tuple[str, list[tuple[int, int]]]]:
    """[(label, [(layer, head), ...]), ...]: each head ("L0H1"), each pair of heads of one layer
    ("L0H1+H3") and each whole layer ("L0 all")."""
    whole(layers, "layers", 1)
    whole(heads, "heads", 1)
    groups = [(f"L{l}H{h}", [(l, h)]) for l in range(layers) for h in range(heads)]
    groups += [(f"L{l}H{a}+H{b}", [(l, a), (l, b)]) for l in range(layers)
               for a, b in combinations(range(heads), 2)]
    return groups + [(f"L{l} all", [(l, h) for h in range(heads)]) for l in range(layers)]


def cross_layer_groups(layers: int, heads: int) -> list[tuple[str, list[tuple[int, int]]]]:
    """[(label, [(layer, head), (later layer, head)]), ...]: every pair of heads of two different
    layers ("L0H1+L1H3"), the pairs a route across layers (a relay) needs switched off together."""
    whole(layers, "layers", 1)
    whole(heads, "heads", 1)
    return [(f"L{a}H{i}+L{b}H{j}", [(a, i), (b, j)]) for a, b in combinations(range(layers), 2)
            for i in range(heads) for j in range(heads)]


def agreement_correct(model, sentence_set: SentenceSet) -> np.ndarray:
    """(R,) bool: the masked verb's right form is more probable than the wrong one (the
    "correct" of :func:`bertlib.tiny.agreement.measure_on`, cheaper: no attention maps, no
    gradients, one
    forward pass per sentence length without its padding, the output layer at the verb only)."""
    out = np.zeros(len(sentence_set.ids), dtype=bool)
    with torch.no_grad():
        for n in np.unique(sentence_set.length):
            rows = np.flatnonzero(sentence_set.length == n)
            hidden = model.bert(input_ids=torch.as_tensor(sentence_set.ids[rows, :n]),
                                attention_mask=torch.as_tensor(
                                    sentence_set.attention_mask[rows, :n]))[0]
            at = model.cls(hidden[torch.arange(len(rows)),
                                  torch.as_tensor(sentence_set.verb[rows])])
            r = torch.arange(len(rows))
            out[rows] = (at[r, sentence_set.right[rows]] > at[r, sentence_set.wrong[rows]]).numpy()
    return out


def ablated_correct(model, sentence_set: SentenceSet, groups, means=None) -> np.ndarray:
    """(G + 1, R) bool: :func:`agreement_correct` with nothing switched off (row 0) and with each
    group of heads off (row g + 1), all groups in one batched forward pass per sentence length.

    groups: as :func:`head_groups` or :func:`cross_layer_groups` return. A head that is off
    outputs 0 (attention 0, as :func:`bertlib.hf.ablation.ablated_heads`), or its mean output when
    ``means`` ((L, d) as :func:`head_means` returns) is given. The fast twin of switching each
    group off in turn and calling :func:`agreement_correct` (tested equal): a group that leaves
    the layers below untouched reuses their output instead of recomputing it."""
    cfg = model.config
    L, d, width = cfg.num_hidden_layers, cfg.hidden_size, cfg.hidden_size // cfg.num_attention_heads
    head_on = torch.ones(len(groups) + 1, L, d)  # (G + 1, L, d): 1 = a head's columns on, 0 = off
    for g, (_, heads) in enumerate(groups, 1):
        for layer, h in heads:
            head_on[g, whole(layer, "layer", 0, L - 1), head_columns(h, width)] = 0
    fill = (1 - head_on) * (0 if means is None else torch.as_tensor(means, dtype=torch.float32))
    out = np.zeros((len(head_on), len(sentence_set.ids)), dtype=bool)
    with torch.inference_mode():
        for n in np.unique(sentence_set.length):
            rows = np.flatnonzero(sentence_set.length == n)
            out[:, rows] = _correct_switched_off(model, sentence_set, rows, n, head_on, fill)
    return out


def _correct_switched_off(model, sentence_set, rows, n, head_on, fill) -> np.ndarray:
    """ablated_correct on the rows of one length n (no padding): layer by layer, each distinct
    state (the same heads off in this layer and below) computed once, and the heads' outputs of
    a layer once per distinct state below it (switching heads off changes only what follows
    them); the last layer only at the masked verb, the one position the verdict reads."""
    R, layers = len(rows), model.bert.encoder.layer
    verb = torch.as_tensor(sentence_set.verb[rows])
    ids = torch.as_tensor(sentence_set.ids[rows, :n])
    hidden = model.bert.embeddings(input_ids=ids)[None]  # (1, R, n, d)
    state = torch.zeros(len(head_on), dtype=torch.long)  # group -> its row block in hidden
    for l, layer in enumerate(layers):
        below = state  # group -> its state after the layers below
        state, first = _distinct(torch.cat([below[:, None].float(), head_on[:, l]], 1))
        on, f = (t[first, l].repeat_interleave(R, 0) for t in (head_on, fill))  # (U·R, d)
        x = hidden[below[first]].flatten(0, 1)  # (U·R, n, d)
        if l == len(layers) - 1:
            hidden = _layer_at(layer, x, verb.repeat(len(first)), on, f).view(len(first), R, -1)
            break
        # no padding: no attention mask, as the intact model's ones-mask adds 0; B below
        heads = layer.attention.self(hidden.flatten(0, 1))[0].view(hidden.shape)  # (B, R, n, d)
        a = layer.attention.output(heads[below[first]].flatten(0, 1) * on[:, None] + f[:, None], x)
        hidden = layer.output(layer.intermediate(a), a).view(len(first), R, n, -1)  # feed-forward
    r = torch.arange(R)
    at = model.cls(hidden[state])  # (G + 1, R, V): the last layer's output at the verb
    return (at[:, r, sentence_set.right[rows]] > at[:, r, sentence_set.wrong[rows]]).numpy()


def _layer_at(layer, x, pos, head_on, fill):
    """A transformers BertLayer's output at one position per row: x (B, n, d), pos (B,) ->
    (B, d). The layer's own parts for that position's query only: its projections into heads
    (project_heads_torch), the one eager attention (eager_attention: softmax(q Kᵀ · s) V per
    head), the heads side by side (merge_heads_torch), output projection, residual and LayerNorm,
    feed-forward; each head's output times ``head_on`` plus ``fill`` (B, d) before the output
    projection."""
    sa, r = layer.attention.self, torch.arange(len(x))
    q = project_heads_torch(x[r, pos, None], sa.query, sa.num_attention_heads)  # (B, h, 1, d_k)
    k, v = (project_heads_torch(x, m, sa.num_attention_heads) for m in (sa.key, sa.value))
    heads = merge_heads_torch(eager_attention(sa, q, k, v, None)[0])[:, 0]  # (B, 1, d) -> (B, d)
    a = layer.attention.output(heads * head_on + fill, x[r, pos])
    return layer.output(layer.intermediate(a), a)


def _distinct(key):
    """Rows of ``key`` (G, k): each row's distinct value's index, and each value's first row."""
    _, index = torch.unique(key, dim=0, return_inverse=True)
    first = [int(torch.nonzero(index == u)[0]) for u in range(int(index.max()) + 1)]
    return index, first


def ablation_drops(model, sentence_set: SentenceSet, groups) -> tuple[float, np.ndarray]:
    """Agreement accuracy over all of ``sentence_set``'s rows, intact and with each group of heads
    switched off (attention 0). groups: as :func:`head_groups` or :func:`cross_layer_groups`
    return. Returns (intact accuracy, (G,) accuracy drop: intact minus switched off)."""
    acc = ablated_correct(model, sentence_set, groups).mean(1)
    return float(acc[0]), acc[0] - acc[1:]


def ablation_grid(model, sentence_set: SentenceSet, groups
                  ) -> tuple[list[str], list[str], np.ndarray]:
    """Agreement accuracy with each group of heads switched off (attention 0).

    groups: as :func:`head_groups` or :func:`cross_layer_groups` return. Returns (group labels
    (G,), row names (K,) as in :func:`bertlib.tiny.agreement.agreement_table`, accuracy (G + 1, K));
    row 0 is nothing switched off.
    """
    names, acc = ablation_table(sentence_set, ablated_correct(model, sentence_set, groups))
    return ["none"] + [label for label, _ in groups], names, acc


def ablation_table(sentence_set: SentenceSet, correct) -> tuple[list[str], np.ndarray]:
    """:func:`ablation_grid` from :func:`ablated_correct`'s (G + 1, R) verdicts, already computed
    (so one pass serves the grid and any subset of rows). Returns (row names (K,), accuracy
    (G + 1, K))."""
    correct = np.asarray(correct, dtype=bool)
    whole(correct.ndim, "the number of dimensions of correct (groups, rows)", 2, 2)
    tables = [agreement_table(sentence_set, c) for c in correct]
    names = list(tables[0])
    return names, np.array([[t[n]["model"] for n in names] for t in tables])


def _head_outputs(model, layer: int):
    """The module whose input is ``layer``'s heads' outputs side by side (before W_O)."""
    return model.bert.encoder.layer[layer].attention.output.dense


def head_means(model, sentence_set: SentenceSet) -> np.ndarray:
    """(L, d): each layer's heads' outputs before the output projection (head h in columns
    h·d/H .. (h + 1)·d/H − 1), averaged over every token of the set's sentences."""
    layers = range(model.config.num_hidden_layers)
    sums = torch.zeros(len(layers), model.config.hidden_size)

    def capture(layer):
        def hook(module, args):
            sums[layer] += args[0].sum((0, 1))
        return hook

    handles = [_head_outputs(model, k).register_forward_pre_hook(capture(k)) for k in layers]
    try:
        agreement_correct(model, sentence_set)  # each sentence unpadded: only real tokens
    finally:
        for handle in handles:
            handle.remove()
    return (sums / float(sentence_set.length.sum())).numpy()


def mean_ablation_drops(model, sentence_set: SentenceSet, groups, means=None
                        ) -> tuple[float, np.ndarray]:
    """As :func:`ablation_drops`, but each group's heads output their mean (``means``: (L, d) as
    :func:`head_means` returns, computed on ``sentence_set`` when None) instead of 0: what is
    left of a drop once a head keeps its average contribution. Returns (intact accuracy, (G,)
    drops)."""
    means = head_means(model, sentence_set) if means is None else means
    has_shape(means, "means", (model.config.num_hidden_layers, model.config.hidden_size), "(L, d)")
    acc = ablated_correct(model, sentence_set, groups, means).mean(1)
    return float(acc[0]), acc[0] - acc[1:]


def _flipped(s: grammar.Sentence, verb: grammar.Verb) -> grammar.Sentence:
    """``s`` keeping only ``verb``, with its subject's number flipped, and every verb of the
    same subject (so the flipped sentence is grammatical too)."""
    plural = {**grammar.NOUNS, **{p: n for n, p in grammar.NOUNS.items()}}
    words = list(s.words)
    words[verb.subject] = plural[words[verb.subject]]
    for v in s.verbs:
        if v.subject == verb.subject:
            words[v.position] = grammar.other_form(words[v.position])
    k = s.nouns.index(verb.subject)
    numbers = tuple(not p if i == k else p for i, p in enumerate(s.noun_plural))
    return replace(s, words=tuple(words), verbs=(replace(verb, plural=not verb.plural),),
                   noun_plural=numbers)


def minimal_pairs(tokenizer, sentences: Sequence[grammar.Sentence]
                  ) -> tuple[SentenceSet, SentenceSet]:
    """Two sentence sets with one row per (sentence, verb): the sentence, and the same sentence
    with that verb's subject flipped in number (same positions, same length)."""
    one = [(replace(s, verbs=(v,)), _flipped(s, v)) for s in sentences for v in s.verbs]
    return tuple(make_sentence_set(tokenizer, [pair[k] for pair in one]) for k in (0, 1))


#: Where :func:`patch_flip` can patch, as a function of a sentence set (-> (R,) positions).
POSITIONS = {"subject": lambda p: p.subject, "after subject": lambda p: p.subject + 1,
             "before verb": lambda p: p.verb - 1, "verb": lambda p: p.verb}


def between_positions(sentence_set: SentenceSet, first: int = 2) -> dict:
    """{"subject + k": position function} for k = first .. (the widest gap between a verb and its
    subject in ``sentence_set``) - 1: the word k after the subject, as the functions of
    :data:`POSITIONS` (a sentence set -> (R,) positions), -1 in a row where that word is not
    strictly between the subject and the verb (there it is absent: nothing is patched, no flip).
    With POSITIONS, every position between a subject and its verb can be patched
    (``positions=`` of :func:`patch_flip`, :func:`patch_flips`, :func:`head_patch_flips`)."""
    whole(first, "first", 1)
    gap = int((sentence_set.verb - sentence_set.subject).max(initial=0))
    return {f"subject + {k}": (lambda p, k=k: np.where(p.subject + k < p.verb, p.subject + k, -1))
            for k in range(first, gap)}


def _check_where(sentence_set: SentenceSet, where: str, positions) -> np.ndarray:
    """(R,) positions of ``where`` (a key of ``positions``, POSITIONS when None); -1: absent."""
    positions = POSITIONS if positions is None else positions
    one_of(where, "where", list(positions))
    return np.asarray(positions[where](sentence_set))


def _layer_module(model, layer: int):
    return model.bert.embeddings if layer == 0 else model.bert.encoder.layer[layer - 1]


def patch_flip(model, original: SentenceSet, flipped: SentenceSet, layer: int, where: str,
               donor_states=None, positions=None) -> np.ndarray:
    """Copy the hidden state at position ``where`` (a key of ``positions``: POSITIONS when None,
    or e.g. POSITIONS and :func:`between_positions` together) after ``layer`` (0 = the
    embeddings, l + 1 = layer l's output) from ``flipped`` into ``original``, row by row.
    donor_states: :func:`bertlib.tiny.agreement.hidden_states` of ``flipped`` when already
    computed.
    Returns (R,) bool: the masked verb now prefers the form that is wrong for ``original``
    (False in a row where the position is absent, -1)."""
    whole(layer, "layer", 0, model.config.num_hidden_layers)
    pos = _check_where(original, where, positions)
    rows, present = np.flatnonzero(pos >= 0), pos >= 0
    pos = pos[rows]
    states = hidden_states(model, flipped) if donor_states is None else donor_states
    donor = torch.as_tensor(states[rows, layer, pos])  # (R, d)

    def swap(module, args, output):
        hidden = (output[0] if isinstance(output, tuple) else output).clone()
        hidden[torch.as_tensor(rows), torch.as_tensor(pos)] = donor
        return (hidden, *output[1:]) if isinstance(output, tuple) else hidden

    handle = _layer_module(model, layer).register_forward_hook(swap)
    return _prefers_wrong(model, original, handle) & present


def _prefers_wrong(model, original: SentenceSet, handle) -> np.ndarray:
    """(R,) bool: with the hook behind ``handle`` in place (removed afterwards), does each row's
    masked verb prefer the form that is wrong for ``original``? One batch: a hook's row indices
    are the set's."""
    try:
        with torch.inference_mode():
            logits = model(input_ids=torch.as_tensor(original.ids),
                           attention_mask=torch.as_tensor(original.attention_mask)).logits
    finally:
        handle.remove()
    rows = np.arange(len(original.ids))
    at_verb = logits[torch.as_tensor(rows), torch.as_tensor(original.verb)]  # (R, V)
    return (at_verb[rows, original.right] < at_verb[rows, original.wrong]).numpy()


def patch_flips(model, original: SentenceSet, flipped: SentenceSet, positions=None) -> np.ndarray:
    """(L + 1, P, R) bool: :func:`patch_flip` after every layer (0 = the embeddings) at each of
    the P positions of ``positions`` (POSITIONS when None; in its order), all at once (False
    where a position is absent). Its fast twin (tested equal): the rows of one sentence length
    run without their padding, each set's states are computed once, and a patched state runs
    only through the layers above it, the last at the masked verb only."""
    same_shape(original.ids, flipped.ids, ("original's ids", "flipped's ids"))
    names = list(POSITIONS if positions is None else positions)
    at_all = np.stack([_check_where(original, w, positions) for w in names])  # (P, R), -1: absent
    layers, P = model.bert.encoder.layer, len(names)
    out = np.zeros((len(layers) + 1, P, len(original.ids)), dtype=bool)
    with torch.inference_mode():
        for n in np.unique(original.length):
            rows = np.flatnonzero(original.length == n)
            mine, donor = (model.bert(input_ids=torch.as_tensor(s.ids[rows, :n]),
                                      output_hidden_states=True).hidden_states
                           for s in (original, flipped))  # (R, n, d) after each layer
            r, b = torch.arange(len(rows)).repeat(P), torch.arange(P * len(rows))
            pos = torch.as_tensor(at_all[:, rows].clip(0).reshape(-1))  # absent: masked below
            verb = torch.as_tensor(original.verb[rows]).repeat(P)
            for layer in range(len(layers) + 1):
                hidden = mine[layer].repeat(P, 1, 1)  # (P·R, n, d): row p·R + i patched at p
                hidden[b, pos] = donor[layer][r, pos]
                for above in layers[layer:-1]:
                    hidden = above(hidden)
                at = (hidden[b, verb] if layer == len(layers)
                      else _layer_at(layers[-1], hidden, verb, 1, 0))
                logits = model.cls(at)  # (P·R, V) at the masked verb
                right, wrong = (torch.as_tensor(v[rows]).repeat(P) for v in (original.right,
                                                                              original.wrong))
                out[layer][:, rows] = (logits[b, right] < logits[b, wrong]).view(P, -1).numpy()
    return out & (at_all >= 0)


def head_patch_flips(model, original: SentenceSet, flipped: SentenceSet, layer: int, where: str,
                     positions=None) -> np.ndarray:
    """(H, R) bool: for each head of ``layer`` (0-based encoder layer), that head's output alone
    (its slice of the heads' outputs, before W_O) at position ``where`` (a key of ``positions``:
    POSITIONS when None, as :func:`patch_flip`; False where it is absent) is
    copied from ``flipped`` into ``original``, row by row, everything else kept: does the masked
    verb now prefer the form that is wrong for ``original``? A head whose own output there flips
    the choice carries the number at that position; :func:`patch_flip` swaps a whole state, this
    one head's part of it (H + 1 forward passes)."""
    same_shape(original.ids, flipped.ids, ("original's ids", "flipped's ids"))
    whole(layer, "layer", 0, model.config.num_hidden_layers - 1)
    at = _check_where(original, where, positions)
    heads, module = model.config.num_attention_heads, _head_outputs(model, layer)
    width = model.config.hidden_size // heads
    rows, pos = torch.arange(len(original.ids)), torch.as_tensor(at.clip(0))  # absent: masked
    captured = {}
    handle = module.register_forward_pre_hook(lambda m, args: captured.update(x=args[0].clone()))
    try:
        with torch.inference_mode():
            model(input_ids=torch.as_tensor(flipped.ids),
                  attention_mask=torch.as_tensor(flipped.attention_mask))
    finally:
        handle.remove()
    donor = captured["x"][rows, pos]  # (R, d): every head's output at ``where``
    out = np.zeros((heads, len(rows)), dtype=bool)
    for h in range(heads):
        cols = head_columns(h, width)

        def swap(m, args, cols=cols):
            x = args[0].clone()
            x[rows, pos, cols] = donor[:, cols]
            return (x, *args[1:])

        out[h] = _prefers_wrong(model, original, module.register_forward_pre_hook(swap)) & (at >= 0)
    return out
