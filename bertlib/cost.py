"""What attention costs: time and peak memory against sequence length n, measured and counted.

- :func:`measure` times a function over sizes n (the fastest run after a warm-up) and records
  its peak memory; :func:`fit_exponent` fits ``value ∝ n^slope`` on log-log axes.
- :func:`attention_flops`, :func:`attention_bytes`, :func:`projection_flops`,
  :func:`ffn_flops`, :func:`ffn_bytes`: the counts from the formulas, for comparing attention
  with the rest of a BERT layer.
- :func:`check_memory` refuses a size whose memory would not fit, before it runs.
- :func:`naive_attention` (the n×n matrix in full) and :func:`tiled_attention` (keys in blocks
  with an online softmax, FlashAttention's idea: memory linear in n) in torch, with
  :func:`tiled_attention_plain`, its teaching twin (the same loop, written plainly);
  :func:`banded_attention`, a sliding window in torch; :func:`hbm_accesses_standard` and
  :func:`hbm_accesses_flash`, the GPU memory traffic of standard and FlashAttention.

``python -m bertlib.cost`` (``make bench``) runs the larger sweep and writes
``benchmarks/results/`` (cost.json, cost.png, cost.md).
"""

from __future__ import annotations

import math
import statistics
import time
import tracemalloc
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from bertlib.attention import check_qkv_shapes

__all__ = [
    "Measurement",
    "Fit",
    "MemoryGuardError",
    "measure",
    "fit_exponent",
    "attention_flops",
    "attention_bytes",
    "projection_flops",
    "ffn_flops",
    "ffn_bytes",
    "available_memory",
    "check_memory",
    "naive_attention",
    "tiled_attention",
    "tiled_attention_plain",
    "banded_attention",
    "hbm_accesses_standard",
    "hbm_accesses_flash",
    "pick_device",
    "matmul_peak_gflops",
]

MEMORY_MODES = ("auto", "torch", "tracemalloc", "none")
STATISTICS = {"min": min, "median": statistics.median}


class Measurement(NamedTuple):
    """One size of a sweep.

    n: the size. seconds: wall-clock time of one call, the minimum (or median) of the timed runs
    (NaN if it failed).
    peak_bytes: peak memory the call allocated (None if not measured or it failed).
    error: ``"ExceptionType: message"`` if the setup or the call raised, else None.
    """

    n: int
    seconds: float
    peak_bytes: int | None
    error: str | None


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


# --------------------------------------------------------------------------- measuring


def _is_whole(x) -> bool:
    return isinstance(x, int | np.integer) and not isinstance(x, bool)


def _check_sizes(sizes) -> list[int]:
    try:
        sizes = list(sizes)
    except TypeError:
        raise TypeError(f"sizes must be a list of whole numbers, got {sizes!r}") from None
    if not sizes:
        raise ValueError("sizes is empty: give at least one n, e.g. [128, 256, 512]")
    bad = [s for s in sizes if not _is_whole(s) or s <= 0]
    if bad:
        raise ValueError(f"sizes must be whole numbers >= 1, got {bad[0]!r} in {sizes}")
    if any(b <= a for a, b in zip(sizes, sizes[1:], strict=False)):
        raise ValueError(f"sizes must be strictly increasing (sorted, no repeats), got {sizes}")
    return [int(s) for s in sizes]


def _tensors(obj) -> list:
    """Every torch.Tensor inside nested tuples/lists/dicts (empty if torch is not imported)."""
    import sys

    if "torch" not in sys.modules:
        return []
    import torch
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(obj) if isinstance(t, torch.Tensor)]


def _sync(args) -> None:
    """Wait for queued GPU work, so a timing covers it (a no-op for CPU tensors)."""
    devices = {t.device for t in _tensors(args) if t.device.type == "cuda"}
    if devices:
        import torch

        for device in devices:
            torch.cuda.synchronize(device)


def _tensor_peak(fn: Callable, args: tuple) -> int:
    """Peak bytes of tensor storage created during ``fn(*args)`` and alive at the same time."""
    from torch.multiprocessing.reductions import StorageWeakRef
    from torch.utils._python_dispatch import TorchDispatchMode

    class LiveTensorBytes(TorchDispatchMode):
        """After every aten op: drop storages that were freed, add the ones the op created."""

        def __init__(self):
            super().__init__()
            self.live: dict[StorageWeakRef, int] = {}
            self.current = 0
            self.peak = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for ref in [r for r in self.live if r.expired()]:
                self.current -= self.live.pop(ref)
            inputs = {StorageWeakRef(t.untyped_storage()) for t in _tensors((args, kwargs))}
            for t in _tensors(out):
                storage = t.untyped_storage()
                ref = StorageWeakRef(storage)
                if ref in inputs and ref not in self.live:
                    continue  # a view or in-place result of memory made before the call
                self.current += storage.nbytes() - self.live.get(ref, 0)
                self.live[ref] = storage.nbytes()
            self.peak = max(self.peak, self.current)
            return out

    with LiveTensorBytes() as mode:
        result = fn(*args)
    del result
    return mode.peak


