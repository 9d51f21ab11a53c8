"""bertlib.lab.peak_memory: the most bytes a call holds alive at once, for torch tensors and numpy."""

import ast
from pathlib import Path

import numpy as np
import pytest
import torch

from bertlib.lab.peak_memory import resident_peaks, tensor_peak_bytes, tensors_in, traced_peak_bytes


def test_tensors_in_finds_tensors_in_nested_containers():
    a, b = torch.zeros(1), torch.ones(2)
    found = tensors_in(({"x": a, "y": [1, "no"]}, (b, np.zeros(3))))
    assert len(found) == 2 and found[0] is a and found[1] is b
    assert tensors_in((1, np.zeros(2))) == []


def test_tensor_peak_counts_temporaries_alive_together_and_the_result():
    x = torch.zeros(1000)  # an input: not counted

    def two_alive(x):
        a = x + 1  # 4,000 bytes
        b = x * 2  # 4,000 bytes, a still alive
        return a + b  # 4,000 more for the result: 12,000 at the peak

    def one_at_a_time(x):
        a = x + 1
        del a
        return x * 2  # reuses the freed room: 4,000 at the peak

    assert tensor_peak_bytes(two_alive, (x,)) == 12_000
    assert tensor_peak_bytes(one_at_a_time, (x,)) == 4_000
    assert tensor_peak_bytes(lambda x: x.view(10, 100).t(), (x,)) == 0  # views: no new storage


def test_tensor_peak_counts_meta_tensors_without_allocating():
    n = 1 << 20
    Q = torch.empty(n, 8, device="meta")
    assert tensor_peak_bytes(lambda Q: Q @ Q.T, (Q,)) == n * n * 4  # 4 TiB, counted


def test_traced_peak_sees_numpy_arrays_above_the_starting_level():
    before = np.ones(10**6)  # allocated before the call: not counted
    peak = traced_peak_bytes(lambda n: np.ones((n, n)), (300,))
    assert 8 * 300**2 <= peak < 8 * 300**2 + 10_000
    assert before.sum() == 10**6


def test_resident_peaks_sees_inside_a_fused_kernel_with_one_accounting():
    # one fresh process: naive torch holds two n×n matrices, numpy's reference more; SDPA's
    # fused kernel (invisible to the tensor count beyond its output) stays far below one matrix
    n = 1024
    peaks = resident_peaks({
        "naive torch": {"target": "bertlib.paper.kernels:naive_attention", "sizes": [n]},
        "naive numpy": {"target": "bertlib.paper.attention:scaled_dot_product_attention", "sizes": [n],
                        "inputs": "numpy"},
        "sdpa": {"target": "torch.nn.functional:scaled_dot_product_attention", "sizes": [n]},
        "lsh": {"target": "bertlib.paper.approximations:lsh_attention", "sizes": [n], "inputs": "numpy",
                "call": "qv", "per_n": {"n_buckets": 64}, "kwargs": {"seed": 0}},
    })
    matrix = n * n * 4
    assert abs(peaks["naive torch"][0] - 2 * matrix) <= 0.05 * 2 * matrix
    assert peaks["naive numpy"][0] > 2 * matrix
    assert 0 < peaks["sdpa"][0] < matrix / 4
    assert peaks["lsh"][0] > 0  # called as lsh_attention(Q, V, n_buckets=n // 64, seed=0)


def _loaded_at_import(module: str, seen: set | None = None) -> set[str]:
    """The top-level packages importing ``module`` loads: its imports outside any function,
    followed through bertlib's own modules (read from their source, nothing is imported)."""
    seen = set() if seen is None else seen
    path = Path(__file__).resolve().parents[1] / (module.replace(".", "/") + ".py")
    if path.with_suffix("").is_dir():
        path = path.with_suffix("") / "__init__.py"
    if module in seen or not path.exists():  # seen, or a name, not a module
        return set()
    seen.add(module)
    loaded = set()
    for node in ast.walk(ast.Module(body=[n for n in ast.parse(path.read_text()).body
                                          if not isinstance(n, (ast.FunctionDef, ast.ClassDef))])):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else  # a module,
                 [node.module] + [f"{node.module}.{a.name}" for a in node.names]  # or a name in it
                 if isinstance(node, ast.ImportFrom) and node.module else [])
        for name in names:
            loaded |= _loaded_at_import(name, seen) if name.startswith("bertlib") else {
                name.split(".")[0]}
    return loaded


def test_the_measuring_process_does_not_load_transformers_for_the_notebooks_kernels():
    # notebooks 05 and 06 measure these modules' attentions in a fresh process: importing them
    # must not load transformers' BertModel (seconds of CPU before the first call)
    for module in ("bertlib.lab.peak_memory", "bertlib.paper.attention", "bertlib.paper.kernels",
                   "bertlib.paper.variants", "bertlib.paper.approximations"):
        assert "transformers" not in _loaded_at_import(module), module
    # the reader sees an import at the top, and one made by a bertlib module imported there
    assert "transformers" in _loaded_at_import("bertlib.tiny.pretrain")
    assert "torch" in _loaded_at_import("bertlib.exercises.embedding_slips")  # via hf.params
    # the sparse variants are numpy only, since reading a real BERT's layer moved to hf/params
    assert "torch" not in _loaded_at_import("bertlib.paper.variants")


def test_resident_peaks_names_the_failure():
    with pytest.raises(OSError, match="could not measure"):
        resident_peaks({"broken": {"target": "bertlib.paper.kernels:no_such_kernel", "sizes": [8]}})
