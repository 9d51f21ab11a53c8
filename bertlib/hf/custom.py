"""Prior knowledge in BERT's attention: a word-similarity matrix multiplied into the scores.

After Xia et al. 2021, "Using Prior Knowledge to Guide BERT's Attention in Semantic Textual
Matching Tasks" (WWW). For a sentence pair ``[CLS] a [SEP] b [SEP]`` a prior matrix R (n, n) (R for
relatedness; S is the scores in this series) holds 1 inside each sentence and a word similarity
across the two; in the chosen layers (the paper: the first) each head computes its attention

    A = softmax((Q Kᵀ / √d_k) ⊙ R + mask),      output = A V,

with the same R for every head. It plugs into a pretrained ``transformers`` BERT through the
``AttentionInterface`` registry, so no transformers class is patched: :func:`use_prior_attention`
switches a model to the registered function, which runs standard eager attention in every layer
except the chosen ones, and :meth:`PriorAttention.undo` switches it back.

The rule for R follows the authors' released code (github.com/xiatingyu/Bert_sim,
``UER/get_similarity.py`` and ``UER/run_sim.py`` ``read_dataset``): punctuation is removed from
both sentences before BERT reads them (``punctuation="remove"``); within a sentence R = 1, except
that the first [SEP] gets 0 with every piece (``first_sep="zero"``: their matrix puts that [SEP] on
both sides of the cross block, where it counts as a special token); across the sentences:
- [CLS], [SEP], punctuation and 34 stop words (:data:`STOP_WORDS`; ``stop_words=()``: none) get 0;
- two content words get their similarity: 1 for the same word; otherwise the lexicon's score
  (:data:`RELATION_SCORES`), the cosine of the model's own input word embeddings clipped at 0,
  or WordNet as their UER function computes it (1 for synonyms and antonyms, which their ESIM
  script leaves to Wu-Palmer; else Wu-Palmer averaged over sense pairs) with ``nltk``'s data;
- every word piece of a word carries the word's value; padding (in a batch) gets 0.
"""

from __future__ import annotations

import csv
import functools
import math
import string
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from bertlib.checks import check_finite, has_shape, items, kind, number, one_of, whole
from bertlib.hf.attention_interface import eager_attention, register_attention, softmax_weights
from bertlib.hf.loading import LoadedBert, bert_module, load_bert
from bertlib.hf.models import encode

__all__ = ["PRIOR_ATTENTION", "MODES", "SOURCES", "STOP_WORDS", "SERIES_STOP_WORDS", "PUNCTUATION",
           "FIRST_SEP", "RELATION_SCORES", "strip_punctuation", "PriorGate", "PriorAttention",
           "load_lexicon", "similarity_prior", "prior_weights", "prior_attention_forward",
           "use_prior_attention"]

#: The name under which the prior-guided attention is registered with transformers.
PRIOR_ATTENTION = "bertlib_prior"
MODES = ("multiply", "parallel")
SOURCES = ("lexicon", "embedding", "wordnet")

#: 0 across sentences: the stop words of get_similarity() in their UER/get_similarity.py, which
#: that script does not call; ESIM/.../get_similarity.py, which their README runs, has none.
STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then "
    "there these they this to was will with am".split()
)
SERIES_STOP_WORDS = frozenset(  # the series' earlier list (79 words), kept to measure it
    "a an the this that these those is are was were be been being am do does did has have had "
    "will would can could to of in on at by for from with into onto along across through up "
    "down out over under about after before until than and or but not no so too very it its "
    "he she they we you i me him her them us my your his our their some any there here".split()
)
PUNCTUATION = ("remove", "keep")
FIRST_SEP = ("zero", "sentence_a")

#: Lexicon relation -> similarity, mimicking Wu-Palmer's fall with path length in a taxonomy.
#: Synonyms and antonyms both get 1, as in their UER function (their ESIM script: synonyms).
RELATION_SCORES = {
    "synonym": 1.0,
    "antonym": 1.0,
    "hypernym": 0.8,  # word_b is the direct broader term of word_a (cat -> feline)
    "hypernym2": 0.6,  # two steps up (cat -> animal)
    "sibling": 0.5,  # two kinds of the same thing (cat, dog)
}

