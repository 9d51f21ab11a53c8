"""The agreement test of notebook 09's tiny BERT, read from outside: the word-level tokenizer of
:mod:`bertlib.tiny.grammar`'s language, sets of test sentences, and what a model does on them.

A :class:`SentenceSet` is a fixed set of sentences with every verb masked in turn, one row per
verb (:func:`make_sentence_set`); :func:`measure_on` runs a model on it and returns the agreement
accuracy, how often the right verb form is more probable than the wrong one (Linzen et al. 2016;
Goldberg 2019 masks the verb in the same way), and per head the share of attention from each
token to the previous / next token and to [CLS] / [SEP], and from the masked verb to its true
subject noun (the ground truth of the grammar). :func:`agreement_table` sets that accuracy beside
the nearest-noun and first-noun shortcuts. Training is in :mod:`bertlib.tiny.pretrain`, which
measures a set of its own (the check set) while it trains.

"Probe" in notebook 09 means only the linear classifier of :mod:`bertlib.tiny.linear_probe`
(Hewitt & Liang 2019), never a set of sentences.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import WhitespaceSplit
from tokenizers.processors import TemplateProcessing

from bertlib.checks import attention_stack, items, positions, same_shape, token_batch, whole
from bertlib.lab.analysis import key_share, offset_share
from bertlib.paper.attention import softmax
from bertlib.tiny import grammar

__all__ = ["SPECIALS", "build_tokenizer", "MaskingIds", "encode_texts", "logits_and_attentions",
           "hidden_states", "masking_ids", "pair_share", "first_crossing", "SentenceSet",
           "make_sentence_set", "subset", "measure_on", "agreement_table", "plural_of",
           "sentence_ids", "accuracy_by"]

SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")

# --------------------------------------------------------------------------------------------
# Tokenizer
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


class MaskingIds(NamedTuple):
    """What :func:`bertlib.paper.mlm.mask_batch` needs from a tokenizer: [MASK]'s id, the
    vocabulary size (random replacements are drawn from it) and the special ids (never chosen)."""

    mask_id: int
    vocab_size: int
    special_ids: list[int]


def masking_ids(tokenizer) -> MaskingIds:
    """The tiny tokenizer's [MASK] id, vocabulary size and SPECIALS' ids, read in one place
    (the training loop, mlm_accuracy and make_sentence_set all take them from here)."""
    return MaskingIds(tokenizer.token_to_id("[MASK]"), tokenizer.get_vocab_size(),
                      [tokenizer.token_to_id(s) for s in SPECIALS])


def encode_texts(tokenizer, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(input_ids (B, N) int64, attention_mask (B, N) int64) for a batch, padded to the longest."""
    enc = tokenizer.encode_batch(items(texts, "texts", "strings"))
    ids = np.array([e.ids for e in enc], dtype=np.int64)
    return ids, np.array([e.attention_mask for e in enc], dtype=np.int64)


# --------------------------------------------------------------------------------------------
# Measures on attention maps
# --------------------------------------------------------------------------------------------
def pair_share(A, queries: Sequence[int], keys: Sequence[int]) -> np.ndarray:
    """Mean over pairs (q, k) of A[..., q, k]: e.g. each verb's attention to its subject."""
    A = attention_stack(A)
    q, k = (positions(x, name, A.shape[-1]) for x, name in ((queries, "queries"), (keys, "keys")))
    same_shape(q, k, ("queries", "keys"))
    whole(q.size, "the number of (query, key) pairs", 1)
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
# Sets of test sentences: every verb of a set of sentences masked in turn
# --------------------------------------------------------------------------------------------
class SentenceSet(NamedTuple):
    """A set of test sentences, one row per (sentence, verb): the input with that verb masked,
    and its ground truth (not a probe: in notebook 09 a probe is a linear classifier).

    ids, attention_mask (padding flags, 1 = real token): (R, N) int64. verb, subject, nearest,
    first: (R,) token positions ([CLS] = 0).
    right, wrong: (R,) ids of the right and the other verb form. construction, role: (R,) str.
    attractors: (R,) int; differs: (R,) bool (an attractor of the other number). length: (R,).
    """

    ids: np.ndarray
    attention_mask: np.ndarray
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