def _tracemalloc_peak(fn: Callable, args: tuple) -> int:
    """Peak bytes traced by tracemalloc during ``fn(*args)`` (Python objects and numpy arrays)."""
    already = tracemalloc.is_tracing()
    if not already:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        result = fn(*args)
        peak = tracemalloc.get_traced_memory()[1] - start
        del result
    finally:
        if not already:
            tracemalloc.stop()
    return peak


def measure(fn: Callable, sizes: Sequence[int], setup: Callable | None = None, repeats: int = 3,
            warmup: int = 1, memory: str = "auto", progress: bool = True,
            statistic: str = "min") -> list[Measurement]:
    """Time ``fn`` and record its peak memory at each size n in ``sizes``.

    For each n: ``args = setup(n)`` (not timed; a tuple is the argument list, any other value
    the single argument) or ``(n,)`` without a setup; ``fn(*args)`` runs ``warmup`` times
    untimed, then ``repeats`` times timed with ``time.perf_counter``; ``seconds`` is the minimum
    (``statistic="min"``, the default: other programs and the machine's noise only ever add time,
    so the fastest run is the closest to the kernel's own cost) or the median
    (``statistic="median"``).
    GPU work is waited for (``torch.cuda.synchronize``) before the clock stops.

    Peak memory comes from one more call, made apart from the timed ones so that the counting
    does not slow them down. It is the most memory allocated *during* the call and alive at once
    (inputs made by ``setup`` are not counted; the returned result is):

    - ``memory="torch"``: torch tensors, of any device. A ``TorchDispatchMode`` sees every aten
      operation; after each one it adds the bytes of the storages the operation created and
      drops the storages that have been freed (weak references), and keeps the peak of that
      sum. Deterministic: the same code and library versions give the same count on every
      machine. Not seen: scratch buffers that a fused kernel allocates inside itself (for CPU
      flash attention, per-thread blocks of a fixed size) and memory that is not a tensor.
    - ``memory="tracemalloc"``: Python's ``tracemalloc``, which numpy reports its array buffers
      to; the peak above the level at the call's start. It does not see torch tensors.
    - ``memory="auto"``: "torch" if any argument holds a torch.Tensor, else "tracemalloc".
    - ``memory="none"``: no memory run; ``peak_bytes`` is None.

    Tensors on the "meta" device have shapes and no data: with them, ``memory="torch"`` counts
    what a size *would* need without allocating it (the times are then meaningless).

    A failure at one size (the setup or ``fn`` raising, e.g. :class:`MemoryGuardError` from
    :func:`check_memory`) is reported in that size's ``error`` and the sweep goes on.
    progress: show a tqdm bar on stderr (turn it off in notebooks to keep their output fixed).
    Returns one :class:`Measurement` per size, in order.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    if setup is not None and not callable(setup):
        raise TypeError(f"setup must be callable or None, got {type(setup).__name__}")
    sizes = _check_sizes(sizes)
    if not _is_whole(repeats) or repeats < 1:
        raise ValueError(f"repeats must be a whole number >= 1, got {repeats!r}")
    if not _is_whole(warmup) or warmup < 0:
        raise ValueError(f"warmup must be a whole number >= 0, got {warmup!r}")
    if memory not in MEMORY_MODES:
        raise ValueError(f"memory must be one of {MEMORY_MODES}, got {memory!r}")
    if statistic not in STATISTICS:
        raise ValueError(f"statistic must be one of {tuple(STATISTICS)}, got {statistic!r}")
    from tqdm import tqdm

    name = getattr(fn, "__name__", type(fn).__name__)
    results = []
    for n in tqdm(sizes, desc=name, unit="size", disable=not progress, leave=False):
        args = None
        try:
            args = setup(n) if setup is not None else (n,)
            if not isinstance(args, tuple):
                args = (args,)
            for _ in range(warmup):
                fn(*args)
            _sync(args)
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                fn(*args)
                _sync(args)
                times.append(time.perf_counter() - start)
            mode = memory
            if mode == "auto":
                mode = "torch" if _tensors(args) else "tracemalloc"
            peak = {"torch": _tensor_peak, "tracemalloc": _tracemalloc_peak}.get(mode)
            peak_bytes = peak(fn, args) if peak else None
            results.append(Measurement(n, STATISTICS[statistic](times), peak_bytes, None))
        except Exception as exc:  # reported for this size; the sweep goes on
            results.append(Measurement(n, math.nan, None, f"{type(exc).__name__}: {exc}"))
        del args
    return results


def fit_exponent(sizes: Sequence[float], values: Sequence[float]) -> Fit:
    """Least-squares line through (log n, log value): ``value ≈ c · n^slope``.

    sizes, values: (m,) positive numbers, m >= 2, at least two different sizes.
    slope = Σ (x - x̄)(y - ȳ) / Σ (x - x̄)² with x = log n, y = log value;
    stderr = √( Σ residual² / (m - 2) / Σ (x - x̄)² ), NaN for m = 2 (no spread left to estimate).
    Naive attention's memory gives slope ≈ 2 (the n×n matrix), a tiled kernel's ≈ 1.
    """
    x = np.asarray(sizes, dtype=float)
    y = np.asarray(values, dtype=float)
    if x.ndim != 1 or y.ndim != 1 or x.shape != y.shape:
        raise ValueError(
            f"sizes and values must be 1-D and the same length, got shapes {x.shape} and {y.shape}"
        )
    if len(x) < 2:
        raise ValueError(f"need at least 2 points to fit a slope, got {len(x)}")
    for label, a in (("sizes", x), ("values", y)):
        bad = ~np.isfinite(a) | (a <= 0)
        if bad.any():
            raise ValueError(
                f"{label} must be finite and > 0 for a log-log fit, got {a[bad][0]!r} at index "
                f"{int(np.argmax(bad))} (drop failed sizes first)"
            )
    x, y = np.log(x), np.log(y)
    dx = x - x.mean()
    sxx = float(dx @ dx)
    if sxx == 0:
        raise ValueError("all sizes are equal: need at least two different n to fit a slope")
    slope = float(dx @ (y - y.mean())) / sxx
    if len(x) == 2:
        return Fit(slope, math.nan)
    residuals = y - y.mean() - slope * dx
    return Fit(slope, math.sqrt(float(residuals @ residuals) / (len(x) - 2) / sxx))


# --------------------------------------------------------------------------- counting


def _check_counts(**kwargs) -> None:
    for name, value in kwargs.items():
        if not _is_whole(value) or value < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")


def attention_flops(n: int, d_k: int, h: int = 1) -> int:
    """Floating-point operations of softmax(Q Kᵀ / √d_k) V for h heads, Q, K, V: (h, n, d_k).

    Per head: Q Kᵀ 2·n²·d_k (a multiply and an add per term), the scaling n², the softmax 5·n²
    (row max, subtract, exp, row sum, divide: one each per entry), the product with V 2·n²·d_k.
    Total h·(4·n²·d_k + 6·n²). The projections to Q, K, V and W_O are :func:`projection_flops`.
    """
    _check_counts(n=n, d_k=d_k, h=h)
    return h * (4 * n * n * d_k + 6 * n * n)


def attention_bytes(n: int, h: int = 1, dtype_bytes: int = 4) -> int:
    """Bytes of the attention matrices softmax(Q Kᵀ / √d_k): h·n²·dtype_bytes (shape (h, n, n)).

    One copy; naive code keeps two or three alive at once (scores, scaled scores, weights).
    """
    _check_counts(n=n, h=h, dtype_bytes=dtype_bytes)
    return h * n * n * dtype_bytes


def projection_flops(n: int, d: int) -> int:
    """FLOPs of attention's four projections (Q, K, V and W_O), each (n, d) @ (d, d): 8·n·d².

    Biases (n·d additions each) are left out.
    """
    _check_counts(n=n, d=d)
    return 8 * n * d * d


def ffn_flops(n: int, d: int, d_ff: int) -> int:
    """FLOPs of the feed-forward block GELU(X W₁ + b₁) W₂ + b₂ on X: (n, d), W₁: (d, d_ff).

    The two matrix products: 2·n·d·d_ff each, 4·n·d·d_ff in all. Biases and GELU (O(n·d_ff),
    under 0.1 % for BERT-base) are left out.
    """
    _check_counts(n=n, d=d, d_ff=d_ff)
    return 4 * n * d * d_ff


def ffn_bytes(n: int, d_ff: int, dtype_bytes: int = 4) -> int:
    """Bytes of the feed-forward block's widest activation, GELU(X W₁ + b₁): n·d_ff·dtype_bytes."""
    _check_counts(n=n, d_ff=d_ff, dtype_bytes=dtype_bytes)
    return n * d_ff * dtype_bytes


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
    if isinstance(n_bytes, bool) or not isinstance(n_bytes, int | float | np.number) \
            or not math.isfinite(n_bytes) or n_bytes < 0:
        raise ValueError(f"n_bytes must be a finite number >= 0, got {n_bytes!r}")
    if isinstance(fraction, bool) or not isinstance(fraction, int | float) \
            or not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction!r}")
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


