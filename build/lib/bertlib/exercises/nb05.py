"""Checkers for notebook 05's "Try it" exercises: predicting what attention costs.

- :func:`check_memory_prediction`: the peak memory of ``bertlib.paper.kernels.naive_attention`` over
  BERT-base's 12 heads in one call at n = 3072 (float32, the inputs not counted), predicted
  before measuring. The notebook measures one head at n = 256 … 4096 and leaves the learner to
  read off how many n × n matrices that is, to scale it to n = 3072 and to the 12 heads.
- :func:`check_qkv_crossover`: the first sequence length at which a layer's h attention
  matrices hold more numbers than its queries, keys and values.
- :func:`check_block_for_budget` (design): the largest block that keeps tiled attention within
  a memory budget.

Each names the mistake it recognises: one matrix instead of two, one head instead of all,
float64 instead of float32, numbers instead of bytes, MiB instead of bytes, heads forgotten in
the crossover, a block that overshoots the budget or wastes it.
"""

from __future__ import annotations

import math

import torch

from bertlib.exercises import Feedback, as_answer_number, as_answer_whole
from bertlib.lab.cost import attention_bytes, measure
from bertlib.paper.kernels import tiled_attention

__all__ = ["check_memory_prediction", "check_qkv_crossover", "check_block_for_budget", "RTOL",
           "FACTOR"]

#: How close a prediction must be to count as right: within this factor of the answer either
#: way (1.1: 10 % above or below). Wide enough for an honest count that adds the output or the
#: inputs (+1 to +5 % at n = 3072), narrow enough to tell one matrix from two, or 11 heads from 12.
FACTOR = 1.1
#: How close two numbers must be to be taken as the same mistake (relative).
RTOL = 0.05


def _as_number(answer, what: str) -> float | Feedback:
    return as_answer_number(answer, what, 0, None, open_low=True,
                            todo=f"replace None with your prediction of {what}")


def _near(a: float, b: float) -> bool:
    return abs(a - b) <= RTOL * b


def _within(value: float, answer: float, factor: float) -> bool:
    return answer / factor <= value <= answer * factor


def _off_by(value: float, answer: float) -> str:
    """"12 % too high" / "30 % too low" / "3.2x too high": which way and by how much."""
    ratio = value / answer
    if 0.5 <= ratio <= 2:
        return f"{abs(ratio - 1):.0%} too {'high' if ratio > 1 else 'low'}"
    return f"{ratio:.3g}x the answer" if ratio > 1 else f"1/{1 / ratio:.3g} of the answer"


def check_memory_prediction(predicted_bytes, n: int = 3072, h: int = 12) -> Feedback:
    """Is ``predicted_bytes`` the peak memory of naive attention over h heads at once, at ``n``?

    Q, K, V: (1, h, n, 64) float32, BERT-base's 12 heads in one call; counted is what the call
    creates (the inputs exist before it). The answer is 2 · h · n² · 4 bytes: each head's scores
    and weights, n × n float32, all alive together (864 MiB at n = 3072, h = 12). Within a
    factor :data:`FACTOR` either way counts as right, so adding the output or the inputs passes.
    """
    value = _as_number(predicted_bytes, "the peak memory in bytes")
    if isinstance(value, Feedback):
        return value
    answer = 2 * h * attention_bytes(n)  # 2 · h · n² · 4
    if _within(value, answer, FACTOR):
        extra = "" if _near(value, answer) else (
            f" (yours is {_off_by(value, answer)}; the measured peak is exactly {answer:,}: "
            "the output and the inputs are small next to the matrices)")
        return Feedback(True, f"right: two {n} × {n} float32 matrices per head, the scores and "
                              f"the weights, {h} heads alive together: 2 · {h} · {n}² · 4 = "
                              f"{answer:,} bytes ({answer / 2**20:,.0f} MiB){extra}")
    hints = [
        (answer / 2, f"that is ONE {n} × {n} matrix per head; at its peak naive attention still "
                     "holds the scores while it writes the weights"),
        (answer / h, f"that is one head; the {h} heads are computed in one call, so all their "
                     "matrices are alive at once"),
        (answer / h / 2, "that is one matrix of one head: count the matrices alive together, "
                         "for every head"),
        (answer * 2, "that is twice the answer: 8 bytes per number is float64; torch computes "
                     "in float32 here, 4 bytes per number"),
        (answer / 4, "you counted numbers, not bytes: each float32 number takes 4 bytes"),
        (answer / 2**20, f"that looks like MiB; give bytes ({value:,.0f} MiB = "
                         f"{value * 2**20:,.0f} bytes)"),
    ]
    for wrong, hint in hints:
        if _near(value, wrong):
            return Feedback(False, hint)
    return Feedback(False, f"yours is {_off_by(value, answer)}: count the n × n matrices "
                           "alive at once (how many per head does the one-head table show?), "
                           "for every head, and the bytes of each")


