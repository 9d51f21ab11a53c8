"""Pre-train a tiny BERT on the language of :mod:`bertlib.tiny.grammar` and watch what it learns.

The recipe is BERT's (Devlin et al. 2019): a word-level tokenizer with [CLS] [SEP] [MASK] [PAD]
[UNK] (:func:`bertlib.tiny.agreement.build_tokenizer`), 15 % of tokens chosen with 80 / 10 / 10
corruption (:func:`bertlib.paper.mlm.mask_batch`), ``transformers.BertForMaskedLM`` with a small
``BertConfig``, AdamW with linear warm-up and decay. Next-sentence prediction is left out: the
generated sentences are independent, so any sentence is as good a "next" one as any other and NSP
would have nothing to learn.

While training, :func:`train` runs :func:`bertlib.tiny.agreement.measure_on` on a fixed check set
of held-out sentences (every verb masked in turn): per head, the share of attention to the
previous / next token, to [CLS] / [SEP] and from the masked verb to its true subject; and the
agreement accuracy.

The model is transformers' own ``BertForMaskedLM`` with its eager attention (softmax(Q Kᵀ/√d_k) V,
the equation of :func:`bertlib.paper.attention.scaled_dot_product_attention`), not bertlib's
numpy BERT; :func:`bertlib.paper.bert.bert_forward` computes the same hidden states and attention
weights from its parameters (tested; notebook 09 checks its runs). Switching heads off is
:mod:`bertlib.tiny.mechanism`'s work, not this module's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import NamedTuple

import numpy as np
import torch
from tqdm.std import tqdm
from transformers import BertConfig, BertForMaskedLM

from bertlib.checks import (
    IGNORE_INDEX,
    heads_dividing,
    kind,
    number,
    one_mask_token,
    token_batch,
    whole,
)
from bertlib.paper.attention import softmax
from bertlib.paper.mlm import mask_batch, mlm_loss
from bertlib.tiny import grammar
from bertlib.tiny.agreement import (
    SPECIALS,
    SentenceSet,
    encode_texts,
    logits_and_attentions,
    masking_ids,
    measure_on,
)

__all__ = ["tiny_config", "new_model", "Recipe", "History", "mlm_step", "train",
           "mlm_accuracy", "tiny_fill_mask"]


# --------------------------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------------------------
def tiny_config(vocab_size: int, layers: int = 2, heads: int = 4, hidden: int = 64,
                max_len: int = 32, tie_embeddings: bool = False):
    """A small ``BertConfig`` (feed-forward width 4 · hidden, no dropout, eager attention so the
    attention can be returned). ValueError before anything is built when hidden % heads != 0.

    tie_embeddings: BERT uses its input embeddings as the output layer too; here they are apart
    by default, as in every committed run of notebook 09 (which does not compare the two).
    """
    for name, value in (("layers", layers), ("heads", heads), ("hidden", hidden),
                        ("max_len", max_len), ("vocab_size", vocab_size)):
        whole(value, name, 1)
    heads_dividing(heads, hidden, ("heads", "hidden"))
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
# Training
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Recipe:
    """Every setting of a training run, in one place (the committed runs and the live run of
    notebook 09 use the same recipe; only ``seed`` differs between the committed runs).

    layers, heads, hidden: the model (:func:`tiny_config`). steps, batch_size: sentences drawn
    fresh every step. lr, warmup: AdamW's peak learning rate and its linear warm-up (then a
    linear fall to 0 at ``steps``); weight_decay: AdamW's (decoupled) weight decay. seed:
    initialisation, sentences and masks. every: measurements on the check set every this many steps.
    mask_prob: share of tokens chosen for the loss (BERT: 0.15), then 80 / 10 / 10 [MASK] /
    random / kept. max_pp, constructions: the training language
    (:func:`bertlib.tiny.grammar.generate`). check_sentences, check_seed: the check set (held-out
    sentences per construction, grammar seed).
    """

    layers: int = 2
    heads: int = 4
    hidden: int = 64
    steps: int = 1500
    batch_size: int = 128
    lr: float = 4e-3
    weight_decay: float = 0.01
    warmup: int = 100
    seed: int = 0
    every: int = 50
    mask_prob: float = 0.15
    max_pp: int = 2
    constructions: tuple[str, ...] = grammar.TRAIN_CONSTRUCTIONS
    check_sentences: int = 60
    check_seed: int = 1

    def __post_init__(self):
        for name in ("layers", "heads", "hidden", "steps", "batch_size", "every"):
            whole(getattr(self, name), name, 1)
        whole(self.warmup, "warmup", 0)
        whole(self.seed, "seed", 0)
        number(self.weight_decay, "weight_decay", 0)
        heads_dividing(self.heads, self.hidden, ("heads", "hidden"))
        object.__setattr__(self, "constructions", tuple(self.constructions))
        pp = "pp" in self.constructions  # the 'pp' construction draws 1..max_pp phrases
        whole(self.max_pp, "max_pp (the number of prepositional phrases)", int(pp), grammar.MAX_PP,
              f"(constructions {list(self.constructions)} include 'pp', which needs one: drop "
              f"'pp' from constructions for max_pp = 0)" if pp else "")

    def config(self, vocab_size: int):
        """The model's ``BertConfig`` for a vocabulary of ``vocab_size`` tokens."""
        return tiny_config(vocab_size, self.layers, self.heads, self.hidden)

    def to_json(self) -> dict:
        return {**asdict(self), "constructions": list(self.constructions)}


