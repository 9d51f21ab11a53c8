"""Sliding-window attention (torch, banded) against torch's fused exact attention, up to n = 16,384.

One head, d_k = 64, float32, 4-D (1, 1, n, d_k) tensors so that torch picks its fused CPU kernel.
Timing: the series' one procedure, ``bertlib.lab.cost.measure`` (a warm-up call, then ``--repeats``
timed calls, kept with their fastest, median and slowest), the same as notebooks 05 and 06; for
each n it records whether the two kernels differ beyond the spread of their runs. Memory: the
same instrument for both, the peak resident memory a call adds to a fresh process
(``bertlib.lab.peak_memory.resident_peaks``), which sees inside the fused kernel. Writes
``benchmarks/results/window.json`` and ``window.md``; notebook 06 shows them.

    python benchmarks/window_vs_sdpa.py [--sizes 1024 2048 ...] [--window 256] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from pathlib import Path

import torch
import torch.nn.functional as F

from bertlib.lab.cost import REPEATS, WARMUP, check_memory, measure, random_qkv
from bertlib.lab.peak_memory import resident_peaks
from bertlib.paper.kernels import banded_attention

RESULTS = Path(__file__).resolve().parent / "results"
NAMES = ("sliding window (banded torch)", "torch SDPA (exact, fused)")


def run(sizes: list[int], window: int, repeats: int, threads: int) -> dict:
    """Time and resident memory of the banded kernel and SDPA at each n; a JSON-ready dict."""
    torch.set_num_threads(threads)

    def inputs(n):
        check_memory(4 * n * 64 * 4 * 3, n=n)
        return random_qkv(n, 64, seed=n, device="cpu")

    def banded(Q, K, V):
        return banded_attention(Q, K, V, window)

    load = os.getloadavg()[0]
    timed = [measure(fn, sizes, setup=inputs, warmup=WARMUP, repeats=repeats, memory="none",
                     progress=False) for fn in (banded, F.scaled_dot_product_attention)]
    resident = resident_peaks({
        NAMES[0]: {"target": "bertlib.paper.kernels:banded_attention", "kwargs": {"w": window},
                   "sizes": sizes},
        NAMES[1]: {"target": "torch.nn.functional:scaled_dot_product_attention", "sizes": sizes}})
    rows = {}
    for k, name in enumerate(NAMES):
        other = timed[1 - k]
        rows[name] = [{"n": m.n, "fastest": m.fastest, "median": m.median, "slowest": m.slowest,
                       "times": list(m.times), "resident_bytes": resident[name][i],
                       "beyond_spread": m.beyond_spread(other[i]), "error": m.error}
                      for i, m in enumerate(timed[k])]
    return {"window": window, "d_k": 64, "warmup": WARMUP, "repeats": repeats, "threads": threads,
            "torch": torch.__version__, "machine": platform.processor() or platform.machine(),
            "load_average": [load, os.getloadavg()[0]], "kernels": rows}


def table(result: dict) -> str:
    """A Markdown table: n, then each kernel's time (fastest, median, slowest, ms) and memory."""
    head = "| n | " + " | ".join(f"{k} ms: fastest (median, slowest) | {k} MiB resident"
                                 for k in result["kernels"]) + " | beyond the spread? |"
    lines = [head, "|---:" * (2 + 2 * len(result["kernels"])) + "|"]
    first = next(iter(result["kernels"].values()))
    for i, row in enumerate(first):
        cells = [str(row["n"])]
        for rows in result["kernels"].values():
            m = rows[i]
            cells += [f"{m['fastest'] * 1e3:.1f} ({m['median'] * 1e3:.1f}, "
                      f"{m['slowest'] * 1e3:.1f})", f"{m['resident_bytes'] / 2**20:.2f}"]
        cells.append("yes" if row["beyond_spread"] else "no (the runs overlap)")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384])
    parser.add_argument("--window", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    result = run(args.sizes, args.window, args.repeats, args.threads)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "window.json").write_text(json.dumps(result, indent=1) + "\n")
    load = max(result["load_average"])
    (RESULTS / "window.md").write_text(
        f"Sliding window (w = {args.window}) vs torch SDPA, one head, d_k = 64, float32, "
        f"{args.threads} thread(s), a warm-up and {args.repeats} timed runs each; memory: peak "
        f"resident memory of one call in a fresh process. Load average {load:.1f} during the "
        "run" + (" (other work was running: times are noisy)" if load > 1.5 else "") + ".\n\n"
        + table(result) + "\n")
    print(table(result))


if __name__ == "__main__":
    main()
