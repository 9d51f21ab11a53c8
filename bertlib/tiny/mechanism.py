"""Causal tests of how notebook 09's tiny BERT does agreement: ablation of heads together, a linear
probe for the subject's number, and activation patching.

- :func:`head_groups` / :func:`ablation_grid`: every single head, every pair of heads of one
  layer and every whole layer switched off at once (:func:`bertlib.hf.ablation.ablated_heads`), the
  agreement accuracy per "construction · role" (Michel et al. 2019 ablate heads; pairs show heads
  that stand in for each other, which one-at-a-time ablation cannot); :func:`cross_layer_groups`:
  every pair of heads of two layers, switched off together (a route across layers needs both);
  :func:`agreement_correct`: the agreement test alone; :func:`ablated_correct`: the same for
  every group at once (one batched forward pass, states shared by groups computed once).
  :func:`mean_ablation_drops`: the same with each head's output replaced by its mean over the
  sentences (:func:`head_means`) instead of 0, the control for zero ablation's side effect.
- :func:`hidden_states` / :func:`number_probe`: a logistic-regression probe for the subject's
  number on the hidden state at one position and layer, with a train / test split and a control
  task (Hewitt & Liang 2019: the same probe on labels that are a random function of the subject's
  noun, so a probe that only memorises words scores as well there). Selectivity = accuracy −
  control accuracy. :func:`number_probe_controls` adds the control a probe at a verb needs: the
  nearest noun's number (scored on the conflict rows, where it differs from the subject's, and
  as a probe of its own). :func:`control_labels` / :func:`verb_number_probe`: the control task and
  the probe at the masked verb after each layer (recorded while training).
- :func:`minimal_pairs` / :func:`patch_flip`: each probe row beside the same sentence with its
  subject's number flipped (and every verb that agrees with it); the hidden state at one position
  after one layer is copied from the flipped sentence into the original, and we count how often
  the masked verb's preference flips (Vig et al. 2020; Meng et al. 2022 call it patching). A
  state that carries the number flips the verb; one that does not, leaves it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from itertools import combinations

import numpy as np
import torch

from bertlib.checks import has_shape, one_of, whole
from bertlib.hf.attention_interface import project_heads_torch
from bertlib.paper.attention import attention_scale
from bertlib.tiny import grammar
from bertlib.tiny.probes import Probe, agreement_table, make_probe, plural_of

__all__ = ["head_groups", "cross_layer_groups", "ablation_grid", "ablation_table", "ablation_drops",
           "ablated_correct", "agreement_correct", "head_means", "mean_ablation_drops",
           "hidden_states", "number_probe", "number_probe_controls", "PROBE_COLUMNS",
           "control_labels", "verb_number_probe",
           "minimal_pairs", "patch_flip", "POSITIONS"]


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


def agreement_correct(model, probe: Probe) -> np.ndarray:
    """(R,) bool: the masked verb's right form is more probable than the wrong one (the
    "correct" of :func:`bertlib.tiny.probes.measure_probe`, cheaper: no attention maps, no
    gradients, one
    forward pass per sentence length without its padding, the output layer at the verb only)."""
    out = np.zeros(len(probe.ids), dtype=bool)
    with torch.no_grad():
        for n in np.unique(probe.length):
            rows = np.flatnonzero(probe.length == n)
            hidden = model.bert(input_ids=torch.as_tensor(probe.ids[rows, :n]),
                                attention_mask=torch.as_tensor(probe.attention_mask[rows, :n]))[0]
            at = model.cls(hidden[torch.arange(len(rows)), torch.as_tensor(probe.verb[rows])])
            r = torch.arange(len(rows))
            out[rows] = (at[r, probe.right[rows]] > at[r, probe.wrong[rows]]).numpy()
    return out


def ablated_correct(model, probe: Probe, groups, means=None) -> np.ndarray:
    """(G + 1, R) bool: :func:`agreement_correct` with nothing switched off (row 0) and with each
    group of heads off (row g + 1), all groups in one batched forward pass per sentence length.

    groups: as :func:`head_groups` or :func:`cross_layer_groups` return. A head that is off
    outputs 0 (weights 0, as :func:`bertlib.hf.ablation.ablated_heads`), or its mean output when
    ``means`` ((L, d) as :func:`head_means` returns) is given. The fast twin of switching each
    group off in turn and calling :func:`agreement_correct` (tested equal): a group that leaves
    the layers below untouched reuses their output instead of recomputing it."""
    cfg = model.config
    L, d, width = cfg.num_hidden_layers, cfg.hidden_size, cfg.hidden_size // cfg.num_attention_heads
    keep = torch.ones(len(groups) + 1, L, d)
    for g, (_, heads) in enumerate(groups, 1):
        for layer, h in heads:
            keep[g, whole(layer, "layer", 0, L - 1), h * width:(h + 1) * width] = 0
    fill = (1 - keep) * (0 if means is None else torch.as_tensor(means, dtype=torch.float32))
    out = np.zeros((len(keep), len(probe.ids)), dtype=bool)
    with torch.inference_mode():
        for n in np.unique(probe.length):
            rows = np.flatnonzero(probe.length == n)
            out[:, rows] = _correct_switched_off(model, probe, rows, n, keep, fill)
    return out


def _correct_switched_off(model, probe, rows, n, keep, fill) -> np.ndarray:
    """ablated_correct on the rows of one length n (no padding): layer by layer, each distinct
    state (the same heads off in this layer and below) computed once; the last layer only at
    the masked verb, the one position the verdict reads."""
    R, layers = len(rows), model.bert.encoder.layer
    verb = torch.as_tensor(probe.verb[rows])
    h = model.bert.embeddings(input_ids=torch.as_tensor(probe.ids[rows, :n]))[None]  # (1, R, n, d)
    state = torch.zeros(len(keep), dtype=torch.long)  # group -> its row block in h
    for l, layer in enumerate(layers):
        below = state  # group -> its state after the layers below
        state, first = _distinct(torch.cat([below[:, None].float(), keep[:, l]], 1))
        k, f = (t[first, l].repeat_interleave(R, 0) for t in (keep, fill))  # (U·R, d)
        x = h[below[first]].flatten(0, 1)  # (U·R, n, d)
        if l == len(layers) - 1:
            h = _layer_at(layer, x, verb.repeat(len(first)), k, f).view(len(first), R, -1)
            break
        hook = _head_outputs(model, l).register_forward_pre_hook(
            lambda _, a, k=k, f=f: (a[0] * k[:, None] + f[:, None],))
        try:  # no padding: no attention mask, as the intact model's ones-mask adds 0
            h = layer(x).view(len(first), R, n, -1)
        finally:
            hook.remove()
    r = torch.arange(R)
    at = model.cls(h[state])  # (G + 1, R, V): the last layer's output at the verb
    return (at[:, r, probe.right[rows]] > at[:, r, probe.wrong[rows]]).numpy()


def _layer_at(layer, x, pos, keep, fill):
    """A transformers BertLayer's output at one position per row: x (B, n, d), pos (B,) ->
    (B, d). The same equations as the layer (softmax(q Kᵀ/√d_k) V per head, output projection,
    residual and LayerNorm, feed-forward), for that position's query only; each head's output
    times ``keep`` plus ``fill`` (B, d) before the output projection."""
    sa, (B, _, d), r = layer.attention.self, x.shape, torch.arange(len(x))
    heads, width = sa.num_attention_heads, sa.attention_head_size
    q = project_heads_torch(x[r, pos, None], sa.query, heads)  # (B, h, 1, d_k): one query a row
    k, v = (project_heads_torch(x, m, heads) for m in (sa.key, sa.value))  # (B, h, n, d_k)
    weights = torch.softmax(q @ k.transpose(2, 3) * attention_scale(width), dim=-1)  # (B, h, 1, n)
    a = layer.attention.output((weights @ v).reshape(B, d) * keep + fill, x[r, pos])
    return layer.output(layer.intermediate(a), a)


def _distinct(key):
    """Rows of ``key`` (G, k): each row's distinct value's index, and each value's first row."""
    _, index = torch.unique(key, dim=0, return_inverse=True)
    first = [int(torch.nonzero(index == u)[0]) for u in range(int(index.max()) + 1)]
    return index, first