class History(NamedTuple):
    """What :func:`train` recorded. steps: (T,) evaluation steps (0 = before training);
    loss: (S,) training loss per step; accuracy: (T,) agreement accuracy on the check set;
    log_odds: (T,) mean log p(right form) − log p(wrong form) at the masked verb;
    heads: name -> (T, L, H) shares (see :func:`bertlib.tiny.agreement.measure_on`;
    "subject_far" is the verb -> subject share on the rows whose subject is not the previous
    word); snapshots: step -> attention maps
    (L, H, N, N) of the check set's first row; seconds: CPU time of the training loop;
    number_probe: (T, L, C) what ``train``'s number_probe returned at each evaluation step, e.g.
    (T, L, 4) from :func:`bertlib.tiny.linear_probe.verb_number_probe`: a linear probe's test
    accuracy for the subject's number at the masked verb after each layer, on the control task,
    on the conflict rows, and a nearest-noun probe's (columns: linear_probe.PROBE_COLUMNS), or
    None when not measured."""

    steps: list[int]
    loss: np.ndarray
    accuracy: np.ndarray
    log_odds: np.ndarray
    heads: dict[str, np.ndarray]
    snapshots: dict[int, np.ndarray]
    seconds: float
    number_probe: np.ndarray | None = None


def _batch_ids(tokenizer, n: int, rng: np.random.Generator, constructions: Sequence[str],
               max_pp: int) -> tuple[np.ndarray, np.ndarray]:
    """n fresh training sentences as :func:`bertlib.tiny.agreement.encode_texts` encodes them (the
    same arrays, tested): every word is one token, so a dictionary look-up per word does it."""
    seed = int(rng.integers(2**31))
    sents = grammar.generate(n, constructions, seed, max_pp=max_pp)
    vocab = tokenizer.get_vocab()
    rows = [[vocab["[CLS]"], *(vocab[w] for w in s.words), vocab["[SEP]"]] for s in sents]
    ids = np.full((n, max(map(len, rows))), vocab["[PAD]"], dtype=np.int64)
    attention_mask = np.zeros_like(ids)  # padding flags, 1 = real token
    for i, row in enumerate(rows):
        ids[i, :len(row)], attention_mask[i, :len(row)] = row, 1
    return ids, attention_mask


def _schedule(optimizer, warmup: int, total: int):
    """Learning rate × min((s + 1) / warmup, (total − s) / (total − warmup)): a linear rise over
    ``warmup`` steps, then a linear fall to 0 at step ``total``."""
    def factor(s: int) -> float:
        fall = max(0.0, (total - s) / (total - warmup)) if total > warmup else 1.0
        return min((s + 1) / max(1, warmup), fall)

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def mlm_step(model, optimizer, input_ids, attention_mask, labels) -> float:
    """One optimizer step on ℒ = −mean_{i ∈ chosen} log p(x_i | the corrupted input). (B, N)
    ints, numpy or torch: input_ids, attention_mask (1/0), labels (x_i where chosen, else −100)."""
    token_batch(input_ids, attention_mask, model.config.vocab_size, labels, IGNORE_INDEX)
    x, a, y = map(torch.as_tensor, (input_ids, attention_mask, labels))  # tensors stay as they are
    model.train()
    logits = model(input_ids=x, attention_mask=a).logits  # (B, N, V)
    loss = mlm_loss(logits, y)  # ℒ, written out in bertlib.paper.mlm.mlm_loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()  # ℒ