# --------------------------------------------------------------------------- kernels


def _check_qkv(Q, K, V):
    import torch

    for name, t in (("Q", Q), ("K", K), ("V", V)):
        if not isinstance(t, torch.Tensor):
            hint = " (use torch.from_numpy)" if isinstance(t, np.ndarray) else ""
            raise TypeError(f"{name} must be a torch.Tensor{hint}, got {type(t).__name__}")
        if not t.is_floating_point():
            raise TypeError(f"{name} must hold floating-point numbers, got dtype {t.dtype}")
        if t.ndim < 2:
            raise ValueError(
                f"{name} must have at least 2 dimensions (..., n, d), got shape {tuple(t.shape)}"
            )
    check_qkv_shapes(Q.shape, K.shape, V.shape)
    try:
        batch = torch.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"the leading (batch, head) axes of Q {tuple(Q.shape)}, K {tuple(K.shape)} and "
            f"V {tuple(V.shape)} do not broadcast"
        ) from None
    for name, t in (("Q", Q), ("K", K), ("V", V)):  # meta tensors have shapes but no values
        if t.device.type != "meta" and not torch.isfinite(t).all():
            raise ValueError(f"{name} contains NaN/inf values; attention needs finite numbers")
    return batch


def _check_scale(scale, d_k: int) -> float:
    if scale is None:
        return 1.0 / math.sqrt(d_k) if d_k > 0 else 1.0
    if isinstance(scale, bool) or not isinstance(scale, int | float) or not math.isfinite(scale) \
            or scale < 0:
        raise ValueError(f"scale must be a finite number >= 0, got {scale!r}")
    return float(scale)