def make_sentence_set(tokenizer, sentences: Sequence[grammar.Sentence]) -> SentenceSet:
    """The :class:`SentenceSet` of ``sentences``: one row per verb, that verb replaced by [MASK]."""
    ids, attention_mask = encode_texts(tokenizer, [s.text for s in sentences])
    mask_id = masking_ids(tokenizer).mask_id
    rows = []
    for b, s in enumerate(sentences):
        for v in s.verbs:
            x = ids[b].copy()
            x[v.position + 1] = mask_id
            rows.append((x, attention_mask[b], v.position + 1, v.subject + 1,
                         grammar.nearest_noun(s, v) + 1, grammar.first_noun(s) + 1,
                         ids[b, v.position + 1],
                         tokenizer.token_to_id(grammar.other_form(s.words[v.position])),
                         s.construction, v.role, v.attractors, v.attractor_differs,
                         int(attention_mask[b].sum())))
    cols = list(zip(*rows, strict=True))
    return SentenceSet(*(np.array(c) for c in cols))


def subset(sentence_set: SentenceSet, rows) -> SentenceSet:
    """The set's rows selected by ``rows`` ((R,) bool or indices)."""
    return SentenceSet(*(np.asarray(field)[rows] for field in sentence_set))


def logits_and_attentions(model, ids, attention_mask, batch: int = 512
                          ) -> tuple[np.ndarray, np.ndarray]:
    """The tiny BERT (a ``BertForMaskedLM``) run on R padded rows, without gradients, in chunks
    of ``batch`` rows. ids: (R, N) token ids; attention_mask: (R, N) 0/1 padding flags (1 = real
    token).
    Returns (logits at every position (R, N, V), attentions (R, L, H, N, N)) as numpy arrays."""
    token_batch(ids, attention_mask, model.config.vocab_size)
    logits, maps = [], []
    with torch.no_grad():
        for i in range(0, len(ids), batch):
            out = model(input_ids=torch.as_tensor(ids[i:i + batch]),
                        attention_mask=torch.as_tensor(attention_mask[i:i + batch]),
                        output_attentions=True)
            logits.append(out.logits.numpy())
            maps.append(torch.stack(out.attentions, 1).numpy())
    return np.concatenate(logits), np.concatenate(maps)


def hidden_states(model, sentence_set: SentenceSet, batch: int = 512) -> np.ndarray:
    """Every layer's hidden states of a sentence set's rows: (R, L + 1, N, d) float32 (index 0 is
    the     embeddings' output, index l + 1 layer l's output)."""
    out = []
    with torch.no_grad():
        for i in range(0, len(sentence_set.ids), batch):
            run = model.bert(input_ids=torch.as_tensor(sentence_set.ids[i:i + batch]),
                             attention_mask=torch.as_tensor(
                                 sentence_set.attention_mask[i:i + batch]),
                             output_hidden_states=True)
            out.append(torch.stack(run.hidden_states, 1).numpy())
    return np.concatenate(out)


def measure_on(model, sentence_set: SentenceSet) -> dict[str, np.ndarray]:
    """Run the model on a set of test sentences. Returns per row "correct" (R,) bool (right form
    more probable than the wrong one), "log_odds" (R,) (log p(right) − log p(wrong)), "p_right"
    (R,) (softmax probability of the right form), and per head (L, H): "subject" (masked verb -> its
    subject), "subject_far" (the same, only over the rows whose subject is not the word just
    before the verb; NaN when there is none), "previous", "next", "[CLS]", "[SEP]" shares
    (averaged over rows, each over its real tokens)."""
    logits, maps = logits_and_attentions(model, sentence_set.ids, sentence_set.attention_mask)
    r = np.arange(len(sentence_set.ids))
    at_verb = logits[r, sentence_set.verb].astype(np.float64)
    p = softmax(at_verb)
    # (R, L, H): each row's masked verb -> its own subject, on that row's maps
    to_subject = np.stack([pair_share(A, [v], [s]) for A, v, s in
                           zip(maps, sentence_set.verb, sentence_set.subject, strict=True)])
    out = {"correct": at_verb[r, sentence_set.right] > at_verb[r, sentence_set.wrong],
           "log_odds": at_verb[r, sentence_set.right] - at_verb[r, sentence_set.wrong],
           "p_right": p[r, sentence_set.right],
           "subject": to_subject.mean(0)}
    far = sentence_set.verb - sentence_set.subject > 1
    out["subject_far"] = (to_subject[far].mean(0) if far.any()
                          else np.full(maps.shape[1:3], np.nan))
    shares = {"previous": [], "next": [], "[CLS]": [], "[SEP]": []}
    for n in np.unique(sentence_set.length):
        A = maps[sentence_set.length == n][..., :n, :n]
        shares["previous"].append(offset_share(A, -1).sum(0))
        shares["next"].append(offset_share(A, 1).sum(0))
        # by position: a row is one sentence cut to its n tokens, [CLS] at 0, [SEP] at n − 1
        shares["[CLS]"].append(key_share(A, [0]).sum(0))
        shares["[SEP]"].append(key_share(A, [n - 1]).sum(0))
    out.update({k: np.sum(v, 0) / len(r) for k, v in shares.items()})
    return out