class _Recorder:
    """What :func:`train` measures on the check set at its evaluation steps."""

    def __init__(self, model, check_set: SentenceSet, snapshot_steps: Sequence[int], number_probe):
        self.model, self.check_set, self.snapshot_steps = model, check_set, snapshot_steps
        self.steps, self.accuracy, self.log_odds, self.heads, self.snapshots = [], [], [], {}, {}
        self.number_probe, self.number, self.losses = number_probe, [], []

    def __call__(self, step: int) -> None:
        self.model.eval()
        m = measure_on(self.model, self.check_set)
        self.steps.append(step)
        self.accuracy.append(m["correct"].mean())
        self.log_odds.append(m["log_odds"].mean())
        for key in ("subject", "subject_far", "previous", "next", "[CLS]", "[SEP]"):
            self.heads.setdefault(key, []).append(m[key])
        if self.number_probe is not None:
            self.number.append(self.number_probe(self.model, self.check_set))
        if step in self.snapshot_steps:
            self.snapshots[step] = logits_and_attentions(self.model, self.check_set.ids[:1],
                                                         self.check_set.attention_mask[:1])[1][0]

    def history(self, losses: list[float], seconds: float) -> History:
        return History(self.steps, np.array(losses), np.array(self.accuracy),
                       np.array(self.log_odds), {k: np.array(v) for k, v in self.heads.items()},
                       self.snapshots, seconds,
                       None if self.number_probe is None else np.array(self.number))


def train(model, tokenizer, recipe: Recipe, check_set: SentenceSet, steps=None, **watch) -> History:
    """Masked-LM pre-training, the first ``steps`` (default all) of the recipe. ``watch`` (see
    _Loop): progress, on_record, until (stop early), number_probe, snapshot_steps."""
    loop = _Loop(model, tokenizer, recipe, check_set, steps, **watch)  # checks, seeds, measurements
    optimizer = torch.optim.AdamW(model.parameters(), recipe.lr, weight_decay=recipe.weight_decay,
                                  foreach=True)  # the per-parameter loop's numbers, in one call
    schedule = _schedule(optimizer, recipe.warmup, recipe.steps)  # linear warm-up, linear decay
    for step, (ids, attention_mask) in loop.batches():  # (B, N) word ids, 1/0 padding flags
        masked = mask_batch(ids, loop.mask_id, loop.vocab, loop.special, loop.rng, recipe.mask_prob)
        loss = mlm_step(model, optimizer, masked.input_ids, attention_mask, masked.labels)  # ℒ
        schedule.step()  # the learning rate of the next step
        loop.after(step, loss)  # measurements, progress bar
    return loop.finish()


class _Loop:
    """Everything :func:`train` does around the masked-LM step, with train's options (its
    docstring names them; all optional): progress=True (a text bar, stderr); snapshot_steps:
    steps whose attention maps are kept; every ``recipe.every`` steps (and at 0 and the end) it runs
    :func:`bertlib.tiny.agreement.measure_on` on ``check_set``, and
    ``number_probe(model, check_set)`` when given (e.g.
    :func:`bertlib.tiny.linear_probe.verb_number_probe` with its control labels on a sentence set
    of its own, as ``tools/pretrain_tiny_bert.py`` passes), then
    ``on_record(recorder)`` (e.g. to redraw a plot; the recorder holds ``steps``, ``accuracy``,
    ``log_odds`` and ``losses`` so far). ``until(recorder)``: training stops after the first
    measurement at which it returns True (e.g. once agreement has risen), before ``steps``.
    Without ``number_probe`` (None or False) History's
    number_probe is None; measuring never changes the training. Deterministic for a given seed
    and thread count: the seeds are set here, in this order, before the first batch. The
    model's config records the recipe (``config.bertlib_recipe``).
    """

    def __init__(self, model, tokenizer, recipe, check_set, steps, *, snapshot_steps=(),
                 progress: bool = True, on_record: Callable | None = None,
                 until: Callable | None = None, number_probe: Callable | None = None):
        kind(recipe, "recipe", Recipe, "a bertlib.tiny.pretrain.Recipe")
        self.steps = whole(recipe.steps if steps is None else steps, "steps", 1, recipe.steps)
        self.model, self.tokenizer, self.recipe = model, tokenizer, recipe
        self.mask_id, self.vocab, self.special = masking_ids(tokenizer)
        self.rng = np.random.default_rng(recipe.seed)
        torch.manual_seed(recipe.seed)
        self.record = _Recorder(model, check_set, snapshot_steps, number_probe or None)
        self.snapshot_steps, self.on_record, self.until = snapshot_steps, on_record, until
        self.stopped = False  # set when until(recorder) holds: batches() then yields no more
        self.record(0)
        self.bar = _progress(self.steps, progress)
        self.start = time.process_time()

    def batches(self):
        """(step, (ids, padding flags)) for steps 1..steps: a fresh batch drawn at each step."""
        r = self.recipe
        for step in range(1, self.steps + 1):
            if self.stopped:
                return
            yield step, _batch_ids(self.tokenizer, r.batch_size, self.rng, r.constructions,
                                   r.max_pp)

    def after(self, step: int, loss: float) -> None:
        self.record.losses.append(loss)
        if step % self.recipe.every == 0 or step == self.steps or step in self.snapshot_steps:
            self.record(step)
            if self.on_record is not None:
                self.on_record(self.record)
            self.stopped = self.until is not None and bool(self.until(self.record))
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(loss=f"{loss:.2f}", agreement=f"{self.record.accuracy[-1]:.2f}",
                                 refresh=False)

    def finish(self) -> History:
        seconds = time.process_time() - self.start
        if self.bar is not None:
            self.bar.close()
        self.model.config.bertlib_recipe = self.recipe.to_json()  # saved with the model
        self.model.eval()
        return self.record.history(self.record.losses, seconds)


