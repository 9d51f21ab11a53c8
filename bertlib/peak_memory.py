"""How much memory a call needs: the most bytes it holds alive at once, counted two ways.

- :func:`tensor_peak_bytes`: torch tensors, of any device, counted after every aten operation
  (the same count on every machine for the same code and library versions).
- :func:`traced_peak_bytes`: Python's ``tracemalloc``, which numpy reports its arrays to.

``bertlib.cost.measure`` calls one of them once per size, apart from the timed runs (counting
slows a call down).
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

__all__ = ["tensors_in", "tensor_peak_bytes", "traced_peak_bytes"]


def tensors_in(obj) -> list[torch.Tensor]:
    """Every torch.Tensor inside ``obj``, a tensor or nested tuples, lists and dicts of them."""
    return [t for t in tree_leaves(obj) if isinstance(t, torch.Tensor)]


class _LiveTensorBytes(TorchDispatchMode):
    """Sees every aten operation: after each, drops the storages that were freed and adds the
    ones the operation created; ``peak`` is the largest sum seen."""

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
