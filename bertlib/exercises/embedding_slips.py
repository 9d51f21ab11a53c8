"""The wrong answers that notebook 03's exercise 1 (:func:`bertlib.exercises.nb03.check_embeddings`)
names: the sums of the three embeddings a learner may compute instead of the right one, the
LayerNorms of the right sum that go wrong, what each is told, and the first wrong piece of a sum."""

from __future__ import annotations

import numpy as np

from bertlib.hf.loading import load_bert
from bertlib.hf.models import encode
from bertlib.hf.params import bert_params
from bertlib.paper.bert import layer_norm

#: Tolerance for the embedding check: float32 answers (torch) pass, every mistake below fails.
ATOL = 1e-4


def embedding_variants(pair: tuple[str, str], model=None) -> tuple[dict, tuple]:
    """({mistake name: (S, E)}, (pieces, token types, token-type rows)) for ``pair``."""
    model = model or load_bert()
    w = bert_params(model)
    enc = encode(*pair, model=model)
    ids, types = enc["input_ids"][0].numpy(), enc["token_type_ids"][0].numpy()
    n = len(ids)
    word = w.word[ids].astype(np.float64)
    pos, typ, typ_a = w.position[:n], w.token_type[types], w.token_type[np.zeros_like(types)]
    b = int(np.argmax(types == 1)) if types.any() else n  # sentence B's first piece
    restart = w.position[np.r_[np.arange(b), np.arange(n - b)]]  # B counted from 0 again
    sums = {"right": word + pos + typ, "all segment A": word + pos + typ_a,
            "positions restart": word + restart + typ,
            "positions from 1": word + w.position[1:n + 1] + typ,
            "no position": word + typ, "no token type": word + pos, "word only": word}
    out = {name: (S, layer_norm(S, w.emb_gamma, w.emb_beta, w.eps)) for name, S in sums.items()}
    S, learned = sums["right"], {"γ": w.emb_gamma, "β": w.emb_beta, "1": 1.0, "0": 0.0}
    for name, (axis, ddof, (scale, shift)) in LAYER_NORM_SLIPS.items():
        mu, var = S.mean(axis, keepdims=True), S.var(axis, ddof=ddof, keepdims=True)
        x = (S - mu) / np.sqrt(var + w.eps)
        out[name] = (S, learned[scale] * x + learned[shift])
    pieces = model.tokenizer.convert_ids_to_tokens(ids.tolist())
    return out, (pieces, types, w.token_type)


#: The LayerNorms of the right sum that go wrong: name -> (axis, ddof, its scale and shift).
LAYER_NORM_SLIPS = {"variance d - 1": (-1, 1, "γβ"), "token axis": (0, 0, "γβ"),
                     "whole matrix": (None, 0, "γβ"), "no γ, β": (-1, 0, "10"),
                     "γ, β swapped": (-1, 0, "βγ")}
EMBED_HINTS = {
    "all segment A": "every piece got the token type of sentence A (0): which sentence do the "
                     "pieces after the first [SEP] belong to, and which token-type (segment) row "
                     "do they add?",
    "positions restart": "the positions of sentence B start again at 0: positions run on "
                         "across the whole pair, [CLS] to the last [SEP]",
    "positions from 1": "the positions are off by one: the first piece, [CLS], is position 0",
    "no position": "the position embeddings are missing: without them BERT could not tell "
                   "'dog bites man' from 'man bites dog'",
    "no token type": "the token-type (segment) embedding is missing: each piece also adds the "
                     "row of its segment, 0 or 1",
    "word only": "you used only the word embeddings: the position and token-type ones are missing",
    "variance d - 1": "your LayerNorm's variance divides by d − 1 (the sample estimator, "
                      "ddof=1); LayerNorm divides by d, the number of features (ddof=0)",
    "token axis": "your LayerNorm takes the mean and variance over the tokens (axis 0); it "
                  "normalises each token over its own d features (the last axis)",
    "whole matrix": "your LayerNorm takes one mean and variance over the whole (n, d) array; it "
                    "normalises each token over its own d features (the last axis)",
    "no γ, β": "your LayerNorm stops at (x − μ)/√(σ² + ε): it then scales each feature by the "
               "learned γ and shifts it by β, the embedding LayerNorm's own (section 3's formula)",
    "γ, β swapped": "your LayerNorm scales each feature by β and shifts it by γ: γ is the scale "
                    "(it multiplies), β the shift (it is added), as in section 3's formula",
}


def match(answer: np.ndarray, variants: dict) -> str | None:
    """The name of the variant (of S or of E) that ``answer`` equals, or None."""
    for name, pair in variants.items():
        for which, V in zip("SE", pair, strict=True):
            if np.allclose(answer, V, rtol=0, atol=ATOL):
                return f"{which} {name}"
    return None



def first_wrong_piece(S: np.ndarray, variants: dict, pieces: tuple) -> str:
    """Which piece (position, token) of S is the first one off, and if its token type is the
    other segment's, say so: a [SEP] or a piece counted in the wrong sentence."""
    right = variants["right"][0]
    bad = np.flatnonzero(np.abs(S - right).max(axis=1) > ATOL)
    if len(bad) == 0 or len(bad) == len(S):
        return ""
    i = int(bad[0])
    piece, types, type_rows = pieces
    where = f"; the first wrong row is piece {i}, {piece[i]!r}"
    other = 1 - types[i]
    if other in (0, 1) and np.allclose(S[i], right[i] - type_rows[types[i]] + type_rows[other],
                                       rtol=0, atol=ATOL):
        return (f"{where}, which got the token type of segment {other} but belongs to segment "
                f"{types[i]}: segment A runs from [CLS] to the first [SEP], included; segment B "
                f"is everything after it ({len(bad)} row(s) wrong in all)")
    return f"{where} ({len(bad)} row(s) wrong in all)"

