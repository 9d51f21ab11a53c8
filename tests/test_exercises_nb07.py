"""Tests of the notebook 07 checkers: right answers pass, typical mistakes get a named reason."""

import numpy as np
import pytest

from bertlib.exercises import nb07
from bertlib.paper import family


def test_relative_positions_checker_accepts_the_answer_and_names_mistakes():
    n, k = 6, 2
    offsets = np.arange(n)[:, None] - np.arange(n)[None, :]
    right = np.clip(offsets + k, 0, 2 * k - 1)
    assert nb07.check_relative_positions(right, n, k)
    assert nb07.check_relative_positions(right.tolist(), n, k)
    cases = {
        "δ(j, i)": right.T,
        "raw offsets i − j": offsets,
        "not clipped": offsets + k,
        "there are 2k buckets": np.clip(offsets + k, 0, 2 * k),
        "should have shape (6, 6)": right[:5],
        "got str": "δ",
        "NaN": np.full((n, n), np.nan),
        "not answered yet": None,
    }
    for needle, answer in cases.items():
        fb = nb07.check_relative_positions(answer, n, k)
        assert not fb and needle in fb.message, (needle, fb.message)
    other = right.copy()
    other[3, 0] = 0
    fb = nb07.check_relative_positions(other, n, k)
    assert not fb and "entry (i=3, j=0) should be 3, got 0" in fb.message
    fb = nb07.check_relative_positions(family.relative_positions(n, 3), n, k)
    assert not fb and "the buckets for k = 3" in fb.message


def test_albert_checker_accepts_the_count_and_names_mistakes():
    V, E, H, L, I = 30000, 128, 1024, 24, 4096
    c = family.albert_parameter_count(V, E, H, L, I)
    assert nb07.check_albert_parameters(c.total)
    assert nb07.check_albert_parameters(np.int64(c.total))
    layer = family.layer_parameter_count(H, I)
    cases = {
        "separate layers": c.total + (L - 1) * layer,
        "E→H projection": c.total - c.projection,
        "pooler": c.total - c.pooler,
        "LayerNorm": c.total - 2 * E - 4 * H,  # the embedding LayerNorm and the layer's two
        "E wide": c.total - c.embeddings + (V + 514) * H + 2 * H,
        "too high, by less than 10 %": c.total + 1,
        "too low, by more than a factor 100": 5,
        "whole number >= 1": -5,
        "parameter count must be a whole number": "many",
        "must be a whole number": c.total + 0.5,
        "not answered yet": None,
    }
    for needle, answer in cases.items():
        fb = nb07.check_albert_parameters(answer)
        assert not fb and needle in fb.message, (needle, fb.message)
    assert not nb07.check_albert_parameters(float("nan"))


def _blocks(W, h):
    d_k = W.shape[1] // h
    return [W[:, a * d_k:(a + 1) * d_k] for a in range(h)]


def _scores(delta_p2c="ji", scale=None, drop=None):
    # a multi-head answer built from family.disentangled_attention, with one mistake chosen
    def fn(H, P_rel, W_qc, W_kc, W_qr, W_kr, k, h):
        out = []
        for Ws in zip(*(_blocks(W, h) for W in (W_qc, W_kc, W_qr, W_kr)), strict=True):
            r = family.disentangled_attention(H, P_rel, *Ws, k, p2c_delta=delta_p2c)
            terms = {"c2c": r.c2c, "c2p": r.c2p, "p2c": r.p2c}
            if drop:
                del terms[drop]
            s = r.scale if scale is None else scale(W_qc.shape[1], Ws[0].shape[1])
            out.append(sum(terms.values()) * s)
        return np.stack(out)
    return fn


def _one_head(H, P_rel, W_qc, W_kc, W_qr, W_kr, k, h):
    # the heads ignored: all d columns as one head, copied h times
    return np.stack([family.disentangled_attention(H, P_rel, W_qc, W_kc, W_qr, W_kr, k).scores] * h)


