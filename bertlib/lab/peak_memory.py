"""How much memory a call needs: the most bytes it holds alive at once, counted three ways.

- :func:`tensor_peak_bytes`: torch tensors, of any device, counted after every aten operation
  (the same count on every machine for the same code and library versions). Blind to what a
  fused kernel allocates inside itself.
- :func:`traced_peak_bytes`: Python's ``tracemalloc``, which numpy reports its arrays to.
- :func:`resident_peaks`: the memory the operating system gave a fresh process during each call
  (its peak resident set size, Linux). It sees everything a call touches, torch, numpy or a
  fused kernel's scratch, with one accounting for all of them.

``bertlib.lab.cost.measure`` calls one of them once per size, apart from the timed runs (counting
slows a call down).
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

__all__ = ["tensors_in", "tensor_peak_bytes", "traced_peak_bytes", "resident_peaks"]


def tensors_in(obj) -> list[torch.Tensor]:
    """Every torch.Tensor inside ``obj``, a tensor or nested tuples, lists and dicts of them."""
    return [t for t in tree_leaves(obj) if isinstance(t, torch.Tensor)]


class _LiveTensorBytes(TorchDispatchMode):
    """Sees every aten operation: after each, drops the storages that were freed and adds the
    ones the operation created; ``peak`` is the largest sum seen."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # False: torch leaves __torch_dispatch__ as it is, instead of wrapping it so that
        # torch.compile skips it, a wrapper that imports torch._dynamo at the first operation
        # (about 2.4 s of CPU in a process without transformers). Nothing here is compiled.
        return False

    def __init__(self):
        super().__init__()
        self.live: dict[StorageWeakRef, int] = {}  # storage -> its bytes, while it is alive
        self.current = 0
        self.peak = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for ref in [r for r in self.live if r.expired()]:
            self.current -= self.live.pop(ref)
        inputs = {StorageWeakRef(t.untyped_storage()) for t in tensors_in((args, kwargs))}
        for t in tensors_in(out):
            storage = t.untyped_storage()
            ref = StorageWeakRef(storage)
            if ref in inputs and ref not in self.live:
                continue  # a view or in-place result of memory made before the call
            self.current += storage.nbytes() - self.live.get(ref, 0)
            self.live[ref] = storage.nbytes()
        self.peak = max(self.peak, self.current)
        return out


def tensor_peak_bytes(fn: Callable, args: tuple) -> int:
    """Peak bytes of tensor storage created during ``fn(*args)`` and alive at the same time.

    The inputs are not counted, the result is. Not seen: scratch buffers a fused kernel
    allocates inside itself, and memory that is not a tensor. On the "meta" device (shapes, no
    data) it counts what a call *would* need without allocating it.
    """
    with _LiveTensorBytes() as mode:
        result = fn(*args)
    del result
    return mode.peak


def traced_peak_bytes(fn: Callable, args: tuple) -> int:
    """Peak bytes traced by ``tracemalloc`` during ``fn(*args)``, above the level at its start
    (Python objects and numpy arrays; torch tensors are not seen)."""
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



def _status_bytes(key: str) -> int:
    """A size line of /proc/self/status (``VmRSS``, ``VmHWM``), in bytes."""
    with open("/proc/self/status") as f:
        sizes = dict(line.split(":", 1) for line in f if line.startswith("Vm"))
    return int(sizes[key].split()[0]) * 1024


def _reset_peak() -> bool:
    """Start the peak resident size (VmHWM) again from the current one; False if not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


def _peak_here(fn: Callable, args: tuple, warmup: int = 1) -> int | None:
    """In this process: the rise of the resident size during one call, after ``warmup`` calls."""
    for _ in range(warmup):
        fn(*args)
    if not _reset_peak():
        return None
    before = _status_bytes("VmRSS")
    result = fn(*args)
    peak = _status_bytes("VmHWM") - before
    del result
    return peak


def _inputs(n: int, d_k: int, kind: str) -> tuple:
    """Seeded unit-normal Q, K, V: (1, 1, n, d_k) tensors, or (n, d_k) float32 numpy arrays."""
    gen = torch.Generator().manual_seed(n)
    Q, K, V = (torch.randn(1, 1, n, d_k, generator=gen) for _ in range(3))
    return (Q, K, V) if kind == "torch" else tuple(t[0, 0].numpy() for t in (Q, K, V))


def _run_job(job: dict) -> list[int | None]:
    """One job of :func:`resident_peaks`, in the measuring process: its peak at every n."""
    module, name = job["target"].split(":")
    fn = getattr(importlib.import_module(module), name)
    peaks = []
    for n in job["sizes"]:
        Q, K, V = _inputs(n, job.get("d_k", 64), job.get("inputs", "torch"))
        kwargs = {**job.get("kwargs", {}),
                  **{key: n // div for key, div in job.get("per_n", {}).items()}}
        args = (Q, V) if job.get("call", "qkv") == "qv" else (Q, K, V)
        peaks.append(_peak_here(functools.partial(fn, **kwargs), args))
    return peaks


def resident_peaks(jobs: dict[str, dict], timeout: float = 900) -> dict[str, list[int]]:
    """Peak resident memory (bytes) each call adds to a fresh Python process, as Linux counts it.

    jobs: name -> {"target": "module:function", "sizes": [n, ...], and optionally "kwargs"
    (fixed keyword arguments), "per_n" (keyword -> divisor: that keyword gets n // divisor),
    "inputs" ("torch": Q, K, V of shape (1, 1, n, d_k); "numpy": (n, d_k) float32 arrays),
    "call" ("qkv": fn(Q, K, V, ...); "qv": fn(Q, V, ...)), "d_k" (default 64)}. Inputs are seeded
    by n, as ``bertlib.lab.cost.random_qkv``.
    All jobs run in ONE new process, started with glibc told to map every block of 64 KiB or more
    straight from the operating system and give it back when freed (``MALLOC_MMAP_THRESHOLD_``)
    and one thread. For each n: a warm-up call, then the peak resident size is reset
    (/proc/self/clear_refs) and one call is watched: its peak minus the size before it. That
    sees every page the call touches, torch tensors, numpy arrays and a fused kernel's internal
    scratch alike, with one accounting for all (inputs excluded, the result included); in 4 KiB
    pages, so small calls (under about 1 MiB) are coarse. Returns name -> [bytes per n].
    Raises OSError where it cannot run (Linux's /proc is needed) or a call fails.
    """
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(64 * 1024), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "bertlib.lab.peak_memory"], input=json.dumps(jobs),
                          capture_output=True, text=True, env=env, timeout=timeout, check=False)
    result = json.loads(done.stdout) if done.returncode == 0 and done.stdout else {}
    if not result or any(v is None for peaks in result.values() for v in peaks):
        raise OSError("resident_peaks could not measure (it needs Linux's /proc/self/clear_refs "
                      f"and every call to succeed): {done.stderr.strip()[-500:] or result}")
    return result


if __name__ == "__main__":  # the measuring process of resident_peaks: jobs on stdin, JSON out
    torch.set_num_threads(1)
    print(json.dumps({name: _run_job(job) for name, job in json.load(sys.stdin).items()}))
