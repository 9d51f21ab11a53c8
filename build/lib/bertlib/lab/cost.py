"""What attention costs: counted from the formulas, then measured against sequence length n.

- Counting: :func:`attention_flops`, :func:`attention_bytes`, :func:`projection_flops`,
  :func:`ffn_flops`, :func:`ffn_bytes` (attention against the rest of a BERT layer), and
  :func:`hbm_accesses_standard`, :func:`hbm_accesses_flash` (the GPU memory traffic of
  standard attention and FlashAttention).
- Measuring: :func:`measure` times a function over sizes n with one procedure everywhere
  (``WARMUP`` untimed calls, then ``REPEATS`` timed ones, kept with their fastest, median and
  slowest) and records its peak memory (``bertlib.lab.peak_memory``); :func:`fit_exponent` fits
  ``value ∝ n^slope`` on log-log axes.
- Guarding: :func:`check_memory` refuses a size whose memory would not fit, before it runs.
- Inputs and the machine: :func:`random_qkv`, :func:`pick_device`, :func:`matmul_peak_gflops`.

The kernels being measured are in ``bertlib.paper.kernels``; the larger sweep of ``make bench`` is
``benchmarks/attention_cost.py``.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
import torch
from tqdm import tqdm

from bertlib.checks import as_array, kind, number, one_of, same_shape, whole
from bertlib.lab.peak_memory import tensor_peak_bytes, tensors_in, traced_peak_bytes

__all__ = [
    "Measurement",
    "Fit",
    "MemoryGuardError",
    "attention_flops",
    "attention_bytes",
    "projection_flops",
    "ffn_flops",
    "ffn_bytes",
    "hbm_accesses_standard",
    "hbm_accesses_flash",
    "measure",
    "WARMUP",
    "REPEATS",
    "fit_exponent",
    "available_memory",
    "check_memory",
    "random_qkv",
    "pick_device",
    "matmul_peak_gflops",
]

MEMORY_MODES = ("auto", "torch", "tracemalloc", "none")
STATISTICS = {"min": min, "median": statistics.median}
WARMUP, REPEATS = 1, 5  # the one timing procedure of the notebooks and of `make bench`


class Measurement(NamedTuple):
    """One size of a sweep.

    n: the size. seconds: wall-clock time of one call, the minimum (or median) of the timed runs
    (NaN if it failed).
    peak_bytes: peak memory the call allocated (None if not measured or it failed).
    error: ``"ExceptionType: message"`` if the setup or the call raised, else None.
    times: every timed run, in seconds, in order (empty if it failed); ``fastest``, ``median``
    and ``slowest`` read them.
    """

    n: int
    seconds: float
    peak_bytes: int | None
    error: str | None
    times: tuple[float, ...] = ()

    @property
    def fastest(self) -> float:
        return min(self.times, default=math.nan)

    @property
    def median(self) -> float:
        return statistics.median(self.times) if self.times else math.nan

    @property
    def slowest(self) -> float:
        return max(self.times, default=math.nan)

    def beyond_spread(self, other: Measurement) -> bool:
        """True when the two differ by more than their runs' spread: every run of one was
        faster than every run of the other (their [fastest, slowest] ranges do not overlap)."""
        return self.slowest < other.fastest or other.slowest < self.fastest


class Fit(NamedTuple):
    """A power law ``value ≈ c · n^slope`` fitted on log-log axes; ``stderr`` is the slope's."""

    slope: float
    stderr: float


class MemoryGuardError(MemoryError):
    """Raised by :func:`check_memory` when a size would need more memory than the guard allows."""

    def __init__(self, message: str, needed: int, available: int, limit: int):
        super().__init__(message)
        self.needed = needed
        self.available = available
        self.limit = limit


# --------------------------------------------------------------------------- counting


def attention_flops(n: int, d_k: int, h: int = 1) -> int:
    """Floating-point operations of softmax(Q Kᵀ / √d_k) V for h heads, Q, K, V: (h, n, d_k).

    Per head: Q Kᵀ 2·n²·d_k (a multiply and an add per term), the scaling n², the softmax 5·n²
    (row max, subtract, exp, row sum, divide: one each per entry), the product with V 2·n²·d_k.
    Total h·(4·n²·d_k + 6·n²). The projections to Q, K, V and W_O are :func:`projection_flops`.
    """
    n, d_k, h = whole(n, "n", low=1), whole(d_k, "d_k", low=1), whole(h, "h", low=1)
    return h * (4 * n * n * d_k + 6 * n * n)


