"""The linear probe of notebook 09: a logistic regression that reads the subject's number from
the tiny BERT's hidden state at one position after one layer (Hewitt & Liang 2019). In notebook
09 "probe" means only this classifier; the sets of test sentences it is fitted on are
:class:`bertlib.tiny.agreement.SentenceSet`.

- :func:`number_probe`: the probe, trained on the first part of the rows and tested on the rest,
  beside the same probe on a **control task** (labels that are a random function of the subject's
  noun, so a probe that only memorises words scores as well there). Selectivity = accuracy −
  control accuracy.
- :func:`number_probe_controls` adds the control a probe at a verb needs: the nearest noun's
  number (scored on the conflict rows, where it differs from the subject's, and as a probe of
  its own).
- :func:`control_labels` / :func:`verb_number_probe`: the control task's labels and the probe at
  the masked verb after each layer (recorded while training by ``tools/pretrain_tiny_bert.py``).
- :func:`probe_draws`: :func:`number_probe_controls` repeated over K seeded random train/test
  splits, each with its own control-task draw, so a finding is stated with its spread. With
  ``groups`` (e.g. the sentence of each row) a split puts whole groups on one side: rows of one
  sentence share most of their input, so a split by row tests on sentences seen in training.
- :func:`balanced_probe_draws`: the subject probe trained on rows **balanced** over the four cells
  (subject's number × nearest noun's number), on the same splits, scored on the conflict rows:
  with the two numbers uncorrelated in training, the probe cannot score on the subject by
  reading the nearest noun (:func:`balanced_rows` draws the rows).

It reads what is decodable, not what the model uses: :mod:`bertlib.tiny.mechanism`'s ablation and
patching test that.
"""

from __future__ import annotations

import numpy as np

from bertlib.checks import has_shape, whole
from bertlib.tiny.agreement import SentenceSet, hidden_states, plural_of

__all__ = ["number_probe", "number_probe_controls", "PROBE_COLUMNS", "control_labels",
           "verb_number_probe", "probe_draws", "balanced_rows", "balanced_probe_draws"]


def number_probe(features, labels, control, train_share: float = 0.5,
                 l2: float = 1e-2) -> tuple[float, float]:
    """A logistic-regression probe on ``features`` (R, d) for ``labels`` (R,) bool, trained on
    the first ``train_share`` of the rows and tested on the rest; the same probe on ``control``
    (R,) bool labels (the control task). Features are standardised with the training rows'
    mean and spread; the fit minimises the mean cross-entropy + l2 · |w|² (Newton's method, float64,
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


def probe_draws(features, subject, nearest, controls, seed: int = 0, train_share: float = 0.5,
                l2: float = 1e-2, groups=None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`number_probe_controls` over K random train/test splits, one control draw each.

    features: (R, d); subject, nearest: (R,) bool; controls: (K, R) bool, one control task draw
    per split (e.g. :func:`control_labels` with seeds 0 … K − 1). Split k shuffles the rows with
    ``numpy.random.default_rng([seed, k])`` and cuts at ``train_share``, so draw k is the same
    whatever K is. groups: optional (R,) int, e.g. the sentence each row comes from
    (:func:`bertlib.tiny.agreement.sentence_ids`): then split k shuffles the groups instead and
    puts each group wholly on one side, cut at the group boundary nearest ``train_share`` of the
    rows, so no group is on both sides (rows of one sentence share most of their input: split
    by row, the probe is tested on sentences it was trained on). Returns (accuracies (K, 4) in
    the order of PROBE_COLUMNS, n_conflict (K,) int: the conflict rows among split k's test
    rows, the count the conflict-row accuracy is of)."""
    controls = np.asarray(controls, dtype=bool)
    whole(len(controls), "K (the number of splits: one control task draw each)", 1)
    x, y, near = np.asarray(features), np.asarray(subject, bool), np.asarray(nearest, bool)
    has_shape(x, "features", (len(y), x.shape[-1]), "(R, d)")
    has_shape(near, "nearest", (len(y),), "(R,)")
    has_shape(controls, "controls", (len(controls), len(y)), "(K, R)")
    groups = _check_groups(groups, len(y))
    accuracies, n_conflict = np.zeros((len(controls), len(PROBE_COLUMNS))), []
    for k, control in enumerate(controls):
        order, cut = _split(seed, k, len(y), train_share, groups)
        accuracies[k] = number_probe_controls(x[order], y[order], near[order], control[order],
                                              cut / len(y), l2)  # rounds back to cut
        n_conflict.append(int((y != near)[order][cut:].sum()))
    return accuracies, np.array(n_conflict)


