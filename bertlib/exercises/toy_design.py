"""What notebook 01's design exercise (:func:`bertlib.exercises.nb01.check_design`) tells a
W_Q / W_K that falls short: the keys in the way of "cat" (asked about first, then pointed at, then
explained, one step per new try), and, when "cat" lost its verb, which query rows or keys the
learner's edit moved."""

from __future__ import annotations

import numpy as np

from bertlib.exercises.ladder import climb
from bertlib.paper import toy

_N = len(toy.TOKENS)


def toy_qkv(W_Q: np.ndarray | None = None, W_K: np.ndarray | None = None):
    """(Q, K, V), each (6, 2): the toy X (6, 4) times W_Q, W_K (4, 2; None = the toy's), W_V."""
    X, (W_Q0, W_K0, W_V0) = toy.embeddings(), toy.projections()
    return X @ (W_Q0 if W_Q is None else W_Q), X @ (W_K0 if W_K is None else W_K), X @ W_V0


def lost_verb(A: np.ndarray, Q, K, W_Q, W_K, atol: float) -> str:
    """"'cat' lost its verb: ..." with what "cat" attends to now (weights within ``atol`` tie)
    and what the edit moved (:func:`lost_verb_hint`), or "" while "cat" still attends most to
    "sat". A: the design's (6, 6) weights from Q, K (6, 2), made with W_Q, W_K (4, 2)."""
    i_cat, i_sat = toy.TOKENS.index("cat"), toy.TOKENS.index("sat")
    cat_top = toy.TOKENS[int(A[i_cat].argmax())]
    if cat_top == "sat":
        return ""
    top = [t for t, a in zip(toy.TOKENS, A[i_cat], strict=True) if A[i_cat].max() - a <= atol]
    most = (f"attends most to {cat_top!r} ({A[i_cat].max():.3f}), 'sat' gets "
            f"{A[i_cat, i_sat]:.3f}" if "sat" not in top else "splits its attention evenly "
            f"among {', '.join(map(repr, top))} ({A[i_cat].max():.3f} each), so 'sat' is no"
            " longer clearly first")
    return f"'cat' lost its verb: it {most}. " + lost_verb_hint(Q, K, i_cat, cat_top, W_Q, W_K)


def lost_verb_hint(Q, K, i_cat: int, winner: str, W_Q, W_K) -> str:
    """Hint when "cat" no longer attends most to "sat": ask about the matrix the learner changed
    (only keys that really moved are said to have moved: a W_K edit may leave these two alone)."""
    toy_K = toy.projections()[1]
    changed_q = not np.allclose(Q[i_cat], toy_qkv()[0][i_cat])  # the query of 'cat' moved
    changed_k = not np.allclose(W_K, toy_K)
    query = (f"The query of 'cat' is {np.round(Q[i_cat], 3).tolist()}: which rows of W_Q does it "
             "use, and which of them did you change?")
    if not changed_k:
        return query
    keys = _moved_keys_hint(K, ("sat", winner), np.round(Q[i_cat], 3).tolist())
    return keys + (" And, for W_Q: " + query[0].lower() + query[1:] if changed_q else "")


def _moved_keys_hint(K, words, q_cat) -> str:
    """What a W_K edit did to the keys of ``words``: the ones it moved (old -> new), or none."""
    K0 = toy_qkv()[1]
    rows = {w: toy.TOKENS.index(w) for w in words}
    moved = [w for w, j in rows.items() if not np.allclose(K[j], K0[j])]
    if not moved:
        return (f"Your W_K edit moved neither the key of 'sat' nor that of {words[1]!r} (still "
                f"{K[rows['sat']].tolist()} and {K[rows[words[1]]].tolist()}), so it is not what "
                "took 'cat' away from 'sat'.")
    told = "; ".join(f"{w!r} now has the key {np.round(K[rows[w]], 3).tolist()} "
                     f"(was {K0[rows[w]].tolist()})" for w in moved)
    kept = [w for w in rows if w not in moved]
    kept_text = f", {kept[0]!r} keeps {K0[rows[kept[0]]].tolist()}" if kept else ""
    return (f"You changed W_K, so keys moved: {told}{kept_text}; against the query of 'cat' "
            f"{q_cat}: which rows of W_K did you change, and which of these keys did that move?")


def key_hint(K: np.ndarray, i_cat: int, i_mat: int, keys_changed: bool = False, *,
             answer) -> str:
    """Why no query can single out "cat": another key equals it, or "mat"'s key is a multiple.
    A ladder over the stuck tries: a question, then which keys to compare, then the reason. K:
    (6, d_k) keys. answer: the learner's try, e.g. (W_Q, W_K): only a new one climbs; the same
    one again gets the same hint, saying so (:func:`bertlib.exercises.ladder.climb`)."""
    k_cat = K[i_cat]
    hints, rivals = [], []
    ties = [j for j in range(_N) if j != i_cat and np.allclose(K[j], k_cat)]
    if ties:
        rivals.append(ties[0])
        hints.append(f"{toy.TOKENS[ties[0]]!r} has the same key as 'cat' {k_cat.tolist()}, so no "
                     "query can prefer 'cat' to it")
    ratio = (K[i_mat] @ k_cat) / (k_cat @ k_cat) if k_cat @ k_cat > 0 else 0.0
    if ratio > 1 and np.allclose(K[i_mat], ratio * k_cat):
        rivals.append(i_mat)
        hints.append(f"the key of 'mat' {K[i_mat].tolist()} is {ratio:g} times the key of 'cat', "
                     "so any query that scores 'cat' high scores 'mat' itself higher")
    if not hints:
        return ""
    stuck, same = climb("nb01.keys", answer)
    if stuck == 1:  # first a question, then which keys to compare, then the reason (learner 30)
        return (". Look at the keys (section 4 printed K): can any query score 'cat' above "
                "every other key? If a new try is still stuck here, its check says which keys to "
                f"compare{same}")
    if stuck == 2:
        others = " and ".join(f"that of {toy.TOKENS[j]!r} {K[j].tolist()}" for j in rivals)
        return (f". Compare the key of 'cat' {k_cat.tolist()} with {others}: a query's score for "
                "a key is their dot product; what does that give two equal keys, or a key that is "
                f"a multiple of another? If a new try is still stuck here, its check says what "
                f"follows{same}")
    fix = "With these keys no W_Q can" if keys_changed else "Changing W_Q alone cannot"
    return ". Note: " + "; and ".join(hints) + f". {fix} fix that{same}"
