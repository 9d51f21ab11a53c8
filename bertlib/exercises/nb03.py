"""Checkers for notebook 03's "Try it" exercises, on the bundled pretrained BERT.

1. :func:`check_embeddings`: the embedding output E = LayerNorm(W_word[t] + W_pos + W_type[s])
   of a sentence, computed from the weights (``bertlib.bert.bert_weights``). Recognises a
   forgotten LayerNorm, position or token-type embedding, and a wrong shape.
2. :func:`check_heads`: every (layer, head) in which one word's largest weight, leaving out
   [CLS] and [SEP], goes to another word. Recognises 1-based numbering, special tokens left in,
   and missing or extra heads.
"""

from __future__ import annotations

import numpy as np

from bertlib.exercises import Feedback

__all__ = ["ATOL", "EMBED_TEXT", "QUERY", "TARGET", "HEADS_TEXT", "check_embeddings",
           "heads_where_top", "check_heads"]

#: Tolerance for the embedding check: float32 answers (torch) pass, every mistake below fails.
ATOL = 1e-4
EMBED_TEXT = "The cat sat on the mat"
HEADS_TEXT = "The quick brown fox jumps over the lazy dog"
QUERY, TARGET = "jumps", "fox"


def _embedding_variants(text: str) -> dict[str, np.ndarray]:
    from bertlib.bert import bert_weights, layer_norm
    from bertlib.models import encode

    w = bert_weights()
    enc = encode(text)
    ids, types = enc["input_ids"][0].numpy(), enc["token_type_ids"][0].numpy()
    n = len(ids)
    word = w.word[ids].astype(np.float64)
    pos, typ = w.position[:n], w.token_type[types]

    def ln(x):
        return layer_norm(x, w.emb_gamma, w.emb_beta, w.eps)

    return {"right": ln(word + pos + typ), "no LayerNorm": word + pos + typ,
            "no position": ln(word + typ), "no token type": ln(word + pos),
            "word only": ln(word)}


_EMBED_HINTS = {
    "no LayerNorm": "you added the three embeddings but did not apply the LayerNorm "
                    "(γ (x − μ)/√(σ² + ε) + β over the 384 features of each token)",
    "no position": "the position embeddings are missing: without them BERT could not tell "
                   "'dog bites man' from 'man bites dog' (add w.position[:n])",
    "no token type": "the token-type (segment) embedding is missing: even a single sentence "
                     "adds w.token_type[0] to every token",
    "word only": "you used only the word embeddings: add the position and token-type "
                 "embeddings before the LayerNorm",
}


def check_embeddings(E, text: str = EMBED_TEXT) -> Feedback:
    """Check a learner's embedding output E, shape (n, 384), for ``text``."""
    variants = _embedding_variants(text)
    expected = variants["right"]
    if E is None:
        return Feedback(False, "expected an array E of shape (n, 384), got None (did you "
                               "forget to assign it?)")
    if hasattr(E, "detach"):
        E = E.detach().cpu().numpy()
    try:
        E = np.asarray(E, dtype=float)
    except (TypeError, ValueError):
        return Feedback(False, f"expected E as an array of numbers, got {type(E).__name__}")
    if E.shape != expected.shape:
        return Feedback(False, f"wrong shape: E should be (n, d) = {expected.shape} (one row per "
                               f"word piece, [CLS] and [SEP] included); yours is {E.shape}")
    if not np.isfinite(E).all():
        return Feedback(False, "E contains NaN or inf: check the LayerNorm's division")
    for name, V in variants.items():
        if np.allclose(E, V, rtol=0, atol=ATOL):
            if name == "right":
                return Feedback(True, f"correct: E matches BERT's embedding output "
                                      f"(within {ATOL:g}) for all {E.shape[0]} pieces")
            return Feedback(False, _EMBED_HINTS[name])
    worst = float(np.abs(E - expected).max())
    return Feedback(False, f"E differs from BERT's embedding output by up to {worst:.3g}; "
                           "build it as LayerNorm(word + position + token type)")


def heads_where_top(query: str = QUERY, target: str = TARGET, text: str = HEADS_TEXT,
                    skip_special: bool = True) -> list[tuple[int, int]]:
    """Every 0-based (layer, head) whose largest weight from ``query`` goes to ``target``.

    skip_special: leave [CLS] and [SEP] out of the comparison (they often take most weight).
    """
    from bertlib.models import attention_maps

    tokens, A = attention_maps(text)
    for word in (query, target):
        if word not in tokens:
            raise ValueError(f"{word!r} is not a word piece of {text!r}: {tokens}")
    row = A[:, :, tokens.index(query), :].copy()  # (layers, heads, n)
    if skip_special:
        row[..., [t in ("[CLS]", "[SEP]") for t in tokens]] = -1.0
    top = row.argmax(axis=-1)
    hits = np.argwhere(top == tokens.index(target))
    return [(int(layer), int(head)) for layer, head in hits]


def check_heads(heads, query: str = QUERY, target: str = TARGET) -> Feedback:
    """Check a learner's list of (layer, head) pairs, 0-based, for the exercise above."""
    expected = set(heads_where_top(query, target))
    try:
        answer = {(int(layer), int(head)) for layer, head in heads}
    except (TypeError, ValueError):
        return Feedback(False, "give a list of (layer, head) pairs of whole numbers, e.g. "
                               "[(0, 2), (3, 11)]")
    if answer == expected:
        return Feedback(True, f"correct: {len(expected)} head(s) {sorted(expected)} send "
                              f"{query!r}'s largest weight (after [CLS]/[SEP]) to {target!r}")
    if answer and {(layer - 1, head - 1) for layer, head in answer} == expected:
        return Feedback(False, "your numbers are 1-based; bertlib and numpy count layers and "
                               "heads from 0")
    if answer == set(heads_where_top(query, target, skip_special=False)):
        return Feedback(False, "you kept [CLS] and [SEP] in the comparison: set their weights "
                               "aside (e.g. to -1) before taking the argmax")
    missing, extra = sorted(expected - answer), sorted(answer - expected)
    parts = []
    if missing:
        parts.append(f"{len(missing)} head(s) missing")
    if extra:
        parts.append(f"{len(extra)} head(s) that do not qualify, e.g. {extra[0]}")
    return Feedback(False, "; ".join(parts) + f" (expected {len(expected)} in total)")