def _split(seed: int, k: int, n_rows: int, train_share: float,
           groups=None) -> tuple[np.ndarray, int]:
    """Split k of the random splits: the rows' order (n_rows,) and the cut (rows [:cut] of that
    order train). Without groups the rows are shuffled with ``numpy.random.default_rng([seed,
    k])`` and cut at round(train_share · n_rows); with groups ((n_rows,) int, checked by
    :func:`_check_groups`) the groups are shuffled with it instead (rows of a group together, in
    their own order) and the cut is the group boundary nearest train_share · n_rows (the first
    of two as near)."""
    rng = np.random.default_rng([seed, k])
    if groups is None:
        return rng.permutation(n_rows), int(round(train_share * n_rows))
    of_row = np.unique(groups, return_inverse=True)[1].reshape(-1)  # (R,) in 0 .. G − 1
    shuffled = rng.permutation(of_row.max() + 1)  # the groups in split k's order
    rank = np.argsort(shuffled)  # each group's place in that order
    ends = np.cumsum(np.bincount(of_row)[shuffled])  # (G,) rows up to each group boundary
    cut = int(ends[np.argmin(np.abs(ends - train_share * n_rows))])
    return np.argsort(rank[of_row], kind="stable"), cut


def _check_groups(groups, n_rows: int) -> np.ndarray | None:
    """``groups`` as an (n_rows,) int64 array of group ids (any whole numbers), None as None:
    ValueError for another shape, TypeError for an id that is not a whole number (bools too)."""
    if groups is None:
        return None
    groups = np.asarray(groups)
    has_shape(groups, "groups", (n_rows,), "(R,)", "for one group id a row (e.g. its sentence)")
    return np.array([whole(g, f"groups[{i}]", None, why="(a group id, e.g. the row's sentence)")
                     for i, g in enumerate(groups.tolist())], dtype=np.int64)


def balanced_rows(subject, nearest, rng: np.random.Generator) -> np.ndarray:
    """Row indices (4 m,) int, sorted, balanced over the four cells (subject singular / plural ×
    nearest noun singular / plural): every cell subsampled without replacement to m, the size of
    its smallest cell, by ``rng``. subject, nearest: (R,) bool. ValueError when a cell is empty
    (then no balanced set exists: the two numbers never differ, or one never varies)."""
    y, near = np.asarray(subject, bool), np.asarray(nearest, bool)
    has_shape(near, "nearest", y.shape, "(R,), like subject")
    cells = [np.flatnonzero((y == s) & (near == n)) for s in (False, True) for n in (False, True)]
    m = whole(min(len(c) for c in cells), "the smallest cell's size", 1,
              why=f"(a balanced set needs rows in all four cells, subject singular/plural × "
                  f"nearest noun singular/plural; cell sizes: {[len(c) for c in cells]})")
    return np.sort(np.concatenate([rng.choice(c, m, replace=False) for c in cells]))


def balanced_probe_draws(features, subject, nearest, k_splits: int, seed: int = 0,
                         train_share: float = 0.5, l2: float = 1e-2, groups=None):
    """The subject probe trained on rows balanced over the four cells, over K random splits.

    features: (R, d); subject, nearest: (R,) bool; groups: optional (R,) int. Split k is
    :func:`probe_draws`' split k (the rows, or with ``groups`` whole groups, shuffled with
    ``numpy.random.default_rng([seed, k])``, cut at ``train_share``); its training side is cut
    down to :func:`balanced_rows` (drawn with ``default_rng([seed, k, 1])``),
    the features standardised with those rows' mean and spread, and the probe (the same logistic
    fit) is scored on the test side's conflict rows (nearest noun of the other number). Returns
    (accuracy (K,) on the conflict rows, n_conflict (K,) int: their count, n_train (K,) int: the
    balanced training rows)."""
    k_splits = whole(k_splits, "k_splits (the number of random splits)", 1)
    x, y = np.asarray(features, np.float64), np.asarray(subject, bool)
    near = np.asarray(nearest, bool)
    has_shape(x, "features", (len(y), x.shape[-1]), "(R, d)")
    has_shape(near, "nearest", (len(y),), "(R,)")
    groups = _check_groups(groups, len(y))
    out = np.zeros((3, k_splits))
    for k in range(k_splits):
        order, cut = _split(seed, k, len(y), train_share, groups)
        train, test = order[:cut], order[cut:]
        train = train[balanced_rows(y[train], near[train], np.random.default_rng([seed, k, 1]))]
        test = test[y[test] != near[test]]
        whole(len(test), f"split {k}'s conflict rows (test rows scored)", 1)
        rows = np.concatenate([train, test])
        said = _probe_predict(_standardised(x[rows], len(train)), y[rows], len(train), l2)
        out[:, k] = (said == y[test]).mean(), len(test), len(train)
    return out[0], out[1].astype(int), out[2].astype(int)