def check_qkv_crossover(predicted_n, h: int = 12, d: int = 768) -> Feedback:
    """Is ``predicted_n`` the first n at which a layer's h attention matrices (h · n² numbers)
    hold more numbers than its queries, keys and values together (3 · n · d)?

    h · n² > 3 · n · d  ⇔  n > 3d/h = 3·d_k, so the answer is 3d/h + 1 (193 for BERT-base:
    h = 12, d = 768). Mistakes named: the heads forgotten, Q, K and V counted as one, the
    equality point given instead of the first n past it.
    """
    value = _as_number(predicted_n, "the sequence length n")
    if isinstance(value, Feedback):
        return value
    equal_at = 3 * d / h
    answer = math.floor(equal_at) + 1
    if value == answer:
        return Feedback(True, f"right: h·n² > 3·n·d from n = {answer} on (3d/h = 3·d_k = "
                              f"{equal_at:g}); beyond it the matrices outgrow Q, K and V")
    if value == equal_at:
        return Feedback(False, f"at n = {value:g} the two are exactly equal; the question asks "
                               "for the first n where the matrices hold MORE numbers")
    if _near(value, 3 * d):
        return Feedback(False, f"that ignores the heads: each of the {h} heads has its own "
                               "n × n matrix, so compare h · n² with 3 · n · d")
    if _near(value, equal_at / 3) or _near(value, equal_at / 3 + 1):
        return Feedback(False, "you counted only one of Q, K and V: there are three n × d "
                               "matrices, 3 · n · d numbers")
    side = "large" if value > answer else "small"
    return Feedback(False, f"{value:g} is too {side}: at n = {value:g} the matrices hold "
                           f"{h * value / (3 * d):.2f}× the numbers of Q, K and V; "
                           "solve h · n² = 3 · n · d for n")


def _tiled_peak(block: int, n: int, d_k: int) -> int:
    """Peak bytes of tiled_attention at n, counted on the meta device (nothing allocated)."""
    def meta(size):
        return tuple(torch.empty(1, 1, size, d_k, device="meta") for _ in range(3))

    (m,) = measure(lambda Q, K, V: tiled_attention(Q, K, V, block=block), [n], setup=meta,
                   repeats=1, warmup=0, progress=False)
    return m.peak_bytes


def check_block_for_budget(block, n: int = 8192, budget_mib: float = 32, d_k: int = 64
                           ) -> Feedback:
    """Design task: the largest power-of-two ``block`` with which ``tiled_attention`` at ``n``
    (one head, d_k = 64, float32) peaks within ``budget_mib`` MiB.

    Larger blocks mean fewer, larger matrix products (faster on most machines) but an
    (n, block) block of scores held at once. The checker measures the peak on the meta device
    and says how close the block is to the budget.
    """
    block = as_answer_whole(block, "block", low=1,
                            todo="replace None with your block size (a power of two, e.g. 64)")
    if isinstance(block, Feedback):
        return block
    if block & (block - 1):
        return Feedback(False, f"{block} is not a power of two; try 64, 128, 256, ...")
    budget = budget_mib * 2**20
    peak = _tiled_peak(block, n, d_k)
    if peak > budget:
        return Feedback(False, f"block = {block} peaks at {peak / 2**20:.1f} MiB, over the "
                               f"{budget_mib:g} MiB budget by {(peak - budget) / 2**20:.1f} MiB: "
                               "each block holds an (n, block) matrix of scores"
                               + (f" (a block larger than n = {n} acts as {n})" if block > n
                                  else ""))
    if block < n and _tiled_peak(2 * block, n, d_k) <= budget:
        return Feedback(False, f"block = {block} fits ({peak / 2**20:.1f} MiB of "
                               f"{budget_mib:g} MiB), but a block twice as large fits too: "
                               "fewer, larger products are usually faster")
    return Feedback(True, f"block = {block} peaks at {peak / 2**20:.1f} MiB, within "
                          f"{budget_mib:g} MiB, and twice that block would not fit")