def _progress(total: int, show: bool):
    if not show:
        return None
    # a text bar (stderr): its saved output reads "100% 300/300" anywhere, with or without a
    # kernel, where a widget bar would be saved as a widget that static viewers cannot draw
    return tqdm(total=total, desc="pre-training", unit="step", mininterval=2.0)


def mlm_accuracy(model, tokenizer, sentences: Sequence[grammar.Sentence], seed: int = 0) -> float:
    """Share of masked-LM targets predicted exactly (argmax), BERT's corruption with ``seed``."""
    ids, attention_mask = encode_texts(tokenizer, [s.text for s in sentences])
    mask_id, vocab_size, special = masking_ids(tokenizer)
    masked = mask_batch(ids, mask_id, vocab_size, special, np.random.default_rng(seed))
    with torch.no_grad():
        logits = model(input_ids=torch.as_tensor(masked.input_ids),
                       attention_mask=torch.as_tensor(attention_mask)).logits.numpy()
    target = masked.labels != IGNORE_INDEX
    return float((logits.argmax(-1)[target] == masked.labels[target]).mean())


# --------------------------------------------------------------------------------------------
# Fill-mask
# --------------------------------------------------------------------------------------------
def tiny_fill_mask(model, tokenizer, text: str, k: int = 5) -> tuple[list[tuple[str, float]],
                                                                 list[str], np.ndarray, int]:
    """p = softmax(logits at the [MASK]) over the vocabulary, and its k most likely words.
    text: words, one [MASK]. Returns ([(word, p)], tokens, maps (L, H, n, n), [MASK]'s position)."""
    words = _check_fill_mask(tokenizer, text, k)  # known words, one [MASK], 1 <= k <= vocabulary
    ids, attention_mask = encode_texts(tokenizer, [" ".join(words)])
    where = words.index("[MASK]") + 1  # the [MASK]'s position after [CLS]
    logits, maps = logits_and_attentions(model, ids, attention_mask)
    p = softmax(logits[0, where].astype(np.float64))  # (V,)
    top = np.argsort(-p, kind="stable")[:k]
    vocab = {i: w for w, i in tokenizer.get_vocab().items()}
    tokens = [vocab[int(i)] for i in ids[0]]
    return [(vocab[int(i)], float(p[i])) for i in top], tokens, maps[0], where


def _check_fill_mask(tokenizer, text: str, k: int) -> list[str]:
    """tiny_fill_mask's text as words: a ValueError naming any word outside the vocabulary, or
    when the text has no [MASK] or more than one, or k outside 1..vocabulary size."""
    words = one_mask_token(text).split()
    known = set(tokenizer.get_vocab())
    unknown = [w for w in words if w not in known or w in SPECIALS and w != "[MASK]"]
    if unknown:
        raise ValueError(f"not words of the language: {unknown} (see bertlib.tiny.grammar."
                         f"vocabulary())")
    whole(k, "k", 1, tokenizer.get_vocab_size())
    return words