def _probe_features(features, train_share, labels: dict):
    """Standardised float64 features (with the training rows' mean and spread) and the cut;
    labels: name -> (R,) labels, checked for their length."""
    x = np.asarray(features, dtype=np.float64)
    has_shape(x, "features", (len(x), x.shape[-1]), "(R, d)")
    for name, y in labels.items():
        has_shape(np.asarray(y), name, (len(x),), "(R,)")
    cut = int(round(train_share * len(x)))
    whole(cut, "the number of training rows", 2, len(x) - 2)
    return _standardised(x, cut), cut


def _standardised(x: np.ndarray, cut: int) -> np.ndarray:
    """(R, d) features standardised with the training rows' (rows [:cut]) mean and spread."""
    return (x - x[:cut].mean(0)) / (x[:cut].std(0) + 1e-6)


def _probe_predict(x, target, cut: int, l2: float) -> np.ndarray:
    """A probe fitted on rows [:cut] for ``target``; its (R - cut,) bool predictions after."""
    w, b = _fit_logistic(x[:cut], np.asarray(target, bool)[:cut].astype(np.float64), l2)
    return x[cut:] @ w + b > 0


def control_labels(tokenizer, sentence_set: SentenceSet, seed: int = 0) -> np.ndarray:
    """The control task's labels (R,) bool: a coin flip per subject noun (singular and plural
    forms share it; seeded, one flip per noun in alphabetical order of the nouns present), so a
    probe that recognises the noun scores as well on it as on the number."""
    lemma = [tokenizer.id_to_token(int(i)).removesuffix("s")
             for i in sentence_set.ids[np.arange(len(sentence_set.ids)), sentence_set.subject]]
    nouns = sorted(set(lemma))
    coin = dict(zip(nouns, np.random.default_rng(seed).random(len(nouns)) < 0.5, strict=True))
    return np.array([coin[w] for w in lemma], dtype=bool)


def verb_number_probe(model, sentence_set: SentenceSet, control) -> np.ndarray:
    """:func:`number_probe_controls` at the masked verb's hidden state after each layer.
    control: (R,) bool (:func:`control_labels`). Returns (L, 4): after layer 0, 1, ... the test
    accuracies in the order of PROBE_COLUMNS (subject, control, subject on conflict rows,
    nearest noun)."""
    states = hidden_states(model, sentence_set)                      # (R, L + 1, N, d)
    at_verb = states[np.arange(len(states)), 1:, sentence_set.verb]  # (R, L, d)
    plural, nearest, _ = plural_of(sentence_set)                     # the verb's = its subject's
    return np.array([number_probe_controls(at_verb[:, layer], plural, nearest, control)
                     for layer in range(at_verb.shape[1])])


def _fit_logistic(x, y, l2: float, iterations: int = 50):
    """(w (d,), b) minimising f = mean BCE(x w + b, y) + l2 · |w|² (x (R, d), y (R,) 0/1, float64
    numpy), by Newton's method from zeros: each step solves H δ = ∇f (H = Xᵀ diag(p (1 − p)) X / R
    + 2 l2 on w, X = [x 1]), halved until f falls, until it is below 1e-10. f is strictly convex
    in w, so its minimum is the one any exact solver finds (tested against L-BFGS)."""
    X = np.concatenate([x, np.ones((len(x), 1))], 1)  # (R, d + 1): b is the last
    reg = np.full(X.shape[1], 2.0 * l2)
    reg[-1] = 0.0  # the bias is not penalised

    def f(t):  # the mean BCE of the logits z = X t, softplus(z) − y z, and the penalty
        z = X @ t
        return np.mean(np.logaddexp(0.0, z) - y * z) + l2 * (t[:-1] @ t[:-1])

    theta = np.zeros(X.shape[1])
    value = f(theta)
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(X @ theta)))
        hessian = (X.T * (p * (1 - p))) @ X / len(X) + np.diag(reg)
        gradient = X.T @ (p - y) / len(X) + reg * theta
        try:
            step = np.linalg.solve(hessian, gradient)
        except np.linalg.LinAlgError:  # no curvature left along b: every training label alike
            step = np.linalg.lstsq(hessian, gradient, rcond=None)[0]
        while (new := f(theta - step)) > value and np.abs(step).max() > 1e-12:
            step = step / 2
        theta, value = theta - step, new
        if np.abs(step).max() < 1e-10:
            break
    return theta[:-1], theta[-1]