def ablation_drops(model, probe: Probe, groups) -> tuple[float, np.ndarray]:
    """Agreement accuracy over all of ``probe``'s rows, intact and with each group of heads
    switched off (weights 0). groups: as :func:`head_groups` or :func:`cross_layer_groups`
    return. Returns (intact accuracy, (G,) accuracy drop: intact minus switched off)."""
    acc = ablated_correct(model, probe, groups).mean(1)
    return float(acc[0]), acc[0] - acc[1:]


def ablation_grid(model, probe: Probe, groups) -> tuple[list[str], list[str], np.ndarray]:
    """Agreement accuracy with each group of heads switched off (weights 0).

    groups: as :func:`head_groups` or :func:`cross_layer_groups` return. Returns (group labels
    (G,), row names (K,) as in :func:`bertlib.tiny.probes.agreement_table`, accuracy (G + 1, K));
    row 0 is nothing switched off.
    """
    names, acc = ablation_table(probe, ablated_correct(model, probe, groups))
    return ["none"] + [label for label, _ in groups], names, acc


def ablation_table(probe: Probe, correct) -> tuple[list[str], np.ndarray]:
    """:func:`ablation_grid` from :func:`ablated_correct`'s (G + 1, R) verdicts, already computed
    (so one pass serves the grid and any subset of rows). Returns (row names (K,), accuracy
    (G + 1, K))."""
    correct = np.asarray(correct, dtype=bool)
    whole(correct.ndim, "the number of dimensions of correct (groups, rows)", 2, 2)
    tables = [agreement_table(probe, c) for c in correct]
    names = list(tables[0])
    return names, np.array([[t[n]["model"] for n in names] for t in tables])


