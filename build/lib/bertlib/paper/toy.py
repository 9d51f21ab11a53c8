"""The toy sentence "The cat sat on the mat", with numbers small enough to check by hand.

Each word gets a 4-number embedding whose dimensions mean something we chose:
``[determiner, noun, verb, spatial]``. "spatial" marks words about where something is: the
preposition "on" and the noun "mat" (a place to sit on) carry it. The projections are whole
numbers picked so that the attention weights tell a story a learner can predict before computing it:

- single head (notebook 01): nouns look for a verb, so "cat" attends most to "sat", and second
  to "mat";
- two heads (notebook 02): head 0 is that verb-tracking head; head 1 links a noun to a related
  noun (a place), so in head 1 "cat" attends most to "mat".

These projections are designed, not learned: a trained model finds its own (notebook 03).
"""

from __future__ import annotations

import numpy as np

TOKENS: list[str] = ["the", "cat", "sat", "on", "the", "mat"]
SENTENCE = "The cat sat on the mat"
FEATURES: list[str] = ["determiner", "noun", "verb", "spatial"]

#: d_model = 4: one row per token, one column per feature above.
_EMBEDDING = {
    "the": [1, 0, 0, 0],
    "cat": [0, 1, 0, 0],
    "sat": [0, 0, 1, 0],
    "on": [0, 0, 0, 1],
    "mat": [0, 1, 0, 1],
}

# Single head, d_k = d_v = 2. Rows: input features; columns: the 2 query/key/value dimensions.
# Key dim 0 = "I am a verb", key dim 1 = "I am a noun or a spatial word".
_W_Q = [[0, 1],  # a determiner looks for a noun
        [2, 1],  # a noun looks for a verb (strongly) and a noun (weakly)
        [0, 2],  # a verb looks for nouns
        [0, 1]]  # a spatial word looks for nouns
_W_K = [[0, 0],
        [0, 1],
        [2, 0],
        [0, 1]]
_W_V = [[1, 0],
        [0, 1],
        [1, 1],
        [0, 0]]

# Head 1 of the two-head example: a noun looks for a noun that is also spatial (a place).
_W_Q1 = [[0, 0],
         [1, 1],
         [0, 0],
         [0, 1]]
_W_K1 = [[0, 0],
         [0, 1],
         [0, 0],
         [2, 0]]
_W_V1 = [[0, 0],
         [1, 0],
         [0, 0],
         [0, 1]]


def embeddings() -> np.ndarray:
    """X: (6, 4) float array, one row per token of TOKENS (the two "the" rows are identical)."""
    return np.array([_EMBEDDING[t] for t in TOKENS], dtype=float)


def projections() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(W_Q, W_K, W_V) of the single toy head, each (4, 2): Q = X W_Q etc."""
    return np.array(_W_Q, float), np.array(_W_K, float), np.array(_W_V, float)


def two_head_projections() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(W_Q, W_K, W_V, W_O) for h = 2 heads of d_k = 2 on d_model = 4.

    W_Q, W_K, W_V: (4, 4) = the two heads' (4, 2) matrices side by side, head 0 in columns 0-1
    (the single head above), head 1 in columns 2-3. W_O: (4, 4) identity, so the concatenated
    head outputs pass through unchanged.
    """
    W_Q0, W_K0, W_V0 = projections()
    W_Q = np.hstack([W_Q0, np.array(_W_Q1, float)])
    W_K = np.hstack([W_K0, np.array(_W_K1, float)])
    W_V = np.hstack([W_V0, np.array(_W_V1, float)])
    return W_Q, W_K, W_V, np.eye(4)