def attention_bytes(n: int, h: int = 1, dtype_bytes: int = 4) -> int:
    """Bytes of the attention matrices softmax(Q Kᵀ / √d_k): h·n²·dtype_bytes (shape (h, n, n)).

    One copy; naive code keeps two or three alive at once (scores, scaled scores, weights).
    """
    n, h = whole(n, "n", low=1), whole(h, "h", low=1)
    return h * n * n * whole(dtype_bytes, "dtype_bytes", low=1)


def projection_flops(n: int, d: int) -> int:
    """FLOPs of attention's four projections (Q, K, V and W_O), each (n, d) @ (d, d): 8·n·d².

    Biases (n·d additions each) are left out.
    """
    n, d = whole(n, "n", low=1), whole(d, "d", low=1)
    return 8 * n * d * d


def ffn_flops(n: int, d: int, d_ff: int) -> int:
    """FLOPs of the feed-forward block GELU(X W₁ + b₁) W₂ + b₂ on X: (n, d), W₁: (d, d_ff).

    The two matrix products: 2·n·d·d_ff each, 4·n·d·d_ff in all. Biases and GELU (O(n·d_ff),
    under 0.1 % for BERT-base) are left out.
    """
    n, d, d_ff = whole(n, "n", low=1), whole(d, "d", low=1), whole(d_ff, "d_ff", low=1)
    return 4 * n * d * d_ff


def ffn_bytes(n: int, d_ff: int, dtype_bytes: int = 4) -> int:
    """Bytes of the feed-forward block's widest activation, GELU(X W₁ + b₁): n·d_ff·dtype_bytes."""
    n, d_ff = whole(n, "n", low=1), whole(d_ff, "d_ff", low=1)
    return n * d_ff * whole(dtype_bytes, "dtype_bytes", low=1)


def hbm_accesses_standard(n: int, d: int) -> int:
    """Numbers standard attention reads from and writes to GPU main memory (HBM), forward pass.

    Dao et al. 2022, Algorithm 0, one head, Q, K, V: (n, d): read Q, K (2nd), write S = Q Kᵀ
    (n²); read S, write P = softmax(S) (2n²); read P and V (n² + nd), write O = P V (nd).
    Total 4nd + 4n² numbers: the n² terms are the matrix going to memory and back.
    """
    n, d = whole(n, "n", low=1), whole(d, "d", low=1)
    return 4 * n * d + 4 * n * n