def _head_outputs(model, layer: int):
    """The module whose input is ``layer``'s heads' outputs side by side (before W_O)."""
    return model.bert.encoder.layer[layer].attention.output.dense


def head_means(model, probe: Probe) -> np.ndarray:
    """(L, d): each layer's heads' outputs before the output projection (head h in columns
    h·d/H .. (h + 1)·d/H − 1), averaged over every token of the probe's sentences."""
    layers = range(model.config.num_hidden_layers)
    sums = torch.zeros(len(layers), model.config.hidden_size)

    def capture(layer):
        def hook(module, args):
            sums[layer] += args[0].sum((0, 1))
        return hook

    handles = [_head_outputs(model, k).register_forward_pre_hook(capture(k)) for k in layers]
    try:
        agreement_correct(model, probe)  # each sentence without its padding: only real tokens
    finally:
        for handle in handles:
            handle.remove()
    return (sums / float(probe.length.sum())).numpy()


def mean_ablation_drops(model, probe: Probe, groups, means=None) -> tuple[float, np.ndarray]:
    """As :func:`ablation_drops`, but each group's heads output their mean (``means``: (L, d) as
    :func:`head_means` returns, computed on ``probe`` when None) instead of 0: what is left of a
    drop once a head keeps its average contribution. Returns (intact accuracy, (G,) drops)."""
    means = head_means(model, probe) if means is None else means
    has_shape(means, "means", (model.config.num_hidden_layers, model.config.hidden_size), "(L, d)")
    acc = ablated_correct(model, probe, groups, means).mean(1)
    return float(acc[0]), acc[0] - acc[1:]


def hidden_states(model, probe: Probe, batch: int = 512) -> np.ndarray:
    """Every layer's hidden states of the probe's rows: (R, L + 1, N, d) float32 (index 0 is the
    embeddings' output, index l + 1 layer l's output)."""
    out = []
    with torch.no_grad():
        for i in range(0, len(probe.ids), batch):
            run = model.bert(input_ids=torch.as_tensor(probe.ids[i:i + batch]),
                             attention_mask=torch.as_tensor(probe.attention_mask[i:i + batch]),
                             output_hidden_states=True)
            out.append(torch.stack(run.hidden_states, 1).numpy())
    return np.concatenate(out)