@pytest.mark.parametrize("fn, needle", [
    (_scores(scale=lambda d, d_k: 1 / np.sqrt(3 * d)), "you divided by √(3·d) with d the model"),
    (_scores(scale=lambda d, d_k: 1 / np.sqrt(d_k)), "you divided by √d_k"),
    (_scores(scale=lambda d, d_k: 1.0), "forgot to scale"),
    (_scores("ij"), "transformers computes"),
    (_scores(drop="p2c"), "p2c is missing"),
    (_scores(drop="c2p"), "c2p is missing"),
    (_scores(drop="c2c"), "c2c is missing"),
    (_one_head, "every head got the same scores"),
    (lambda *a: np.zeros((7, 7)), "you returned a single (7, 7) matrix"),
    (lambda *a: np.zeros((3, 3)), "expected scores of shape (h, n, n) = (2, 7, 7)"),
    (lambda *a: 1 / 0, "raised ZeroDivisionError"),
    (lambda *a: np.ones((2, 7, 7)), "differ from the formula"),
    (None, "not answered yet"), (3, "expected a function"),
])
def test_scores_checker_names_the_mistake(fn, needle):
    fb = nb07.check_disentangled_scores(fn)
    assert not fb and needle in fb.message, fb.message


def test_scores_checker_accepts_the_formula_and_spots_c2p_with_the_wrong_index():
    assert nb07.check_disentangled_scores(_scores())

    def c2p_transposed(H, P_rel, W_qc, W_kc, W_qr, W_kr, k, h):
        out = []
        for Ws in zip(*(_blocks(W, h) for W in (W_qc, W_kc, W_qr, W_kr)), strict=True):
            r = family.disentangled_attention(H, P_rel, *Ws, k)
            delta = family.relative_positions(len(H), k)
            c2p = (H @ Ws[0] @ (P_rel @ Ws[3]).T)[np.arange(len(H))[:, None], delta.T]
            out.append((r.c2c + c2p + r.p2c) * r.scale)
        return np.stack(out)

    fb = nb07.check_disentangled_scores(c2p_transposed)
    assert not fb and "c2p reads K_r at δ(i, j)" in fb.message


def _transformed(change):
    # the right scores with one change applied to a term or to the result
    def fn(H, P_rel, W_qc, W_kc, W_qr, W_kr, k, h):
        out = []
        for Ws in zip(*(_blocks(W, h) for W in (W_qc, W_kc, W_qr, W_kr)), strict=True):
            r = family.disentangled_attention(H, P_rel, *Ws, k)
            out.append(change(r))
        return np.stack(out)
    return fn


def _softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("change, needle", [
    (lambda r: (r.c2c + r.c2p + r.p2c.T) * r.scale, "your p2c is transposed"),
    (lambda r: _softmax(r.scores), "weights after the softmax"),
])
def test_scores_checker_names_a_transposed_p2c_and_softmaxed_weights(change, needle):
    fb = nb07.check_disentangled_scores(_transformed(change))
    assert not fb and needle in fb.message, fb.message


def test_score_memory_checker_accepts_h_n_squared_and_names_mistakes():
    n, h, d, L = 512, 12, 768, 12
    assert nb07.check_score_memory(h * n * n, n, h, d, L)
    assert nb07.check_score_memory(np.int64(h * n * n), n, h, d, L)
    cases = {
        "WORK of QKᵀ": n * n * d,  # the n²·d of some tutorials
        "every head has its own": n * n,
        "all 12 layers": L * h * n * n,
        "size of the layer's output": n * d,
        "count the weights once": 2 * h * n * n,
        "too low, by more than a factor 100": 5,
        "a size in bytes": 4 * h * n * n,
        "must be a whole number": "many",
        "not answered yet": None,
    }
    for needle, answer in cases.items():
        fb = nb07.check_score_memory(answer, n, h, d, L)
        assert not fb and needle in fb.message, (needle, fb.message)


def test_albert_design_checker_wants_the_most_distinct_layers_within_budget():
    assert nb07.check_albert_design(128, 2)
    assert nb07.check_albert_design(64, 2)
    cases = {
        (128, 1): "enough for another distinct layer",
        (384, 1): "a smaller E (still >= 64) would make room",
        (128, 3): "over the budget",
        (256, 2): "over the budget",
        (32, 2): "choose E in 64..768",
        (128, 13): "groups must be in 1..12",
        (128.5, 2): "E must be a whole number",
        (None, None): "not answered yet",
    }
    for (E, groups), needle in cases.items():
        fb = nb07.check_albert_design(E, groups)
        assert not fb and needle in fb.message, ((E, groups), fb.message)