_DATA = Path(__file__).resolve().parents[1] / "data"
_WORDNET_HELP = (
    "source='wordnet' needs the nltk package and its WordNet data, which are not installed here. "
    "To enable it: `pip install nltk` and then `python -m nltk.downloader wordnet`. "
    "Otherwise use source='lexicon' or source='embedding'."
)


def load_lexicon(path: str | Path | None = None) -> dict[tuple[str, str], float]:
    """The word-relation lexicon as {(word_a, word_b): similarity}, both orders present.

    The file is a TSV with columns word_a, word_b, relation (a key of :data:`RELATION_SCORES`);
    default: ``bertlib/data/lexicon.tsv`` (written for this project, see custom_data.md).
    """
    path = Path(path) if path is not None else _DATA / "lexicon.tsv"
    return dict(_read_lexicon(str(path)))


@functools.lru_cache(maxsize=4)
def _read_lexicon(path: str) -> tuple[tuple[tuple[str, str], float], ...]:
    table: dict[tuple[str, str], float] = {}
    with open(path, encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            relation = row["relation"]
            if relation not in RELATION_SCORES:
                raise ValueError(
                    f"{path}: unknown relation {relation!r} for {row['word_a']!r}-{row['word_b']!r}"
                    f"; expected one of {sorted(RELATION_SCORES)}"
                )
            a, b = row["word_a"].lower(), row["word_b"].lower()
            table[a, b] = table[b, a] = RELATION_SCORES[relation]
    return tuple(table.items())


def _check_words(x: str | Sequence[str], name: str) -> str:
    """A sentence of the pair: a string, or a list of words joined by spaces (else TypeError)."""
    if isinstance(x, str):
        return x
    if isinstance(x, Sequence) and all(isinstance(w, str) for w in x):
        return " ".join(x)
    raise TypeError(f"{name} must be a sentence (str) or a list of words, got {type(x).__name__}")


def _lookup(word: str, vocab: set[str]) -> str:
    """The lexicon's form of ``word``: itself, or without a plural 's' when only that is known."""
    if word not in vocab and word.endswith("s") and word[:-1] in vocab:
        return word[:-1]
    return word


def _lexicon_similarity(words_a: list[str], words_b: list[str], lexicon) -> np.ndarray:
    vocab = {w for pair in lexicon for w in pair}
    sim = np.zeros((len(words_a), len(words_b)))
    for i, wa in enumerate(words_a):
        for j, wb in enumerate(words_b):
            la, lb = _lookup(wa, vocab), _lookup(wb, vocab)
            sim[i, j] = 1.0 if la == lb else lexicon.get((la, lb), 0.0)
    return sim


def _embedding_similarity(words_a, words_b, pieces_a, pieces_b, bert) -> np.ndarray:
    """Cosine of mean input word-piece embeddings per word, clipped at 0; same word -> 1."""
    E = bert.get_input_embeddings().weight.detach()

    def vectors(pieces: list[list[int]]) -> torch.Tensor:
        V = torch.stack([E[ids].mean(0) for ids in pieces])
        return V / V.norm(dim=-1, keepdim=True)

    cos = (vectors(pieces_a) @ vectors(pieces_b).T).double().numpy()
    same = np.array(words_a)[:, None] == np.array(words_b)[None, :]
    return np.where(same, 1.0, np.clip(cos, 0.0, 1.0))


def _wordnet_similarity(words_a: list[str], words_b: list[str]) -> np.ndarray:
    """Xia et al.'s WordNet similarity of each word of a with each word of b: (len(a), len(b)).

    1 for the same word (their code: only if it is a lemma of its senses, so not "dogs"), for
    words that share a synset (synonyms) or are antonyms (their UER function); otherwise the
    Wu-Palmer similarity 2·depth(LCS) / (depth(s1) + depth(s2)) averaged over all pairs of
    synsets (s1 of word a, s2 of word b, both ways), leaving out the pairs with no common
    ancestor (None), as the authors' code does (0 when no pair has one); 0 when either word has
    no synset. Needs nltk and its WordNet data (ValueError saying how to add them).
    """
    try:
        from nltk.corpus import wordnet as wn

        wn.synsets("cat")
    except (ImportError, LookupError) as exc:
        raise ValueError(_WORDNET_HELP) from exc

    def antonyms(synsets) -> set:
        return {a.synset() for s in synsets for lemma in s.lemmas() for a in lemma.antonyms()}

    sim = np.zeros((len(words_a), len(words_b)))
    for i, wa in enumerate(words_a):
        sa = wn.synsets(wa)
        for j, wb in enumerate(words_b):
            sb = wn.synsets(wb)
            if wa == wb:
                sim[i, j] = 1.0
            elif not sa or not sb:
                sim[i, j] = 0.0
            elif set(sa) & set(sb) or antonyms(sa) & set(sb):
                sim[i, j] = 1.0
            else:
                sim[i, j] = _wup_mean(sa, sb)
    return sim


def _wup_mean(sa, sb) -> float:
    """Mean Wu-Palmer over sense pairs both ways, pairs with no common ancestor left out."""
    scores = [w for x in sa for y in sb for w in (x.wup_similarity(y), y.wup_similarity(x))
              if w is not None]
    return float(np.mean(scores)) if scores else 0.0


def strip_punctuation(text: str) -> str:
    """``text`` without ASCII punctuation (``string.punctuation``), as the authors' code prepares
    each sentence before BERT reads it and before the prior is built ("mat." -> "mat")."""
    return text.translate(str.maketrans("", "", string.punctuation))


def similarity_prior(tokens_a: str | Sequence[str], tokens_b: str | Sequence[str],
                     source: str = "lexicon", model: LoadedBert | None = None,
                     lexicon: dict[tuple[str, str], float] | None = None,
                     stop_words=STOP_WORDS, punctuation: str = "remove",
                     first_sep: str = "zero") -> np.ndarray:
    """The prior R (n, n) over the word pieces of ``[CLS] a [SEP] b [SEP]``, as BERT sees them.

    tokens_a, tokens_b: the two sentences (a string, or a list of words joined by spaces).
    source: "lexicon" (``lexicon`` or bertlib/data/lexicon.tsv), "embedding" (cosine of the
    model's input word embeddings, clipped at 0) or "wordnet" (needs nltk and its data).
    punctuation: "remove" (the authors' rule: :func:`strip_punctuation` before tokenising, so n
    counts the pieces of the stripped pair) or "keep" (punctuation pieces get 0 across).
    R[i, j] = 1 when pieces i and j are in the same sentence ([CLS] belongs to a, the last [SEP]
    to b); the first [SEP] is 0 with every piece (``first_sep="zero"``, the authors' matrix) or
    belongs to a (``"sentence_a"``); across sentences R[i, j] = similarity of their words, and 0
    when either is [CLS]/[SEP], punctuation or in ``stop_words``. Pieces of one word share its
    value. Returns a symmetric float32 array with values in [0, 1]; n = len(encode(a, b)).
    Raises ValueError for an empty sentence, a pair longer than the model's positions, an
    unknown source, or source="wordnet" without nltk's WordNet (the message says how to add it).
    """
    one_of(source, "source", SOURCES)
    one_of(punctuation, "punctuation", PUNCTUATION)
    one_of(first_sep, "first_sep", FIRST_SEP)
    kind(stop_words, "stop_words", (set, frozenset, list, tuple), "a set of words")
    stop_words = frozenset(str(w).lower() for w in stop_words)
    for words, value in (lexicon or {}).items():
        number(value, f"the lexicon similarity of {words}", 0.0, 1.0)
    model = model or load_bert()
    a, b = _check_words(tokens_a, "tokens_a"), _check_words(tokens_b, "tokens_b")
    if punctuation == "remove":
        a, b = strip_punctuation(a), strip_punctuation(b)
    enc = encode(a, b, model)
    ids = enc["input_ids"][0].tolist()
    words, text = _words(enc, model.tokenizer.convert_ids_to_tokens(ids))
    content = [[k for k in words if k[0] == s and text[k].isalnum() and text[k] not in stop_words]
               for s in (0, 1)]
    segment = np.asarray(enc["token_type_ids"][0])
    R = (segment[:, None] == segment[None, :]).astype(np.float64)
    if first_sep == "zero":
        sep = ids.index(model.tokenizer.sep_token_id)
        R[sep, :] = R[:, sep] = 0.0
    wa, wb = [text[k] for k in content[0]], [text[k] for k in content[1]]
    if wa and wb:
        if source == "lexicon":
            sim = _lexicon_similarity(wa, wb, lexicon if lexicon is not None else load_lexicon())
        elif source == "embedding":
            sim = _embedding_similarity(wa, wb, [[ids[p] for p in words[k]] for k in content[0]],
                                        [[ids[p] for p in words[k]] for k in content[1]],
                                        bert_module(model))
        else:
            sim = _wordnet_similarity(wa, wb)
        for i, ka in enumerate(content[0]):
            for j, kb in enumerate(content[1]):
                rows, cols = np.ix_(words[ka], words[kb])
                R[rows, cols] = R[cols.T, rows.T] = sim[i, j]
    return R.astype(np.float32)


def _words(enc, pieces: list[str]):
    """({(sentence, word index): piece positions}, {(sentence, word index): the word's text})."""
    words: dict[tuple[int, int], list[int]] = {}
    for pos, (s, w) in enumerate(zip(enc.sequence_ids(0), enc.word_ids(0), strict=True)):
        if s is not None:
            words.setdefault((s, w), []).append(pos)
    text = {k: "".join(pieces[p].removeprefix("##") for p in v) for k, v in words.items()}
    return words, text


class PriorGate(torch.nn.Module):
    """Per-layer settings of the prior-guided attention, attached to that layer's self-attention.

    mode "multiply": A = softmax(scores ⊙ R + mask).
    mode "parallel": A = (1 − g)·softmax(scores + mask) + g·softmax(scores ⊙ R + mask),
    with g = ``gate`` fixed, or g = sigmoid(θ) for a learned scalar nn.Parameter θ (initialised
    so that g = ``gate``). Both are mixtures of attention distributions, so rows still sum to 1.
    """

    def __init__(self, mode: str, gate: float = 0.5, learn_gate: bool = False):
        super().__init__()
        self.mode = mode
        self.fixed_gate = None if learn_gate else float(gate)
        if learn_gate:
            self.gate_logit = torch.nn.Parameter(torch.tensor(math.log(gate / (1.0 - gate))))

    def gate(self):
        """g in [0, 1]: a float (fixed) or a 0-d tensor (learned)."""
        return self.fixed_gate if self.fixed_gate is not None else torch.sigmoid(self.gate_logit)


def _check_prior(prior, query, key, layer: int):
    """R as (batch, 1, n_q, n_k) after checking type, shape and values."""
    batch, _, n_q, _ = query.shape
    n_k = key.shape[2]
    if prior is None:
        raise ValueError(
            f"prior attention is on in layer {layer} but no prior was given: call the model "
            f"with prior=<tensor of shape ({batch}, {n_q}, {n_k})>"
        )
    kind(prior, "prior", torch.Tensor, "a torch tensor (batch, n, n)")
    has_shape(prior, "prior", (batch, n_q, n_k), "(batch, n, n)", "for this batch")
    check_finite(prior.detach(), "prior")
    if (prior < 0).any():
        raise ValueError(
            f"prior must be >= 0 everywhere (a similarity), got a minimum of {prior.min().item():g}"
        )
    return prior.to(query.dtype)[:, None]


def prior_weights(scores, R, attention_mask=None):
    """The prior-guided attention A = softmax(scores ⊙ R + mask): the one place the prior
    meets the scores (prior_attention_forward, finetune.link_effects). scores: (..., n_q, n_k) =
    Q Kᵀ · s; R: the prior, broadcasting to them (R = 1: the standard attention); attention_mask:
    the additive mask, or None. Returns A, the scores' shape."""
    return softmax_weights(None, scores * R, attention_mask)


def prior_attention_forward(module, query, key, value, attention_mask, scaling: float | None = None,
                            dropout: float = 0.0, prior=None, **kwargs):
    """The attention function registered as :data:`PRIOR_ATTENTION` (transformers' signature).

    query, key, value: (batch, h, n, d_k); attention_mask: additive float (batch, 1, n, n) from
    ``eager_mask`` (0 = may attend, a very negative number = padding) or None; prior: (batch, n, n)
    tensor, passed to the model's forward as ``prior=...``, broadcast over the h heads.
    :func:`bertlib.hf.attention_interface.eager_attention` (scores = Q Kᵀ · scaling,
    output = A V) in every layer; in a layer whose self-attention carries a
    :class:`PriorGate` (``module.prior_gate``) its attention is guided = softmax(scores ⊙ R + mask),
    combined as the gate's mode says.
    Returns (output (batch, n, h, d_k), the attention A (batch, h, n, n)).
    """
    settings = getattr(module, "prior_gate", None)
    if settings is None:
        return eager_attention(module, query, key, value, attention_mask, scaling, dropout)
    R = _check_prior(prior, query, key, module.layer_idx)

    def weights_of(module, scores, attention_mask):
        guided = prior_weights(scores, R, attention_mask)
        if settings.mode == "multiply":
            return guided
        g = settings.gate()
        return (1 - g) * softmax_weights(module, scores, attention_mask) + g * guided

    return eager_attention(module, query, key, value, attention_mask, scaling, dropout,
                           weights_of=weights_of)


@functools.cache
def _register() -> None:
    register_attention(PRIOR_ATTENTION, prior_attention_forward)


class PriorAttention:
    """Handle returned by :func:`use_prior_attention`; ``undo()`` or a ``with`` block ends it."""

    def __init__(self, bert, layers: tuple[int, ...], mode: str, original: str):
        self.model, self.layers, self.mode, self._original = bert, layers, mode, original
        self.active = True

    def gates(self) -> list:
        """The PriorGate of each chosen layer, in the order of ``layers``."""
        return [self.model.encoder.layer[i].attention.self.prior_gate for i in self.layers]

    def undo(self) -> None:
        """Remove the gates and restore the original attention implementation (idempotent)."""
        if not self.active:
            return
        for i in self.layers:
            delattr(self.model.encoder.layer[i].attention.self, "prior_gate")
        self.model.set_attn_implementation(self._original)
        self.active = False

    def __enter__(self) -> PriorAttention:
        return self

    def __exit__(self, *exc) -> None:
        self.undo()

    def __repr__(self) -> str:
        state = "on" if self.active else "undone"
        return f"PriorAttention(layers={list(self.layers)}, mode={self.mode!r}, {state})"


def use_prior_attention(model, layers: int | Sequence[int] = (0,), mode: str = "multiply",
                        gate: float = 0.5, learn_gate: bool = False) -> PriorAttention:
    """Make the chosen layers of ``model`` prior-guided; every other layer stays standard.

    model: LoadedBert or transformers BertModel (changed in place: deep-copy it to train).
    layers: layer indices in 0..L-1 (default: the first layer only, as in Xia et al. 2021).
    mode: "multiply" (softmax(scores ⊙ R + mask)) or "parallel" (gate g mixes the standard and
    the prior-guided attention; ``learn_gate=True`` makes g a trainable nn.Parameter starting at
    ``gate``). Registers :func:`prior_attention_forward` and the additive float mask
    (``eager_mask``) with transformers under :data:`PRIOR_ATTENTION` and switches the model to
    it; the model then needs ``prior=`` (batch, n, n) in every forward call.
    Returns a :class:`PriorAttention`: call ``.undo()`` or use it in a ``with`` block.
    """
    bert = bert_module(model)
    L = len(bert.encoder.layer)
    if isinstance(layers, int) and not isinstance(layers, bool):
        layers = (layers,)
    chosen = tuple(sorted({whole(i, "layer", 0, L - 1, why=f"({L} layers)")
                           for i in items(layers, "layers", f"layer indices in 0..{L - 1}")}))
    one_of(mode, "mode", MODES)
    number(gate, "gate", 0.0, 1.0)
    if learn_gate and mode != "parallel":
        raise ValueError("learn_gate=True needs mode='parallel' (the gate mixes two attentions)")
    if learn_gate and not 0.0 < gate < 1.0:
        raise ValueError(f"a learned gate starts strictly inside (0, 1), got gate={gate!r}")
    if bert.config._attn_implementation == PRIOR_ATTENTION:
        raise ValueError("prior attention is already on for this model: undo() it first")
    _register()
    for i in chosen:
        bert.encoder.layer[i].attention.self.add_module("prior_gate",
                                                        PriorGate(mode, gate, learn_gate))
    original = bert.config._attn_implementation
    bert.set_attn_implementation(PRIOR_ATTENTION)
    return PriorAttention(bert, chosen, mode, original)
