"""Pre-train a tiny BERT on the language of :mod:`bertlib.grammar` and watch what it learns.

The recipe is BERT's (Devlin et al. 2019): a word-level tokenizer with [CLS] [SEP] [MASK] [PAD]
[UNK], 15 % of tokens chosen with 80 / 10 / 10 corruption (:func:`bertlib.mlm.mask_batch`),
``transformers.BertForMaskedLM`` with a small ``BertConfig``, AdamW with linear warm-up and
decay. Next-sentence prediction is left out: the generated sentences are independent, so any
sentence is as good a "next" one as any other and NSP would have nothing to learn.

While training, :func:`train` measures on fixed probe sentences (every verb masked in turn):

- per head, the share of attention from each token to the previous / next token and to [CLS] /
  [SEP], and from the masked verb to its true subject noun (the ground truth of the grammar);
- the agreement accuracy: how often the right verb form is more probable than the wrong one
  (Linzen et al. 2016; Goldberg 2019 masks the verb in the same way).

Heads are switched off with transformers' AttentionInterface
(:func:`bertlib.ablation.ablated_head`), never by patching the model.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import WhitespaceSplit
from tokenizers.processors import TemplateProcessing
from tqdm.std import tqdm
from transformers import BertConfig, BertForMaskedLM

from bertlib import grammar
from bertlib.ablation import ablated_head
from bertlib.checks import as_array, same_shape, whole
from bertlib.mlm import IGNORE_INDEX, mask_batch

__all__ = ["SPECIALS", "build_tokenizer", "encode_texts", "tiny_config", "new_model",
           "offset_share", "position_share", "pair_share", "first_crossing", "Probe",
           "make_probe", "subset", "measure", "History", "train", "mlm_accuracy", "agreement_table",
           "accuracy_by", "ablated", "fill_mask"]

SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


# --------------------------------------------------------------------------------------------
# Tokenizer and model
# --------------------------------------------------------------------------------------------
def build_tokenizer(words: Sequence[str] | None = None):
    """A word-level ``tokenizers.Tokenizer``: ids 0..4 are SPECIALS, then ``words`` (default:
    the grammar's vocabulary); splits on whitespace, adds [CLS] ... [SEP], pads with [PAD]."""
    words = grammar.vocabulary() if words is None else list(words)
    clash = sorted(set(words) & set(SPECIALS))
    if clash or len(set(words)) != len(words):
        raise ValueError(f"words must be distinct and not special tokens; clash: {clash}")
    vocab = {w: i for i, w in enumerate(list(SPECIALS) + words)}
    tok = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tok.add_special_tokens(list(SPECIALS))  # never split, and dropped by decode()
    tok.pre_tokenizer = WhitespaceSplit()
    tok.post_processor = TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[(s, vocab[s]) for s in ("[CLS]", "[SEP]")])
    tok.enable_padding(pad_id=vocab["[PAD]"], pad_token="[PAD]")
    return tok