def number_probe(features, labels, control, train_share: float = 0.5,
                 l2: float = 1e-2) -> tuple[float, float]:
    """A logistic-regression probe on ``features`` (R, d) for ``labels`` (R,) bool, trained on
    the first ``train_share`` of the rows and tested on the rest; the same probe on ``control``
    (R,) bool labels (the control task). Features are standardised with the training rows'
    mean and spread; the fit minimises the mean cross-entropy + l2 · |w|² (L-BFGS, float64,
    deterministic). Returns (test accuracy, control test accuracy)."""
    x, cut = _probe_features(features, train_share, {"labels": labels, "control": control})
    return tuple(float((_probe_predict(x, target, cut, l2) == np.asarray(target, bool)[cut:])
                       .mean()) for target in (labels, control))


#: The columns of :func:`number_probe_controls` (and of a run's history "number_probe").
PROBE_COLUMNS = ("subject", "control", "subject, conflict rows", "nearest noun")


def number_probe_controls(features, subject, nearest, control, train_share: float = 0.5,
                          l2: float = 1e-2) -> np.ndarray:
    """:func:`number_probe` with the two controls a subject-number probe at a verb needs.

    features: (R, d); subject, nearest, control: (R,) bool (the subject's number, the number of
    the nearest noun before the verb, the control task's labels). Returns (4,) test accuracies
    in the order of PROBE_COLUMNS: the subject probe on all test rows; the control task; the
    subject probe on the **conflict rows** only (test rows whose nearest noun has the other
    number: a probe that reads the nearest noun scores below 0.5 there; nan when the test half
    has none); a probe trained for the nearest noun's number (Hewitt & Liang 2019's advice:
    control for the easy explanation you fear)."""
    x, cut = _probe_features(features, train_share,
                             {"subject": subject, "nearest": nearest, "control": control})
    y, near = np.asarray(subject, bool), np.asarray(nearest, bool)
    said = _probe_predict(x, y, cut, l2)
    conflict = (y != near)[cut:]
    return np.array([(said == y[cut:]).mean(),
                     (_probe_predict(x, control, cut, l2) == np.asarray(control, bool)[cut:])
                     .mean(),
                     (said == y[cut:])[conflict].mean() if conflict.any() else np.nan,
                     (_probe_predict(x, near, cut, l2) == near[cut:]).mean()])


def _probe_features(features, train_share, labels: dict):
    """Standardised float64 features (with the training rows' mean and spread) and the cut;
    labels: name -> (R,) labels, checked for their length."""
    x = np.asarray(features, dtype=np.float64)
    has_shape(x, "features", (len(x), x.shape[-1]), "(R, d)")
    for name, y in labels.items():
        has_shape(np.asarray(y), name, (len(x),), "(R,)")
    cut = int(round(train_share * len(x)))
    whole(cut, "the number of training rows", 2, len(x) - 2)
    return torch.as_tensor((x - x[:cut].mean(0)) / (x[:cut].std(0) + 1e-6)), cut


def _probe_predict(x, target, cut: int, l2: float) -> np.ndarray:
    """A probe fitted on rows [:cut] for ``target``; its (R - cut,) bool predictions after."""
    w, b = _fit_logistic(x[:cut], torch.as_tensor(np.asarray(target, bool)[:cut],
                                                  dtype=torch.float64), l2)
    return (x[cut:] @ w + b > 0).numpy()


def control_labels(tokenizer, probe: Probe, seed: int = 0) -> np.ndarray:
    """The control task's labels (R,) bool: a coin flip per subject noun (singular and plural
    forms share it; seeded, one flip per noun in alphabetical order of the nouns present), so a
    probe that recognises the noun scores as well on it as on the number."""
    lemma = [tokenizer.id_to_token(int(i)).removesuffix("s")
             for i in probe.ids[np.arange(len(probe.ids)), probe.subject]]
    nouns = sorted(set(lemma))
    coin = dict(zip(nouns, np.random.default_rng(seed).random(len(nouns)) < 0.5, strict=True))
    return np.array([coin[w] for w in lemma], dtype=bool)