def naive_attention(Q, K, V, scale: float | None = None):
    """softmax(Q Kᵀ / √d_k) V in torch, the whole n_q × n_k matrix at once (no mask).

    Q: (..., n_q, d_k)   K: (..., n_k, d_k)   V: (..., n_k, d_v); leading axes broadcast.
    Returns the output (..., n_q, d_v). It holds two (..., n_q, n_k) matrices at its peak (the
    scores and the weights): memory ∝ n². bertlib.attention is the numpy twin (with masks).
    """
    import torch

    _check_qkv(Q, K, V)
    scale = _check_scale(scale, Q.shape[-1])
    return torch.softmax((Q @ K.transpose(-2, -1)) * scale, dim=-1) @ V


def tiled_attention(Q, K, V, block: int = 256, mask=None, scale: float | None = None):
    """softmax(Q Kᵀ / √d_k) V computed over blocks of ``block`` keys, never the whole matrix.

    Q: (..., n_q, d_k)   K: (..., n_k, d_k)   V: (..., n_k, d_v); leading axes broadcast.
    mask: (..., n_q, n_k) bool tensor, True where a query may attend; None = all.
    Returns the output (..., n_q, d_v); a query that may attend to nothing gets zeros.
    Forward pass only: inputs that require grad raise a ValueError outside ``torch.no_grad()``.

    The online softmax (Milakov & Gimelshein 2018; FlashAttention, Dao et al. 2022): for each
    block of keys j, with scores S_j = s·Q K_jᵀ (s = 1/√d_k by default),
        m' = max(m, rowmax S_j),   P = exp(S_j − m'),   α = exp(m − m'),
        ℓ' = α·ℓ + rowsum P,       O' = α·O + P V_j,
    starting from m = −∞, ℓ = 0, O = 0; the answer is O / ℓ (ℓ comes out of the same product as
    P V, by giving V an extra column of ones). Rescaling by α makes every block's
    exponentials relative to the running max, so the result equals full attention up to float
    rounding (max abs difference ≤ 1e-5 in float32 and ≤ 1e-12 in float64 on unit-normal inputs,
    as the tests check). Memory: one (..., n_q, block) block of scores at a time, so it grows
    linearly in n for a fixed block.
    """
    import torch

    batch = _check_qkv(Q, K, V)
    if not _is_whole(block) or block < 1:
        raise ValueError(f"block must be a whole number >= 1, got {block!r}")
    scale = _check_scale(scale, Q.shape[-1])
    n_q, n_k = Q.shape[-2], K.shape[-2]
    if mask is not None:
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
            raise TypeError(
                "mask must be a boolean torch.Tensor (True = may attend), got "
                f"{getattr(mask, 'dtype', type(mask).__name__)}"
            )
        try:
            torch.broadcast_shapes(mask.shape, (*batch, n_q, n_k))
        except RuntimeError:
            raise ValueError(
                f"mask of shape {tuple(mask.shape)} does not broadcast to the scores' shape "
                f"{(*batch, n_q, n_k)} (..., n_q, n_k)"
            ) from None
    if torch.is_grad_enabled() and any(t.requires_grad for t in (Q, K, V)):
        raise ValueError(
            "tiled_attention computes the forward pass only (it reuses buffers in place, which "
            "autograd cannot follow): call it under torch.no_grad(), or use naive_attention"
        )
    dtype = torch.promote_types(torch.promote_types(Q.dtype, K.dtype), V.dtype)
    rows = (*batch, n_q)
    Qs = Q.to(dtype) * scale
    Kt = K.to(dtype).transpose(-2, -1)
    # V with a column of ones: P @ [V, 1] gives P V and P's row sums in one product.
    V1 = torch.cat([V.to(dtype), V.new_ones((*V.shape[:-1], 1), dtype=dtype)], dim=-1)
    m = torch.full((*rows, 1), -math.inf, dtype=dtype, device=Q.device)
    Ol = torch.zeros((*rows, V1.shape[-1]), dtype=dtype, device=Q.device)  # [O, ℓ]
    # Two buffers reused for every block: allocating fresh ones each time costs more than the
    # arithmetic (page faults), and is what a fused kernel avoids too.
    S_full = torch.empty((*rows, min(block, n_k)), dtype=dtype, device=Q.device)
    PV = torch.empty_like(Ol)
    for start in range(0, n_k, block):
        keys = slice(start, start + block)
        width = min(block, n_k - start)
        S = S_full if width == S_full.shape[-1] else S_full.new_empty((*rows, width))
        torch.matmul(Qs, Kt[..., keys], out=S)
        if mask is not None:
            S.masked_fill_(~mask[..., keys], -math.inf)
        m_new = torch.maximum(m, S.amax(dim=-1, keepdim=True))
        # a fully masked row so far has m_new = -inf: any finite shift will do
        shift = m_new if mask is None else torch.where(torch.isinf(m_new), 0.0, m_new)
        P = S.sub_(shift).exp_()
        torch.matmul(P, V1[..., keys, :], out=PV)
        Ol.mul_(torch.exp(m - shift)).add_(PV)
        m = m_new
    O, l = Ol[..., :-1], Ol[..., -1:]
    return torch.where(l > 0, O / torch.where(l > 0, l, 1.0), 0.0)