def hbm_accesses_flash(n: int, d: int, sram: int) -> int:
    """Numbers FlashAttention (Dao et al. 2022, Algorithm 1) reads from and writes to HBM, forward.

    n: sequence length; d: head width; sram: on-chip memory (SRAM) in numbers, M: its bytes over
    the element size (192 KB holds 98,304 fp16/bf16 numbers of 2 bytes, 49,152 fp32 ones).
    Key/value blocks of B_c = ⌈M/(4d)⌉ rows, query blocks of B_r = min(B_c, d) rows, so one
    block of each, and their scores, fit in SRAM. O, ℓ, m start in HBM (nd + 2n written); the
    outer loop reads each key and value block once (2nd in all); for each of the
    T_c = ⌈n/B_c⌉ key blocks, the inner loop reads every query block with its O, ℓ, m and writes
    O, ℓ, m back (3nd + 4n). Total 2nd + nd + 2n + T_c·(3nd + 4n) ≈ 12·n²d²/M for large n:
    no n² matrix ever goes to HBM. Against standard attention's ≈ 4n², the saving levels off at
    M/(3d²) and vanishes when d reaches √(M/3) (d = 128 in fp32 on 192 KB).
    """
    n, d = whole(n, "n", low=1), whole(d, "d", low=1)
    sram = whole(sram, "sram", low=4 * d, why="(4·d numbers: one row of each block)")
    b_c = -(-sram // (4 * d))
    t_c = -(-n // b_c)
    return 3 * n * d + 2 * n + t_c * (3 * n * d + 4 * n)


# --------------------------------------------------------------------------- measuring


def _check_sizes(sizes) -> list[int]:
    """``sizes`` as a list of whole numbers n >= 1, strictly increasing (a sweep's x axis)."""
    sizes = [whole(n, "each size n in sizes", low=1) for n in sizes]
    if not sizes or sizes != sorted(set(sizes)):
        raise ValueError("sizes must be one or more n, strictly increasing (sorted, no repeats), "
                         f"e.g. [128, 256, 512]; got {sizes}")
    return sizes


def _sync(args) -> None:
    """Wait for queued GPU work, so that a timing covers it (nothing to wait for on the CPU)."""
    for device in {t.device for t in tensors_in(args) if t.device.type == "cuda"}:
        torch.cuda.synchronize(device)


def _measure_one(fn: Callable, n: int, setup: Callable | None, repeats: int, warmup: int,
                 memory: str, statistic: str) -> Measurement:
    """One size of :func:`measure`; a failure becomes the Measurement's error."""
    try:
        args = setup(n) if setup is not None else (n,)
        args = args if isinstance(args, tuple) else (args,)
        for _ in range(warmup):
            fn(*args)
        _sync(args)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn(*args)
            _sync(args)
            times.append(time.perf_counter() - start)
        if memory == "auto":
            memory = "torch" if tensors_in(args) else "tracemalloc"
        peak = {"torch": tensor_peak_bytes, "tracemalloc": traced_peak_bytes}.get(memory)
        return Measurement(n, STATISTICS[statistic](times), peak(fn, args) if peak else None, None,
                           tuple(times))
    except Exception as exc:  # reported for this size; the sweep goes on
        return Measurement(n, math.nan, None, f"{type(exc).__name__}: {exc}")


def measure(fn: Callable, sizes: Sequence[int], setup: Callable | None = None,
            repeats: int = REPEATS, warmup: int = WARMUP, memory: str = "auto",
            progress: bool = True, statistic: str = "min") -> list[Measurement]:
    """Time ``fn`` and record its peak memory at each size n in ``sizes``.

    For each n: ``args = setup(n)`` (not timed; a tuple is the argument list, any other value
    the single argument) or ``(n,)`` without a setup; ``fn(*args)`` runs ``warmup`` times
    untimed, then ``repeats`` times timed with ``time.perf_counter``, all kept in ``times``
    (``fastest``, ``median``, ``slowest``); ``seconds`` is the minimum (``statistic="min"``, the
    default: other programs and the machine's noise only ever add time, so the fastest run is
    the closest to the kernel's own cost) or the median (``statistic="median"``). The defaults
    ``WARMUP`` = 1 and ``REPEATS`` = 5 are the series' one timing procedure: the notebooks and
    ``make bench`` use them.
    GPU work is waited for (``torch.cuda.synchronize``) before the clock stops.

    Peak memory comes from one more call, made apart from the timed ones so that the counting
    does not slow them down. It is the most memory allocated *during* the call and alive at once
    (inputs made by ``setup`` are not counted; the returned result is):

    - ``memory="torch"``: torch tensors, of any device
      (:func:`bertlib.lab.peak_memory.tensor_peak_bytes`: after every aten operation, the bytes of
      the storages alive). Deterministic: the same code and library versions give the same
      count on every machine. Not seen: scratch buffers that a fused kernel allocates inside
      itself (for CPU flash attention, per-thread blocks of a fixed size) and memory that is not
      a tensor.
    - ``memory="tracemalloc"``: Python's ``tracemalloc``, which numpy reports its array buffers
      to; the peak above the level at the call's start. It does not see torch tensors.
    To see inside fused kernels, with one accounting for torch and numpy alike, use
    :func:`bertlib.lab.peak_memory.resident_peaks` (the resident memory of a fresh process).
    - ``memory="auto"``: "torch" if any argument holds a torch.Tensor, else "tracemalloc".
    - ``memory="none"``: no memory run; ``peak_bytes`` is None.

    Tensors on the "meta" device have shapes and no data: with them, ``memory="torch"`` counts
    what a size *would* need without allocating it (the times are then meaningless).

    A failure at one size (the setup or ``fn`` raising, e.g. :class:`MemoryGuardError` from
    :func:`check_memory`) is reported in that size's ``error`` and the sweep goes on.
    progress: show a tqdm bar on stderr (turn it off in notebooks to keep their output fixed).
    Returns one :class:`Measurement` per size, in order.
    """
    kind(fn, "fn", Callable, "callable")
    kind(setup, "setup", (Callable, type(None)), "callable or None")
    sizes = _check_sizes(sizes)
    repeats, warmup = whole(repeats, "repeats", low=1), whole(warmup, "warmup", low=0)
    one_of(memory, "memory", MEMORY_MODES)
    one_of(statistic, "statistic", tuple(STATISTICS))
    name = getattr(fn, "__name__", type(fn).__name__)
    return [_measure_one(fn, n, setup, repeats, warmup, memory, statistic)
            for n in tqdm(sizes, desc=name, unit="size", disable=not progress, leave=False)]


def fit_exponent(sizes: Sequence[float], values: Sequence[float]) -> Fit:
    """Least-squares line through (log n, log value): ``value ≈ c · n^slope``.

    sizes, values: (m,) positive numbers, m >= 2, at least two different sizes.
    slope = Σ (x - x̄)(y - ȳ) / Σ (x - x̄)² with x = log n, y = log value;
    stderr = √( Σ residual² / (m - 2) / Σ (x - x̄)² ), NaN for m = 2 (no spread left to estimate).
    Naive attention's memory gives slope ≈ 2 (the n×n matrix), a tiled kernel's ≈ 1.
    """
    x = as_array(sizes, "sizes", ndim=1, layout="(m,)", finite=False)
    y = as_array(values, "values", ndim=1, layout="(m,)", finite=False)
    same_shape(x, y, ("sizes", "values"))
    for label, a in (("sizes", x), ("values", y)):
        bad = ~np.isfinite(a) | (a <= 0)
        if bad.any():
            raise ValueError(f"{label} must be finite and > 0 for a log-log fit, got {a[bad][0]!r}"
                             f" at index {int(np.argmax(bad))} (drop failed sizes first)")
    whole(len(np.unique(x)), "the number of different sizes n", low=2,
          why=f"(at least 2 points with different sizes n to fit a slope; sizes {x.tolist()})")
    x, y = np.log(x), np.log(y)
    dx = x - x.mean()
    sxx = float(dx @ dx)
    slope = float(dx @ (y - y.mean())) / sxx
    if len(x) == 2:
        return Fit(slope, math.nan)
    residuals = y - y.mean() - slope * dx
    return Fit(slope, math.sqrt(float(residuals @ residuals) / (len(x) - 2) / sxx))


# --------------------------------------------------------------------------- guarding


def available_memory() -> int | None:
    """Bytes of memory available to new allocations: ``MemAvailable`` from /proc/meminfo
    (Linux), else psutil's ``virtual_memory().available``, else None (unknown)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import psutil
    except ImportError:
        return None
    return int(psutil.virtual_memory().available)


def _mb(n_bytes: float) -> str:
    return f"{n_bytes / 2**20:,.1f} MiB"


def check_memory(n_bytes: int, fraction: float = 0.5, *, n: int | None = None) -> None:
    """Refuse to allocate ``n_bytes`` if that exceeds ``fraction`` of the available memory.

    Call it before a size runs, with an estimate such as ``3 * attention_bytes(n, h)``.
    n: the sequence length, named in the message. If the available memory cannot be read
    (see :func:`available_memory`), nothing is checked.
    Raises :class:`MemoryGuardError` (a MemoryError) naming n, the bytes needed and available.
    """
    number(n_bytes, "n_bytes", low=0)
    fraction = number(fraction, "fraction", low=0, high=1, open_low=True)
    available = available_memory()
    if available is None:
        return
    limit = int(fraction * available)
    if n_bytes > limit:
        at = f"n = {n}" if n is not None else "this size"
        raise MemoryGuardError(
            f"{at} needs about {_mb(n_bytes)} ({int(n_bytes):,} bytes) but only "
            f"{_mb(available)} ({available:,} bytes) are available and the guard allows "
            f"{fraction:.0%} of that ({_mb(limit)}); choose a smaller n",
            int(n_bytes), available, limit,
        )


# --------------------------------------------------------------------------- inputs and machine


def pick_device() -> torch.device:
    """``torch.device("cuda")`` if a GPU is present, else ``torch.device("cpu")``."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def random_qkv(n: int, d_k: int = 64, h: int = 1, seed: int = 0, device=None,
               as_numpy: bool = False) -> tuple:
    """Seeded unit-normal Q, K, V of shape (1, h, n, d_k), float32: torch tensors on ``device``
    (default :func:`pick_device`), or numpy arrays with ``as_numpy=True``.

    Four axes (batch, heads, n, d_k) because torch's fused CPU attention kernel needs them
    (with three, scaled_dot_product_attention falls back to its unfused "math" path)."""
    n, d_k, h = whole(n, "n", low=1), whole(d_k, "d_k", low=1), whole(h, "h", low=1)
    gen = torch.Generator().manual_seed(seed)
    Q, K, V = (torch.randn(1, h, n, d_k, generator=gen) for _ in range(3))
    if as_numpy:
        return Q.numpy(), K.numpy(), V.numpy()
    device = device or pick_device()
    return Q.to(device), K.to(device), V.to(device)


def matmul_peak_gflops(n: int = 1024, repeats: int = 5, device=None) -> float:
    """This machine's matrix-product speed: 2·n³ FLOPs of an (n, n) @ (n, n) float32 product
    divided by the fastest of ``repeats`` timed runs (after one warm-up), in GFLOP/s."""
    n, repeats = whole(n, "n", low=1), whole(repeats, "repeats", low=1)
    gen = torch.Generator().manual_seed(0)
    A, B = (torch.randn(n, n, generator=gen).to(device or pick_device()) for _ in range(2))
    (m,) = measure(torch.matmul, [n], setup=lambda _: (A, B), repeats=repeats, memory="none",
                   progress=False)  # the fastest run after a warm-up, GPU work waited for
    return 2 * n**3 / m.seconds / 1e9