def verb_number_probe(model, probe: Probe, control) -> np.ndarray:
    """:func:`number_probe_controls` at the masked verb's hidden state after each layer.
    control: (R,) bool (:func:`control_labels`). Returns (L, 4): after layer 0, 1, ... the test
    accuracies in the order of PROBE_COLUMNS (subject, control, subject on conflict rows,
    nearest noun)."""
    states = hidden_states(model, probe)                      # (R, L + 1, N, d)
    at_verb = states[np.arange(len(states)), 1:, probe.verb]  # (R, L, d)
    plural, nearest, _ = plural_of(probe)                     # the verb's = its subject's
    return np.array([number_probe_controls(at_verb[:, layer], plural, nearest, control)
                     for layer in range(at_verb.shape[1])])


def _fit_logistic(x, y, l2: float, iterations: int = 200):
    """(w (d,), b) minimising mean BCE(x w + b, y) + l2 · |w|², by L-BFGS from zeros."""
    w = torch.zeros(x.shape[1], dtype=torch.float64, requires_grad=True)
    b = torch.zeros((), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=iterations, line_search_fn="strong_wolfe")

    def loss():
        opt.zero_grad()
        value = torch.nn.functional.binary_cross_entropy_with_logits(x @ w + b, y) + l2 * (w @ w)
        value.backward()
        return value

    with torch.enable_grad():
        opt.step(loss)
    return w.detach(), b.detach()


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


def minimal_pairs(tokenizer, sentences: Sequence[grammar.Sentence]) -> tuple[Probe, Probe]:
    """Two probes with one row per (sentence, verb): the sentence, and the same sentence with that
    verb's subject flipped in number (same positions, same length)."""
    one = [(replace(s, verbs=(v,)), _flipped(s, v)) for s in sentences for v in s.verbs]
    return make_probe(tokenizer, [a for a, _ in one]), make_probe(tokenizer, [b for _, b in one])


#: Where :func:`patch_flip` can patch, as a function of a probe (-> (R,) token positions).
POSITIONS = {"subject": lambda p: p.subject, "after subject": lambda p: p.subject + 1,
             "before verb": lambda p: p.verb - 1, "verb": lambda p: p.verb}


def _layer_module(model, layer: int):
    return model.bert.embeddings if layer == 0 else model.bert.encoder.layer[layer - 1]


def patch_flip(model, original: Probe, flipped: Probe, layer: int, where: str,
               donor_states=None) -> np.ndarray:
    """Copy the hidden state at position ``where`` (a key of POSITIONS) after ``layer`` (0 = the
    embeddings, l + 1 = layer l's output) from ``flipped`` into ``original``, row by row.
    donor_states: :func:`hidden_states` of ``flipped`` when already computed.
    Returns (R,) bool: the masked verb now prefers the form that is wrong for ``original``."""
    whole(layer, "layer", 0, model.config.num_hidden_layers)
    one_of(where, "where", list(POSITIONS))
    rows, pos = np.arange(len(original.ids)), POSITIONS[where](original)
    states = hidden_states(model, flipped) if donor_states is None else donor_states
    donor = torch.as_tensor(states[rows, layer, pos])  # (R, d)

    def swap(module, args, output):
        h = (output[0] if isinstance(output, tuple) else output).clone()
        h[torch.as_tensor(rows), torch.as_tensor(pos)] = donor
        return (h, *output[1:]) if isinstance(output, tuple) else h

    handle = _layer_module(model, layer).register_forward_hook(swap)
    try:
        with torch.no_grad():  # one batch: the hook's row indices are the probe's
            logits = model(input_ids=torch.as_tensor(original.ids),
                           attention_mask=torch.as_tensor(original.attention_mask)).logits
    finally:
        handle.remove()
    at_verb = logits[torch.as_tensor(rows), torch.as_tensor(original.verb)]  # (R, V)
    return (at_verb[rows, original.right] < at_verb[rows, original.wrong]).numpy()