def tiled_attention_plain(Q, K, V, block: int = 256, mask=None, scale: float | None = None):
    """The teaching twin of :func:`tiled_attention`: the same online softmax, written plainly.

    Q: (..., n_q, d_k)   K: (..., n_k, d_k)   V: (..., n_k, d_v), one floating dtype; leading
    axes broadcast. mask: (..., n_q, n_k) bool tensor, True where a query may attend; None = all.
    Returns softmax(s·Q Kᵀ) V (..., n_q, d_v), s = 1/√d_k; a query that may attend to nothing
    gets zeros. For each block j of ``block`` keys (Milakov & Gimelshein 2018; Dao et al. 2022):
        S_j = s·Q K_jᵀ                      scores of this block          (..., n_q, B)
        m'  = max(m, rowmax S_j)             the running maximum           (..., n_q, 1)
        P_j = exp(S_j − m')                  exponentials against it       (..., n_q, B)
        ℓ'  = e^(m − m')·ℓ + rowsum P_j      the running sum               (..., n_q, 1)
        O'  = e^(m − m')·O + P_j V_j         the running, unnormalised output (..., n_q, d_v)
    from m = −∞, ℓ = 0, O = 0; the answer is O / ℓ, divided once at the end (FlashAttention-2's
    order). Fresh tensors every block and no tricks: read it beside the equations.
    :func:`tiled_attention` computes the same with reused buffers; a test proves them equal.
    """
    import torch

    _check_qkv(Q, K, V)
    if not _is_whole(block) or block < 1:
        raise ValueError(f"block must be a whole number >= 1, got {block!r}")
    s = _check_scale(scale, Q.shape[-1])
    m = torch.full((*Q.shape[:-1], 1), -math.inf, dtype=Q.dtype, device=Q.device)
    l = torch.zeros_like(m)
    O = torch.zeros((*Q.shape[:-1], V.shape[-1]), dtype=Q.dtype, device=Q.device)
    for j in range(0, K.shape[-2], block):
        S = s * Q @ K[..., j:j + block, :].transpose(-2, -1)
        if mask is not None:
            S = S.masked_fill(~mask[..., j:j + block], -math.inf)
        m_new = torch.maximum(m, S.amax(dim=-1, keepdim=True))
        m_new = torch.where(m_new == -math.inf, 0.0, m_new)  # no key allowed yet: any shift
        P = torch.exp(S - m_new)
        alpha = torch.exp(m - m_new)
        l = alpha * l + P.sum(dim=-1, keepdim=True)
        O = alpha * O + P @ V[..., j:j + block, :]
        m = m_new
    return torch.where(l > 0, O / l, 0.0)