# --------------------------------------------------------------------------------------------
# Agreement tables
# --------------------------------------------------------------------------------------------
def agreement_table(sentence_set: SentenceSet, correct) -> dict[str, dict[str, float]]:
    """Per "construction · role": the model's accuracy (``correct``, (R,) bool) beside the
    nearest-noun and first-noun shortcuts' accuracy, and the number of rows."""
    correct = np.asarray(correct, dtype=bool)
    same_shape(correct, sentence_set.verb, ("correct", "the set's rows"))
    plural = plural_of(sentence_set)
    nearest_ok = plural[0] == plural[1]
    first_ok = plural[0] == plural[2]
    table = {}
    for c in dict.fromkeys(sentence_set.construction):
        for role in ("main", "middle", "inner"):
            rows = (sentence_set.construction == c) & (sentence_set.role == role)
            if rows.any():
                table[f"{c} · {role}"] = {"model": correct[rows].mean(),
                                          "nearest noun": nearest_ok[rows].mean(),
                                          "first noun": first_ok[rows].mean(),
                                          "n": int(rows.sum())}
    return table


def plural_of(sentence_set: SentenceSet) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(verb plural, nearest noun plural, first noun plural), each (R,) bool, from the ids:
    a word is plural when it is the grammar's plural form."""
    plural_words = set(grammar.NOUNS.values()) | set(grammar.INTRANSITIVE.values()) | set(
        grammar.TRANSITIVE.values()) | set(grammar.COMPLEMENT.values())
    r, orig = np.arange(len(sentence_set.ids)), _unmasked(sentence_set)
    return tuple(np.array([_WORDS[i] in plural_words for i in orig[r, pos]])
                 for pos in (sentence_set.verb, sentence_set.nearest, sentence_set.first))


def sentence_ids(sentence_set: SentenceSet) -> np.ndarray:
    """The sentence each row comes from, (R,) int in 0 .. S − 1 for S distinct sentences: rows of
    one sentence differ only at their masked verb, so with the right form put back there they
    are equal (numbered in sorted order of their ids; two equal sentences in the set share a
    number, as they should when rows are grouped, e.g. ``groups`` of
    :func:`bertlib.tiny.linear_probe.probe_draws`)."""
    return np.unique(_unmasked(sentence_set), axis=0, return_inverse=True)[1].reshape(-1)


def _unmasked(sentence_set: SentenceSet) -> np.ndarray:
    """The rows' ids (R, N) with the right verb form back at each row's masked verb."""
    orig = sentence_set.ids.copy()
    orig[np.arange(len(orig)), sentence_set.verb] = sentence_set.right
    return orig


_WORDS = list(SPECIALS) + grammar.vocabulary()


def accuracy_by(sentence_set: SentenceSet, correct, rows) -> float:
    """The model's accuracy over the rows of a sentence set selected by ``rows`` ((R,) bool)."""
    rows = np.asarray(rows, dtype=bool)
    same_shape(rows, sentence_set.verb, ("rows", "the sentence set's rows"))
    whole(rows.sum(), "the number of rows selected", 1)
    return float(np.asarray(correct)[rows].mean())
