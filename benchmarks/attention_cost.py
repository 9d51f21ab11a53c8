"""The larger cost sweep of notebook 05 (``make bench``): naive numpy, naive torch, torch SDPA and
tiled attention, one head, float32, Q, K, V: (1, 1, n, d_k), for n = 128, 256, ... 8192.

For each kernel and n: the series' one timing procedure (``bertlib.lab.cost.measure``: a warm-up
call,
then ``--repeats`` timed calls, kept with their fastest, median and slowest; ``seconds`` is the
fastest), the GFLOP/s, and the peak memory two ways: the tensor count of ``measure``
(``peak_bytes``: deterministic, but for SDPA only its output) and, the same way for every kernel,
the resident memory one call adds to a fresh process (``resident_bytes``,
``bertlib.lab.peak_memory.resident_peaks``), which sees inside SDPA's fused kernel too. A size that
``bertlib.lab.cost.check_memory`` refuses is reported, not run. Also the tiled kernel's largest
difference from naive torch, the fitted exponents and the ratios quoted in the README. Writes
``benchmarks/results/`` (cost.json, cost.png, cost.md) and prints the table.

    python benchmarks/attention_cost.py [--min-n 128] [--max-n 8192] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
from collections.abc import Sequence
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from bertlib.lab.cost import (
    REPEATS,
    MemoryGuardError,
    attention_bytes,
    attention_flops,
    check_memory,
    fit_exponent,
    matmul_peak_gflops,
    measure,
    pick_device,
    random_qkv,
)
from bertlib.lab.peak_memory import resident_peaks
from bertlib.paper.attention import scaled_dot_product_attention
from bertlib.paper.kernels import naive_attention, tiled_attention

RESULTS = Path(__file__).resolve().parent / "results"


def kernels(block: int) -> dict:
    """name -> (function, takes numpy input, estimated peak bytes for (n, d_k))."""
    def tiled(Q, K, V):
        return tiled_attention(Q, K, V, block=block)

    tiled.__name__ = f"tiled_attention_block{block}"
    return {
        "naive numpy": (scaled_dot_product_attention, True,
                        lambda n, d_k: 9 * attention_bytes(n) + 8 * n * d_k * 4),
        "naive torch": (naive_attention, False,
                        lambda n, d_k: 2 * attention_bytes(n) + 8 * n * d_k * 4),
        "torch SDPA": (F.scaled_dot_product_attention, False, lambda n, d_k: 8 * n * d_k * 4),
        f"tiled (block {block})": (tiled, False,
                                   lambda n, d_k: 4 * n * block * 4 + 12 * n * (d_k + 1) * 4),
    }


def _sweep(fn, numpy_input, estimate, sizes, d_k, fraction, repeats, progress, device) -> list:
    """One kernel over every n: JSON-ready rows (JSON has no NaN: a failed size gets None)."""
    def setup(n):
        check_memory(estimate(n, d_k), fraction, n=n)
        return random_qkv(n, d_k, seed=n, device=device, as_numpy=numpy_input)

    rows = measure(fn, sizes, setup=setup, repeats=repeats, progress=progress)
    return [{**m._asdict(), "seconds": None if m.error else m.seconds,
             "median": None if m.error else m.median, "slowest": None if m.error else m.slowest,
             "gflops": None if m.error else attention_flops(m.n, d_k) / m.seconds / 1e9}
            for m in rows]


def _resident(methods: dict, d_k: int, block: int) -> None:
    """Add each row's ``resident_bytes``: the resident memory of one call, in one fresh process
    (only the sizes that ran; the targets are the same kernels, named by where they live)."""
    targets = {"naive numpy": ("bertlib.paper.attention:scaled_dot_product_attention", {}),
               "naive torch": ("bertlib.paper.kernels:naive_attention", {}),
               "torch SDPA": ("torch.nn.functional:scaled_dot_product_attention", {}),
               f"tiled (block {block})": ("bertlib.paper.kernels:tiled_attention",
                                          {"block": block})}
    jobs = {name: {"target": target, "kwargs": kwargs, "d_k": d_k,
                   "inputs": "numpy" if name == "naive numpy" else "torch",
                   "sizes": [r["n"] for r in methods[name] if r["error"] is None]}
            for name, (target, kwargs) in targets.items()}
    peaks = resident_peaks({name: job for name, job in jobs.items() if job["sizes"]})
    for name, rows in methods.items():
        found = dict(zip(jobs[name]["sizes"], peaks.get(name, []), strict=False))
        for r in rows:
            r["resident_bytes"] = found.get(r["n"])


def _tiled_errors(sizes, d_k, block, fraction, estimate, device) -> dict:
    """n -> max |tiled − naive torch|, at every n where naive torch fits in memory."""
    errors = {}
    for n in sizes:
        try:
            check_memory(estimate(n, d_k), fraction, n=n)
        except MemoryGuardError:
            continue
        Q, K, V = random_qkv(n, d_k, seed=n, device=device)
        with torch.no_grad():
            errors[n] = float((tiled_attention(Q, K, V, block=block)
                               - naive_attention(Q, K, V)).abs().max())
    return errors


def _fits(rows: list) -> dict:
    """Fitted exponents of one kernel: memory over every n, time over n >= 1024 (or None)."""
    good = [r for r in rows if r["error"] is None]
    mem = [r for r in good if r["peak_bytes"]]
    big = [r for r in good if r["n"] >= 1024]  # small n: fixed overheads dominate the time
    return {
        "memory": fit_exponent([r["n"] for r in mem], [r["peak_bytes"] for r in mem])._asdict()
        if len(mem) >= 2 else None,
        "time_n_ge_1024": fit_exponent([r["n"] for r in big], [r["seconds"] for r in big])
        ._asdict() if len(big) >= 2 else None,
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or not b or math.isnan(a) or math.isnan(b) else a / b


def _figures(methods: dict, fits: dict, errors: dict, tiled_name: str, sizes) -> dict:
    """The figures the README quotes, from one run."""
    def at(name, n, key):
        return next((r[key] for r in methods[name] if r["error"] is None and r["n"] == n), None)

    n_max = max((n for n in sizes if at(tiled_name, n, "peak_bytes") and
                 at("naive torch", n, "peak_bytes")), default=None)
    return {
        "tiled_max_abs_diff": max(errors.values()) if errors else None,
        "memory_ratio_n": n_max,
        "naive_torch_over_tiled_memory": _ratio(at("naive torch", n_max, "peak_bytes"),
                                                at(tiled_name, n_max, "peak_bytes")),
        "naive_numpy_over_tiled_memory": _ratio(at("naive numpy", n_max, "peak_bytes"),
                                                at(tiled_name, n_max, "peak_bytes")),
        "tiled_over_sdpa_throughput_2048": _ratio(at("torch SDPA", 2048, "seconds"),
                                                  at(tiled_name, 2048, "seconds")),
        "naive_torch_memory_exponent": (fits["naive torch"]["memory"] or {}).get("slope"),
        "naive_numpy_memory_exponent": (fits["naive numpy"]["memory"] or {}).get("slope"),
    }


def run_benchmark(sizes: Sequence[int], d_k: int = 64, block: int = 256, repeats: int = REPEATS,
                  fraction: float = 0.5, progress: bool = True) -> dict:
    """Time and peak memory of every kernel in :func:`kernels` at every n in ``sizes``; a size
    that ``check_memory`` refuses (over ``fraction`` of free memory) is reported as an error.
    Also the tiled kernel's max abs difference from naive torch at each n, the fitted exponents
    and the ratios. Returns a JSON-ready dict."""
    sizes = list(sizes)
    device = pick_device()
    load_before = os.getloadavg()
    peak_gflops = matmul_peak_gflops(device=device)
    chosen = kernels(block)
    methods = {name: _sweep(fn, numpy_input, estimate, sizes, d_k, fraction, repeats, progress,
                            device)
               for name, (fn, numpy_input, estimate) in chosen.items()}
    _resident(methods, d_k, block)
    errors = _tiled_errors(sizes, d_k, block, fraction, chosen["naive torch"][2], device)
    fits = {name: _fits(rows) for name, rows in methods.items()}
    return {
        "config": {"sizes": sizes, "d_k": d_k, "h": 1, "dtype": "float32", "block": block,
                   "repeats": repeats, "guard_fraction": fraction},
        "machine": {"device": str(device), "torch": torch.__version__,
                    "threads": torch.get_num_threads(), "cpus": os.cpu_count(),
                    "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                    "platform": platform.platform(), "matmul_peak_gflops": peak_gflops,
                    "load_average_before": load_before, "load_average_after": os.getloadavg()},
        "methods": methods,
        "tiled_max_abs_diff_by_n": {str(n): v for n, v in errors.items()},
        "fits": fits,
        "figures": _figures(methods, fits, errors, f"tiled (block {block})", sizes),
    }


def _cell(value, fmt: str) -> str:
    return "—" if value is None else format(value, fmt)


def _size_rows(result: dict) -> list[str]:
    """The markdown table: per n, the time (ms) then the peak memory (MiB) of every kernel."""
    names = list(result["methods"])
    head = "| n | " + " | ".join(f"{m} ms" for m in names) + " | " + \
        " | ".join(f"{m} MiB" for m in names) + " | " + \
        " | ".join(f"{m} MiB resident" for m in names) + " |"
    lines = [head, "|" + "---:|" * (1 + 3 * len(names))]
    for i, n in enumerate(result["config"]["sizes"]):
        rows = [result["methods"][m][i] for m in names]
        ms = [_cell(None if r["error"] else r["seconds"] * 1e3, ".1f") for r in rows]
        mib = [_cell(None if r["peak_bytes"] is None else r["peak_bytes"] / 2**20, ".2f")
               for r in rows]
        resident = [_cell(None if r.get("resident_bytes") is None else r["resident_bytes"] / 2**20,
                          ".2f") for r in rows]
        lines.append(f"| {n} | " + " | ".join(ms) + " | " + " | ".join(mib) + " | "
                     + " | ".join(resident) + " |")
    errors = [f"- {m} at n = {r['n']}: {r['error']}" for m in names
              for r in result["methods"][m] if r["error"]]
    return lines + (["", "Refused or failed:"] + errors if errors else [])


def benchmark_table(result: dict) -> str:
    """The benchmark as a markdown table (time, peak memory per kernel and n) followed by the
    figures measured in the same run."""
    f, mach = result["figures"], result["machine"]
    gflops = [f"{m} {_cell(r['gflops'], '.1f')}" for m, rows in result["methods"].items()
              for r in rows if r["n"] == 2048]
    load = max(mach["load_average_before"][0], mach["load_average_after"][0])
    return "\n".join(_size_rows(result) + [
        "",
        "- tiled = full: max abs difference from naive torch "
        f"{_cell(f['tiled_max_abs_diff'], '.2e')} over all n",
        f"- peak memory at n = {f['memory_ratio_n']}: naive torch / tiled "
        f"{_cell(f['naive_torch_over_tiled_memory'], '.1f')}×, naive numpy / tiled "
        f"{_cell(f['naive_numpy_over_tiled_memory'], '.1f')}×",
        f"- tiled throughput / SDPA throughput at n = 2048: "
        f"{_cell(f['tiled_over_sdpa_throughput_2048'], '.2f')}",
        f"- fitted memory exponent: naive torch {_cell(f['naive_torch_memory_exponent'], '.3f')}, "
        f"naive numpy {_cell(f['naive_numpy_memory_exponent'], '.3f')}",
        f"- GFLOP/s at n = 2048: {', '.join(gflops)}; this machine's float32 matmul: "
        f"{mach['matmul_peak_gflops']:.1f} GFLOP/s",
        f"- {mach['device']}, torch {mach['torch']}, {mach['threads']} threads on "
        f"{mach['cpus']} CPUs ({mach['cpu_capability']}); load average "
        f"{mach['load_average_before'][0]:.1f} before, {mach['load_average_after'][0]:.1f} after"
        + (" — other work was running, so times are noisy" if load > 1.5 else ""),
    ])


def plot_benchmark(result: dict, path=None):
    """Log-log curves of time and peak memory against n for every kernel; saved if ``path``."""
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, rows in result["methods"].items():
        good = [r for r in rows if r["error"] is None]
        ax_t.loglog([r["n"] for r in good], [r["seconds"] for r in good], "o-", label=name)
        ax_m.loglog([r["n"] for r in good], [r["peak_bytes"] / 2**20 for r in good], "o-",
                    label=name)
    sizes = result["config"]["sizes"]
    for ax, title, unit in ((ax_t, "time per call", "seconds"),
                            (ax_m, "peak memory during the call", "MiB")):
        ax.set_title(f"Attention, one head, d_k = {result['config']['d_k']}: {title}")
        ax.set_xlabel("sequence length n")
        ax.set_ylabel(unit)
        ax.set_xticks(sizes, [str(n) for n in sizes])
        ax.xaxis.set_minor_locator(plt.NullLocator())
        ax.grid(True, which="both", alpha=0.3)
    ax_m.legend(fontsize=8)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


def main(argv: Sequence[str] | None = None) -> int:
    """Run the sweep over n = min-n, 2·min-n, ... up to max-n; write cost.json, cost.png and
    cost.md to --out; print the table."""
    parser = argparse.ArgumentParser(prog="python benchmarks/attention_cost.py",
                                     description=main.__doc__)
    parser.add_argument("--min-n", type=int, default=128)
    parser.add_argument("--max-n", type=int, default=8192)
    parser.add_argument("--d-k", type=int, default=64)
    parser.add_argument("--block", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args(argv)
    if args.min_n < 1 or args.max_n < args.min_n:
        parser.error(f"need 1 <= --min-n <= --max-n, got {args.min_n} and {args.max_n}")
    sizes = [args.min_n * 2**k for k in range(int(math.log2(args.max_n / args.min_n)) + 1)]
    matplotlib.use("Agg")
    result = run_benchmark(sizes, d_k=args.d_k, block=args.block, repeats=args.repeats)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "cost.json").write_text(json.dumps(result, indent=1) + "\n")
    plot_benchmark(result, out / "cost.png")
    table = benchmark_table(result)
    (out / "cost.md").write_text(table + "\n")
    print(table)
    print(f"\nwrote {out / 'cost.json'}, {out / 'cost.png'}, {out / 'cost.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
