"""Sliding-window attention (torch, banded) against torch's fused exact attention, up to n = 16,384.

One head, d_k = 64, float32, 4-D (1, 1, n, d_k) tensors so that torch picks its fused CPU kernel.
For each n: the fastest of ``--repeats`` timed calls after one warm-up call, and the peak tensor
memory (``bertlib.cost.measure``; a fused kernel's internal scratch is not seen). Writes
``benchmarks/results/window.json`` and ``window.md``; notebook 06 shows them.

    python benchmarks/window_vs_sdpa.py [--sizes 1024 2048 ...] [--window 256] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path

import torch
import torch.nn.functional as F

from bertlib.cost import check_memory, measure, random_qkv
from bertlib.kernels import banded_attention

RESULTS = Path(__file__).resolve().parent / "results"


def run(sizes: list[int], window: int, repeats: int, threads: int) -> dict:
    """Time and memory of the banded kernel and SDPA at each n; returns a JSON-ready dict."""
    torch.set_num_threads(threads)

    def inputs(n):
        check_memory(4 * n * 64 * 4 * 3, n=n)
        return random_qkv(n, 64, seed=n, device="cpu")

    def banded(Q, K, V):
        return banded_attention(Q, K, V, window)

    rows = {}
    for name, fn in [("sliding window (banded torch)", banded),
                     ("torch SDPA (exact, fused)", F.scaled_dot_product_attention)]:
        rows[name] = [m._asdict() for m in measure(fn, sizes, setup=inputs, warmup=1,
                                                      repeats=repeats, progress=False)]
    return {"window": window, "d_k": 64, "repeats": repeats, "threads": threads,
            "torch": torch.__version__, "machine": platform.processor() or platform.machine(),
            "kernels": rows}


def table(result: dict) -> str:
    """A Markdown table: n, then time (ms) and peak memory (MiB) of each kernel."""
    names = list(result["kernels"])
    head = "| n | " + " | ".join(f"{k} ms | {k} MiB" for k in names) + " |"
    lines = [head, "|---:" * (1 + 2 * len(names)) + "|"]
    for i, row in enumerate(result["kernels"][names[0]]):
        cells = [str(row["n"])]
        for k in names:
            m = result["kernels"][k][i]
            cells += [f"{m['seconds'] * 1e3:.1f}", f"{(m['peak_bytes'] or 0) / 2**20:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384])
    parser.add_argument("--window", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    result = run(args.sizes, args.window, args.repeats, args.threads)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "window.json").write_text(json.dumps(result, indent=1) + "\n")
    (RESULTS / "window.md").write_text(
        f"Sliding window (w = {args.window}) vs torch SDPA, one head, d_k = 64, float32, "
        f"{args.threads} thread(s), fastest of {args.repeats} after a warm-up.\n\n"
        + table(result) + "\n")
    print(table(result))


if __name__ == "__main__":
    main()