def banded_attention(Q, K, V, w: int):
    """Sliding-window attention in torch: each query attends to the keys within w/2 of it.

    Q, K: (..., n, d_k); V: (..., n, d_v); w: positive even window (w + 1 keys a row).
        out_i = Σ_{|i−j| ≤ w/2} softmax_j(q_i·k_j / √d_k) v_j
    Queries go in blocks of B = w/2; block t reads one slab of B + w keys (a strided view of the
    zero-padded K) and masks it to the band, so the scores are (..., n/B, B, B + w): 3·n·w/2
    numbers, never n × n. Returns (..., n, d_v). The numpy teaching twin with global tokens is
    ``bertlib.variants.sliding_window_attention_plain``.
    """
    import torch

    _check_qkv(Q, K, V)
    _check_counts(w=w)
    if w % 2:
        raise ValueError(f"w must be even (w/2 keys on each side), got {w}")
    n, d_k = Q.shape[-2], Q.shape[-1]
    B = min(w // 2, n)
    n_blocks = -(-n // B)
    pad_end = n_blocks * B - n
    S = B + w
    K_slab = torch.nn.functional.pad(K, (0, 0, w // 2, pad_end + w // 2)).unfold(-2, S, B)
    V_slab = torch.nn.functional.pad(V, (0, 0, w // 2, pad_end + w // 2)).unfold(-2, S, B)
    Q_blocks = torch.nn.functional.pad(Q, (0, 0, 0, pad_end)).unflatten(-2, (n_blocks, B))
    scores = (Q_blocks @ K_slab) / math.sqrt(d_k)  # (..., n_blocks, B, S)
    rows, cols = torch.arange(B, device=Q.device), torch.arange(S, device=Q.device)
    in_band = (rows[:, None] - cols + w // 2).abs() <= w // 2  # (B, S): the same in every block
    j = torch.arange(n_blocks, device=Q.device)[:, None] * B - w // 2 + cols  # key index
    keep = in_band & ((j >= 0) & (j < n))[:, None, :]  # (n_blocks, B, S): real keys in the band
    weights = torch.softmax(scores.masked_fill(~keep, -math.inf), dim=-1)
    out = weights @ V_slab.transpose(-2, -1)  # (..., n_blocks, B, d_v)
    return out.flatten(-3, -2)[..., :n, :]


def hbm_accesses_standard(n: int, d: int) -> int:
    """Numbers standard attention reads from and writes to GPU main memory (HBM), forward pass.

    Dao et al. 2022, Algorithm 0, one head, Q, K, V: (n, d): read Q, K (2nd), write S = Q Kᵀ
    (n²); read S, write P = softmax(S) (2n²); read P and V (n² + nd), write O = P V (nd).
    Total 4nd + 4n² numbers: the n² terms are the matrix going to memory and back.
    """
    _check_counts(n=n, d=d)
    return 4 * n * d + 4 * n * n


def hbm_accesses_flash(n: int, d: int, sram: int) -> int:
    """Numbers FlashAttention (Dao et al. 2022, Algorithm 1) reads from and writes to HBM, forward.

    n: sequence length; d: head width; sram: on-chip memory (SRAM) in numbers, M.
    Key/value blocks of B_c = ⌈M/(4d)⌉ rows, query blocks of B_r = min(B_c, d) rows, so one
    block of each, and their scores, fit in SRAM. O, ℓ, m start in HBM (nd + 2n written); the
    outer loop reads each key and value block once (2nd in all); for each of the
    T_c = ⌈n/B_c⌉ key blocks, the inner loop reads every query block with its O, ℓ, m and writes
    O, ℓ, m back (3nd + 4n). Total 2nd + nd + 2n + T_c·(3nd + 4n) ≈ 12·n²d²/M for large n:
    no n² matrix ever goes to HBM.
    """
    _check_counts(n=n, d=d, sram=sram)
    if sram < 4 * d:
        raise ValueError(f"sram must hold at least 4·d = {4 * d} numbers (one row of each "
                         f"block), got {sram}")
    b_c = -(-sram // (4 * d))
    t_c = -(-n // b_c)
    return 3 * n * d + 2 * n + t_c * (3 * n * d + 4 * n)


# --------------------------------------------------------------------------- machine


def pick_device():
    """``torch.device("cuda")`` if a GPU is present, else ``torch.device("cpu")``."""
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def matmul_peak_gflops(n: int = 1024, repeats: int = 5, device=None) -> float:
    """This machine's matrix-product speed: 2·n³ FLOPs of an (n, n) @ (n, n) float32 product
    divided by the fastest of ``repeats`` timed runs (after one warm-up), in GFLOP/s."""
    import torch

    _check_counts(n=n, repeats=repeats)
    device = device or pick_device()
    gen = torch.Generator().manual_seed(0)
    A, B = (torch.randn(n, n, generator=gen).to(device) for _ in range(2))
    A @ B
    best = math.inf
    for _ in range(repeats):
        _sync((A,))
        start = time.perf_counter()
        A @ B
        _sync((A,))
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best / 1e9


def random_qkv(n: int, d_k: int = 64, h: int = 1, seed: int = 0, device=None,
               as_numpy: bool = False) -> tuple:
    """Seeded unit-normal Q, K, V of shape (1, h, n, d_k), float32: torch tensors on ``device``
    (default :func:`pick_device`), or numpy arrays with ``as_numpy=True``.

    Four axes (batch, heads, n, d_k) because torch's fused CPU attention kernel needs them
    (with three, scaled_dot_product_attention falls back to its unfused "math" path)."""
    import torch

    _check_counts(n=n, d_k=d_k, h=h)
    gen = torch.Generator().manual_seed(seed)
    Q, K, V = (torch.randn(1, h, n, d_k, generator=gen) for _ in range(3))
    if as_numpy:
        return Q.numpy(), K.numpy(), V.numpy()
    device = device or pick_device()
    return Q.to(device), K.to(device), V.to(device)


# --------------------------------------------------------------------------- benchmark


def _benchmark_kernels(block: int) -> dict:
    """name -> (function, takes numpy input, estimated peak bytes for (n, d_k))."""
    import torch.nn.functional as F

    from bertlib.attention import scaled_dot_product_attention

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


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or not b or math.isnan(a) or math.isnan(b) else a / b


def run_benchmark(sizes: Sequence[int], d_k: int = 64, block: int = 256, repeats: int = 3,
                  fraction: float = 0.5, progress: bool = True) -> dict:
    """Time and peak memory of naive numpy, naive torch, torch SDPA and tiled attention (one
    head, float32, Q, K, V: (1, 1, n, d_k)) at every n in ``sizes``; a size that
    :func:`check_memory` refuses (over ``fraction`` of free memory) is reported as an error.
    Also the tiled kernel's max abs difference from naive torch at each n, the fitted exponents
    and the ratios. Returns a JSON-ready dict."""
    import os
    import platform

    import torch

    sizes = _check_sizes(sizes)
    device = pick_device()
    load_before = os.getloadavg()
    peak_gflops = matmul_peak_gflops(device=device)
    kernels = _benchmark_kernels(block)
    methods = {}
    for name, (fn, numpy_input, estimate) in kernels.items():
        def setup(n, numpy_input=numpy_input, estimate=estimate):
            check_memory(estimate(n, d_k), fraction, n=n)
            return random_qkv(n, d_k, seed=n, device=device, as_numpy=numpy_input)

        rows = measure(fn, sizes, setup=setup, repeats=repeats, progress=progress)
        methods[name] = [  # JSON has no NaN: a failed size gets None
            {**m._asdict(), "seconds": None if m.error else m.seconds,
             "gflops": None if m.error else attention_flops(m.n, d_k) / m.seconds / 1e9}
            for m in rows
        ]
    tiled_name = f"tiled (block {block})"
    exact = {}
    for n in sizes:
        try:
            check_memory(kernels["naive torch"][2](n, d_k), fraction, n=n)
        except MemoryGuardError:
            continue
        Q, K, V = random_qkv(n, d_k, seed=n, device=device)
        with torch.no_grad():
            diff = tiled_attention(Q, K, V, block=block) - naive_attention(Q, K, V)
        exact[n] = float(diff.abs().max())
        del Q, K, V, diff

    def ok(name):
        return [r for r in methods[name] if r["error"] is None]

    fits = {}
    for name in methods:
        good = ok(name)
        mem = [r for r in good if r["peak_bytes"]]
        big = [r for r in good if r["n"] >= 1024]
        fits[name] = {
            "memory": fit_exponent([r["n"] for r in mem], [r["peak_bytes"] for r in mem])._asdict()
            if len(mem) >= 2 else None,
            "time_n_ge_1024": fit_exponent([r["n"] for r in big], [r["seconds"] for r in big])
            ._asdict() if len(big) >= 2 else None,
        }

    def at(name, n, key):
        return next((r[key] for r in ok(name) if r["n"] == n), None)

    n_max = max((n for n in sizes if at(tiled_name, n, "peak_bytes") and
                 at("naive torch", n, "peak_bytes")), default=None)
    figures = {
        "tiled_max_abs_diff": max(exact.values()) if exact else None,
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
    return {
        "config": {"sizes": sizes, "d_k": d_k, "h": 1, "dtype": "float32", "block": block,
                   "repeats": repeats, "guard_fraction": fraction},
        "machine": {"device": str(device), "torch": torch.__version__,
                    "threads": torch.get_num_threads(), "cpus": os.cpu_count(),
                    "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                    "platform": platform.platform(), "matmul_peak_gflops": peak_gflops,
                    "load_average_before": load_before, "load_average_after": os.getloadavg()},
        "methods": methods,
        "tiled_max_abs_diff_by_n": {str(n): v for n, v in exact.items()},
        "fits": fits,
        "figures": figures,
    }


def _cell(value, fmt: str) -> str:
    return "—" if value is None else format(value, fmt)


def benchmark_table(result: dict) -> str:
    """The benchmark as a markdown table (time, peak memory, GFLOP/s per kernel and n) followed
    by the figures measured in the same run."""
    names = list(result["methods"])
    head = "| n | " + " | ".join(f"{m} ms" for m in names) + " | " + \
        " | ".join(f"{m} MiB" for m in names) + " |"
    lines = [head, "|" + "---:|" * (1 + 2 * len(names))]
    for i, n in enumerate(result["config"]["sizes"]):
        rows = [result["methods"][m][i] for m in names]
        ms = [_cell(None if r["error"] else r["seconds"] * 1e3, ".1f") for r in rows]
        mib = [_cell(None if r["peak_bytes"] is None else r["peak_bytes"] / 2**20, ".2f")
               for r in rows]
        lines.append(f"| {n} | " + " | ".join(ms) + " | " + " | ".join(mib) + " |")
    errors = [f"- {m} at n = {r['n']}: {r['error']}" for m in names
              for r in result["methods"][m] if r["error"]]
    f, mach = result["figures"], result["machine"]
    gflops = [f"{m} {_cell(r['gflops'], '.1f')}" for m in names for r in result["methods"][m]
              if r["n"] == 2048]
    out = lines + ([""] + ["Refused or failed:"] + errors if errors else []) + [
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
        + (" — other work was running, so times are noisy" if
           max(mach['load_average_before'][0], mach['load_average_after'][0]) > 1.5 else ""),
    ]
    return "\n".join(out)


def plot_benchmark(result: dict, path=None):
    """Log-log curves of time and peak memory against n for every kernel; saved if ``path``."""
    import matplotlib.pyplot as plt

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
    """``python -m bertlib.cost [--max-n 8192] [--out benchmarks/results]``: run the sweep,
    write cost.json, cost.png and cost.md, print the table."""
    import argparse
    import json
    from pathlib import Path

    parser = argparse.ArgumentParser(prog="python -m bertlib.cost", description=main.__doc__)
    parser.add_argument("--min-n", type=int, default=128)
    parser.add_argument("--max-n", type=int, default=8192)
    parser.add_argument("--d-k", type=int, default=64)
    parser.add_argument("--block", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args(argv)
    if args.min_n < 1 or args.max_n < args.min_n:
        parser.error(f"need 1 <= --min-n <= --max-n, got {args.min_n} and {args.max_n}")
    sizes = []
    n = args.min_n
    while n <= args.max_n:
        sizes.append(n)
        n *= 2
    import matplotlib

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