def encode_texts(tokenizer, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(input_ids (B, N) int64, attention_mask (B, N) int64) for a batch, padded to the longest."""
    if isinstance(texts, str) or not len(texts):
        raise ValueError("texts must be a non-empty list of strings")
    enc = tokenizer.encode_batch(list(texts))
    ids = np.array([e.ids for e in enc], dtype=np.int64)
    return ids, np.array([e.attention_mask for e in enc], dtype=np.int64)


def tiny_config(vocab_size: int, layers: int = 2, heads: int = 4, hidden: int = 64,
                max_len: int = 32, tie_embeddings: bool = False):
    """A small ``BertConfig`` (feed-forward width 4 · hidden, no dropout, eager attention so the
    weights can be returned). ValueError before anything is built when hidden % heads != 0.

    tie_embeddings: BERT uses its input embeddings as the output layer too; here they are apart
    by default (see notebook 09: tied, agreement was learned much later).
    """
    for name, value in (("layers", layers), ("heads", heads), ("hidden", hidden),
                        ("max_len", max_len), ("vocab_size", vocab_size)):
        whole(value, name, 1)
    if hidden % heads:
        raise ValueError(f"hidden ({hidden}) must be divisible by heads ({heads}): each head "
                         f"gets hidden / heads dimensions; try hidden = "
                         f"{heads * max(1, round(hidden / heads))}")
    config = BertConfig(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=4 * hidden,
                        max_position_embeddings=max_len, type_vocab_size=2,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                        pad_token_id=0, tie_word_embeddings=bool(tie_embeddings))
    config._attn_implementation = "eager"
    return config


def new_model(config, seed: int = 0):
    """A freshly initialised ``BertForMaskedLM`` (seeded), eager attention."""
    torch.manual_seed(seed)
    return BertForMaskedLM(config).eval()


# --------------------------------------------------------------------------------------------
# Measures on attention maps
# --------------------------------------------------------------------------------------------
def _check_map(A) -> np.ndarray:
    A = as_array(A, "attention maps")
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"attention maps must have shape (..., n, n), got {A.shape}")
    return A


def offset_share(A, offset: int) -> np.ndarray:
    """Mean over queries i of A[..., i, i + offset] (offset −1: previous token, +1: next),
    over the queries where i + offset is inside the sequence. A: (..., n, n) -> (...)."""
    A = _check_map(A)
    n = A.shape[-1]
    if isinstance(offset, bool) or not isinstance(offset, int) or not 0 < abs(offset) < n:
        raise ValueError(f"offset must be a non-zero integer in -{n - 1}..{n - 1}, got {offset!r}")
    return np.diagonal(A, offset=offset, axis1=-2, axis2=-1).mean(-1)


def position_share(A, j: int) -> np.ndarray:
    """Mean over queries i of A[..., i, j] (j = 0: [CLS]; j = n − 1: the last [SEP])."""
    A = _check_map(A)
    n = A.shape[-1]
    whole(j, "j", -n, n - 1)
    return A[..., :, j].mean(-1)


def pair_share(A, queries: Sequence[int], keys: Sequence[int]) -> np.ndarray:
    """Mean over pairs (q, k) of A[..., q, k]: e.g. each verb's attention to its subject."""
    A = _check_map(A)
    q, k = np.asarray(queries, dtype=int), np.asarray(keys, dtype=int)
    n = A.shape[-1]
    same_shape(q, k, ("queries", "keys"))
    if q.ndim != 1 or not q.size or min(q.min(), k.min()) < 0 or max(q.max(), k.max()) >= n:
        raise ValueError(f"queries and keys must be non-empty lists of positions in 0..{n - 1}, "
                         f"got {q.tolist()} and {k.tolist()}")
    return A[..., q, k].mean(-1)


def first_crossing(steps: Sequence[int], values, threshold: float,
                   stay: bool = False) -> int | None:
    """The first step whose value is ≥ threshold (None if never). values: (T,) for T steps.
    stay=True: the first step from which every later value is ≥ threshold too."""
    values = np.asarray(values, dtype=float)
    same_shape(values.shape, (len(steps),), ("values", "steps"))
    above = values >= threshold
    if stay:
        above = np.flip(np.logical_and.accumulate(np.flip(above)))
    hit = np.flatnonzero(above)
    return int(steps[hit[0]]) if hit.size else None


# --------------------------------------------------------------------------------------------
# Probes: every verb of a set of sentences masked in turn
# --------------------------------------------------------------------------------------------
class Probe(NamedTuple):
    """One row per (sentence, verb): the input with that verb masked, and its ground truth.

    ids, mask: (R, N) int64. verb, subject, nearest, first: (R,) token positions ([CLS] = 0).
    right, wrong: (R,) ids of the right and the other verb form. construction, role: (R,) str.
    attractors: (R,) int; differs: (R,) bool (an attractor of the other number). length: (R,).
    """

    ids: np.ndarray
    mask: np.ndarray
    verb: np.ndarray
    subject: np.ndarray
    nearest: np.ndarray
    first: np.ndarray
    right: np.ndarray
    wrong: np.ndarray
    construction: np.ndarray
    role: np.ndarray
    attractors: np.ndarray
    differs: np.ndarray
    length: np.ndarray


def make_probe(tokenizer, sentences: Sequence[grammar.Sentence]) -> Probe:
    """The :class:`Probe` of ``sentences`` (one row per verb, that verb replaced by [MASK])."""
    ids, mask = encode_texts(tokenizer, [s.text for s in sentences])
    mask_id = tokenizer.token_to_id("[MASK]")
    rows = []
    for b, s in enumerate(sentences):
        for v in s.verbs:
            x = ids[b].copy()
            x[v.position + 1] = mask_id
            rows.append((x, mask[b], v.position + 1, v.subject + 1,
                         grammar.nearest_noun(s, v) + 1, grammar.first_noun(s) + 1,
                         ids[b, v.position + 1],
                         tokenizer.token_to_id(grammar.other_form(s.words[v.position])),
                         s.construction, v.role, v.attractors, v.attractor_differs,
                         int(mask[b].sum())))
    cols = list(zip(*rows, strict=True))
    return Probe(*(np.array(c) for c in cols))


def subset(probe: Probe, rows) -> Probe:
    """The probe's rows selected by ``rows`` ((R,) bool or indices)."""
    return Probe(*(np.asarray(field)[rows] for field in probe))


def _forward(model, ids, mask, batch: int = 512):
    """(logits at every position (R, N, V), attentions (R, L, H, N, N)) without gradients."""
    logits, maps = [], []
    with torch.no_grad():
        for i in range(0, len(ids), batch):
            out = model(input_ids=torch.as_tensor(ids[i:i + batch]),
                        attention_mask=torch.as_tensor(mask[i:i + batch]),
                        output_attentions=True)
            logits.append(out.logits.numpy())
            maps.append(torch.stack(out.attentions, 1).numpy())
    return np.concatenate(logits), np.concatenate(maps)


def measure(model, probe: Probe) -> dict[str, np.ndarray]:
    """Run the probe. Returns per row "correct" (R,) bool (right form more probable than the
    wrong one), "p_right" (R,) (softmax probability of the right form), and per head (L, H):
    "subject" (masked verb -> its subject), "previous", "next", "[CLS]", "[SEP]" shares
    (averaged over rows, each over its real tokens)."""
    logits, maps = _forward(model, probe.ids, probe.mask)
    r = np.arange(len(probe.ids))
    at_verb = logits[r, probe.verb].astype(np.float64)
    p = np.exp(at_verb - at_verb.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = {"correct": at_verb[r, probe.right] > at_verb[r, probe.wrong],
           "p_right": p[r, probe.right],
           "subject": maps[r, :, :, probe.verb, probe.subject].mean(0)}
    shares = {"previous": [], "next": [], "[CLS]": [], "[SEP]": []}
    for n in np.unique(probe.length):
        A = maps[probe.length == n][..., :n, :n]
        shares["previous"].append(offset_share(A, -1).sum(0))
        shares["next"].append(offset_share(A, 1).sum(0))
        shares["[CLS]"].append(position_share(A, 0).sum(0))
        shares["[SEP]"].append(position_share(A, n - 1).sum(0))
    out.update({k: np.sum(v, 0) / len(r) for k, v in shares.items()})
    return out


# --------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------
class History(NamedTuple):
    """What :func:`train` recorded. steps: (T,) evaluation steps (0 = before training);
    loss: (S,) training loss per step; accuracy: (T,) agreement accuracy on the probe;
    heads: name -> (T, L, H) shares (see :func:`measure`); snapshots: step -> attention maps
    (L, H, N, N) of the probe's first row; seconds: wall time of the training loop."""

    steps: list[int]
    loss: np.ndarray
    accuracy: np.ndarray
    heads: dict[str, np.ndarray]
    snapshots: dict[int, np.ndarray]
    seconds: float


def _batch_ids(tokenizer, n: int, rng: np.random.Generator, constructions: Sequence[str],
               max_pp: int) -> tuple[np.ndarray, np.ndarray]:
    seed = int(rng.integers(2**31))
    sents = grammar.generate(n, constructions, seed, max_pp=max_pp)
    return encode_texts(tokenizer, [s.text for s in sents])


def _schedule(optimizer, warmup: int, total: int):
    """Learning rate × min((s + 1) / warmup, (total − s) / (total − warmup)): a linear rise over
    ``warmup`` steps, then a linear fall to 0 at step ``total``."""
    def factor(s: int) -> float:
        fall = max(0.0, (total - s) / (total - warmup)) if total > warmup else 1.0
        return min((s + 1) / max(1, warmup), fall)

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


class _Recorder:
    """What :func:`train` measures on the probe at its evaluation steps."""

    def __init__(self, model, probe: Probe, snapshot_steps: Sequence[int]):
        self.model, self.probe, self.snapshot_steps = model, probe, snapshot_steps
        self.steps, self.accuracy, self.heads, self.snapshots = [], [], {}, {}

    def __call__(self, step: int) -> None:
        self.model.eval()
        m = measure(self.model, self.probe)
        self.steps.append(step)
        self.accuracy.append(m["correct"].mean())
        for key in ("subject", "previous", "next", "[CLS]", "[SEP]"):
            self.heads.setdefault(key, []).append(m[key])
        if step in self.snapshot_steps:
            self.snapshots[step] = _forward(self.model, self.probe.ids[:1],
                                            self.probe.mask[:1])[1][0]

    def history(self, losses: list[float], seconds: float) -> History:
        return History(self.steps, np.array(losses), np.array(self.accuracy),
                       {k: np.array(v) for k, v in self.heads.items()}, self.snapshots, seconds)


def train(model, tokenizer, steps: int, probe: Probe, batch_size: int = 128, lr: float = 3e-3,
          warmup: int = 100, seed: int = 0, every: int = 25,
          constructions: Sequence[str] = grammar.TRAIN_CONSTRUCTIONS, max_pp: int = 2,
          snapshot_steps: Sequence[int] = (), schedule_steps: int | None = None,
          progress: bool = True) -> History:
    """Masked-LM pre-training of ``model`` on fresh training-split sentences every step
    (``constructions`` and ``max_pp`` as in :func:`bertlib.grammar.generate`).

    AdamW (weight decay 0.01), learning rate rising linearly over ``warmup`` steps to ``lr``,
    then falling linearly to 0 at ``schedule_steps`` (default ``steps``; a larger value runs
    only the first ``steps`` of a longer run). Every ``every`` steps (and at 0 and the end)
    runs :func:`measure` on ``probe``. Deterministic for a given seed and thread count.
    """
    for name, value, low in (("steps", steps, 1), ("batch_size", batch_size, 1),
                             ("every", every, 1), ("warmup", warmup, 0),
                             ("schedule_steps", schedule_steps or steps, steps)):
        whole(value, name, low)
    special = [tokenizer.token_to_id(s) for s in SPECIALS]
    mask_id, vocab = tokenizer.token_to_id("[MASK]"), tokenizer.get_vocab_size()
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = _schedule(opt, warmup, schedule_steps or steps)
    record, losses = _Recorder(model, probe, snapshot_steps), []
    record(0)
    bar = _progress(steps, progress)
    start = time.perf_counter()
    for step in range(1, steps + 1):
        model.train()
        ids, attention = _batch_ids(tokenizer, batch_size, rng, constructions, max_pp)
        masked = mask_batch(ids, mask_id, vocab, special, rng)
        out = model(input_ids=torch.as_tensor(masked.input_ids),
                    attention_mask=torch.as_tensor(attention),
                    labels=torch.as_tensor(masked.labels))
        opt.zero_grad()
        out.loss.backward()
        opt.step()
        sched.step()
        losses.append(out.loss.item())
        if step % every == 0 or step == steps or step in snapshot_steps:
            record(step)
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{losses[-1]:.2f}", agreement=f"{record.accuracy[-1]:.2f}",
                            refresh=False)
    seconds = time.perf_counter() - start
    if bar is not None:
        bar.close()
    model.eval()
    return record.history(losses, seconds)


def _progress(total: int, show: bool):
    if not show:
        return None
    # a text bar (stderr): its saved output reads "100% 300/300" anywhere, with or without a
    # kernel, where a widget bar would be saved as a widget that static viewers cannot draw
    return tqdm(total=total, desc="pre-training", unit="step", mininterval=2.0)


def mlm_accuracy(model, tokenizer, sentences: Sequence[grammar.Sentence], seed: int = 0) -> float:
    """Share of masked-LM targets predicted exactly (argmax), BERT's corruption with ``seed``."""
    ids, attention = encode_texts(tokenizer, [s.text for s in sentences])
    special = [tokenizer.token_to_id(s) for s in SPECIALS]
    masked = mask_batch(ids, tokenizer.token_to_id("[MASK]"), tokenizer.get_vocab_size(),
                        special, np.random.default_rng(seed))
    with torch.no_grad():
        logits = model(input_ids=torch.as_tensor(masked.input_ids),
                       attention_mask=torch.as_tensor(attention)).logits.numpy()
    target = masked.labels != IGNORE_INDEX
    return float((logits.argmax(-1)[target] == masked.labels[target]).mean())


# --------------------------------------------------------------------------------------------
# Agreement tables
# --------------------------------------------------------------------------------------------
def agreement_table(probe: Probe, correct) -> dict[str, dict[str, float]]:
    """Per "construction · role": the model's accuracy (``correct``, (R,) bool) beside the
    nearest-noun and first-noun shortcuts' accuracy, and the number of rows."""
    correct = np.asarray(correct, dtype=bool)
    same_shape(correct, probe.verb, ("correct", "the probe's rows"))
    plural = _plural_of(probe)
    nearest_ok = plural[0] == plural[1]
    first_ok = plural[0] == plural[2]
    table = {}
    for c in dict.fromkeys(probe.construction):
        for role in ("main", "middle", "inner"):
            rows = (probe.construction == c) & (probe.role == role)
            if rows.any():
                table[f"{c} · {role}"] = {"model": correct[rows].mean(),
                                          "nearest noun": nearest_ok[rows].mean(),
                                          "first noun": first_ok[rows].mean(),
                                          "n": int(rows.sum())}
    return table


def _plural_of(probe: Probe) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(verb plural, nearest noun plural, first noun plural), each (R,) bool, from the ids:
    a word is plural when it is the grammar's plural form."""
    plural_words = set(grammar.NOUNS.values()) | set(grammar.INTRANSITIVE.values()) | set(
        grammar.TRANSITIVE.values()) | set(grammar.COMPLEMENT.values())
    r = np.arange(len(probe.ids))
    orig = probe.ids.copy()
    orig[r, probe.verb] = probe.right
    return tuple(np.array([_WORDS[i] in plural_words for i in orig[r, pos]])
                 for pos in (probe.verb, probe.nearest, probe.first))


_WORDS = list(SPECIALS) + grammar.vocabulary()


def accuracy_by(probe: Probe, correct, rows) -> float:
    """The model's accuracy over the probe rows selected by ``rows`` ((R,) bool)."""
    rows = np.asarray(rows, dtype=bool)
    if rows.shape != probe.verb.shape or not rows.any():
        raise ValueError("rows must be a (R,) bool array selecting at least one probe row")
    return float(np.asarray(correct)[rows].mean())


# --------------------------------------------------------------------------------------------
# Ablation and fill-mask
# --------------------------------------------------------------------------------------------
def ablated(model, layer: int, head: int, mode: str = "zero"):
    """Within a ``with ablated(...)`` block, head ``head`` of layer ``layer`` of ``model`` (a
    transformers BERT) is switched off: weights 0 ("zero") or uniform over the real tokens
    ("uniform"). :func:`bertlib.ablation.ablated_head` on this model; restored on exit."""
    return ablated_head(layer, head, mode, model)


def fill_mask(model, tokenizer, text: str, k: int = 5) -> tuple[list[tuple[str, float]],
                                                                 list[str], np.ndarray, int]:
    """Top-k words for the single [MASK] of ``text`` (words of the language, spaces between).

    Returns ([(word, probability), ...] most likely first, tokens with [CLS]/[SEP], the
    attention maps (L, H, n, n), the [MASK]'s position). ValueError naming any word outside
    the vocabulary, or when the text has no [MASK] or more than one.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}")
    words = text.split()
    if words.count("[MASK]") != 1:
        raise ValueError(f"the text must contain exactly one [MASK], got {words.count('[MASK]')}"
                         f": {text!r}")
    known = set(tokenizer.get_vocab())
    unknown = [w for w in words if w not in known or w in SPECIALS and w != "[MASK]"]
    if unknown:
        raise ValueError(f"not words of the language: {unknown} (see bertlib.grammar."
                         f"vocabulary())")
    whole(k, "k", 1, tokenizer.get_vocab_size())
    ids, mask = encode_texts(tokenizer, [" ".join(words)])
    where = words.index("[MASK]") + 1
    logits, maps = _forward(model, ids, mask)
    z = logits[0, where].astype(np.float64)
    p = np.exp(z - z.max())
    p /= p.sum()
    top = np.argsort(-p, kind="stable")[:k]
    vocab = {i: w for w, i in tokenizer.get_vocab().items()}
    tokens = [vocab[int(i)] for i in ids[0]]
    return [(vocab[int(i)], float(p[i])) for i in top], tokens, maps[0], where

