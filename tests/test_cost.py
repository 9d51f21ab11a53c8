"""bertlib.cost: the sweep, the log-log fit, the counts, the memory guard and tiled attention."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from bertlib import cost
from bertlib.attention import scaled_dot_product_attention
from bertlib.cost import (
    Fit,
    Measurement,
    MemoryGuardError,
    attention_bytes,
    attention_flops,
    banded_attention,
    check_memory,
    ffn_bytes,
    ffn_flops,
    fit_exponent,
    hbm_accesses_flash,
    hbm_accesses_standard,
    measure,
    naive_attention,
    projection_flops,
    tiled_attention,
    tiled_attention_plain,
)


def qkv(shape, seed=0, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(shape, generator=gen, dtype=dtype) for _ in range(3))


# --------------------------------------------------------------------------- fit_exponent


@pytest.mark.parametrize("slope", [1.0, 2.0, 0.5, 3.0])
def test_fit_recovers_exact_power_law(slope):
    n = np.array([128, 256, 512, 1024, 4096])
    fit = fit_exponent(n, 7.5 * n**slope)
    assert isinstance(fit, Fit)
    assert fit.slope == pytest.approx(slope, abs=1e-12)
    assert fit.stderr == pytest.approx(0.0, abs=1e-12)


def test_fit_stderr_grows_with_noise_and_matches_numpy():
    rng = np.random.default_rng(0)
    n = np.geomspace(100, 10_000, 12)
    quiet = fit_exponent(n, n**2 * np.exp(rng.normal(0, 0.01, n.size)))
    noisy = fit_exponent(n, n**2 * np.exp(rng.normal(0, 0.3, n.size)))
    assert quiet.stderr < noisy.stderr
    assert quiet.slope == pytest.approx(2.0, abs=0.02)
    y = np.log(n**2 * np.exp(rng.normal(0, 0.3, n.size)))
    fit = fit_exponent(n, np.exp(y))
    (p, _), resid, *_ = np.polyfit(np.log(n), y, 1, full=True)
    assert fit.slope == pytest.approx(p, rel=1e-10)
    sxx = ((np.log(n) - np.log(n).mean()) ** 2).sum()
    assert fit.stderr == pytest.approx(math.sqrt(resid[0] / (n.size - 2) / sxx), rel=1e-10)


def test_fit_with_two_points_has_slope_and_nan_stderr():
    fit = fit_exponent([10, 100], [1.0, 100.0])
    assert fit.slope == pytest.approx(2.0)
    assert math.isnan(fit.stderr)


@pytest.mark.parametrize(
    "sizes, values, match",
    [
        ([10], [1.0], "at least 2 points"),
        ([], [], "at least 2 points"),
        ([10, 20], [1.0, 0.0], "values must be finite and > 0"),
        ([10, 20], [1.0, -3.0], "values must be finite and > 0"),
        ([10, 20], [1.0, float("nan")], "values must be finite and > 0"),
        ([0, 20], [1.0, 2.0], "sizes must be finite and > 0"),
        ([10, 20, 30], [1.0, 2.0], "same length"),
        ([10, 10], [1.0, 2.0], "all sizes are equal"),
    ],
)
def test_fit_rejects_bad_input(sizes, values, match):
    with pytest.raises(ValueError, match=match):
        fit_exponent(sizes, values)


# --------------------------------------------------------------------------- counts


def test_attention_flops_hand_computed():
    # n=2, d_k=3: QKᵀ 2·4·3=24, scale 4, softmax 5·4=20, ·V 24 -> 72 per head
    assert attention_flops(2, 3) == 72
    assert attention_flops(2, 3, h=12) == 12 * 72
    assert attention_flops(512, 64, h=12) == 12 * (4 * 512**2 * 64 + 6 * 512**2)


def test_attention_flops_quadruple_when_n_doubles():
    assert attention_flops(2048, 64) == 4 * attention_flops(1024, 64)


def test_byte_counts_hand_computed():
    assert attention_bytes(3) == 36  # 9 float32 entries
    assert attention_bytes(3, h=2, dtype_bytes=8) == 144
    assert attention_bytes(8192) == 2**28  # 256 MiB for one float32 head
    assert ffn_bytes(512, 3072) == 512 * 3072 * 4


def test_ffn_and_projection_flops_hand_computed():
    assert ffn_flops(2, 3, 5) == 2 * (2 * 2 * 3 * 5)  # two products of 2·n·d·d_ff
    assert projection_flops(2, 3) == 4 * (2 * 2 * 3 * 3)  # Q, K, V, W_O
    # BERT-base: the attention matrix outgrows the FFN activation past n = d_ff / h = 256
    assert attention_bytes(256, h=12) == ffn_bytes(256, 3072)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "8"])
def test_counts_reject_bad_sizes(bad):
    with pytest.raises(ValueError, match="must be a whole number >= 1"):
        attention_flops(bad, 64)
    with pytest.raises(ValueError, match="must be a whole number >= 1"):
        attention_bytes(bad)


# --------------------------------------------------------------------------- memory guard


def test_guard_refuses_absurd_n_with_a_clear_message():
    n = 10**7
    with pytest.raises(MemoryGuardError) as info:
        check_memory(attention_bytes(n), n=n)
    message = str(info.value)
    assert "n = 10000000" in message
    assert f"{attention_bytes(n):,} bytes" in message
    assert "available" in message and "choose a smaller n" in message
    assert isinstance(info.value, MemoryError)
    assert info.value.needed == attention_bytes(n)
    assert info.value.limit == info.value.available // 2


def test_guard_allows_small_sizes():
    check_memory(attention_bytes(128))


def test_guard_uses_the_fraction(monkeypatch):
    monkeypatch.setattr(cost, "available_memory", lambda: 1000)
    check_memory(500, fraction=0.5)
    with pytest.raises(MemoryGuardError, match=r"501 bytes.*1,000 bytes.*50%"):
        check_memory(501, fraction=0.5)
    check_memory(900, fraction=0.9)


def test_guard_skips_when_memory_is_unknown(monkeypatch):
    monkeypatch.setattr(cost, "available_memory", lambda: None)
    check_memory(10**18)


def test_available_memory_reads_a_positive_number():
    available = cost.available_memory()
    assert isinstance(available, int) and available > 0


@pytest.mark.parametrize("kwargs, match", [
    ({"n_bytes": -1}, "n_bytes"), ({"n_bytes": float("nan")}, "n_bytes"),
    ({"n_bytes": 1, "fraction": 0}, "fraction"), ({"n_bytes": 1, "fraction": 1.5}, "fraction"),
])
def test_guard_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        check_memory(**kwargs)


# --------------------------------------------------------------------------- measure


def test_measure_returns_one_measurement_per_size():
    res = measure(lambda n: sum(range(n)), [10, 100, 1000], repeats=2, progress=False)
    assert [m.n for m in res] == [10, 100, 1000]
    assert all(isinstance(m, Measurement) and m.error is None for m in res)
    assert all(m.seconds > 0 for m in res)


def test_measure_counts_torch_tensor_bytes_exactly():
    def setup(n):
        return qkv((1, 1, n, 16))

    res = measure(naive_attention, [64, 128, 256], setup=setup, progress=False)
    # the scores and the weights, n×n float32 each, are alive together at the peak
    assert [m.peak_bytes for m in res] == [2 * attention_bytes(n) for n in (64, 128, 256)]
    assert fit_exponent([m.n for m in res], [m.peak_bytes for m in res]).slope == \
        pytest.approx(2.0, abs=1e-9)


def test_measure_torch_memory_ignores_views_and_inputs():
    def view_only(x):
        return x.transpose(0, 1)[0]

    res = measure(view_only, [100], setup=lambda n: torch.zeros(n, n), progress=False)
    assert res[0].peak_bytes == 0


def test_measure_torch_memory_sees_freed_temporaries():
    def two_temporaries(x):
        a = x * 2  # n floats
        del a
        b = x + 1  # n floats, reusing the freed room: the peak stays at one temporary
        return b

    res = measure(two_temporaries, [1000], setup=lambda n: torch.zeros(n), progress=False)
    assert res[0].peak_bytes == 4000


def test_measure_numpy_memory_via_tracemalloc():
    res = measure(lambda n: np.ones((n, n)), [100, 200], progress=False)
    for m in res:
        assert 8 * m.n**2 <= m.peak_bytes < 8 * m.n**2 + 10_000


def test_measure_without_memory():
    res = measure(lambda n: n, [1, 2], memory="none", progress=False)
    assert [m.peak_bytes for m in res] == [None, None]


def test_measure_reports_a_failing_size_and_goes_on():
    def fails_at_20(n):
        if n == 20:
            raise RuntimeError("boom at 20")
        return n

    res = measure(fails_at_20, [10, 20, 30], progress=False)
    assert [m.error for m in res] == [None, "RuntimeError: boom at 20", None]
    assert math.isnan(res[1].seconds) and res[1].peak_bytes is None
    assert res[2].seconds > 0


def test_measure_reports_guard_refusal_per_size():
    def setup(n):
        check_memory(attention_bytes(n), n=n)
        return (n,)

    res = measure(lambda n: n, [128, 10**7], setup=setup, progress=False)
    assert res[0].error is None
    assert res[1].error.startswith("MemoryGuardError: n = 10000000 needs")


def test_measure_runs_warmup_plus_repeats_plus_one_memory_run():
    calls = []
    measure(calls.append, [5], repeats=3, warmup=2, progress=False)
    assert len(calls) == 2 + 3 + 1


def test_measure_progress_bar_goes_to_stderr(capsys):
    measure(lambda n: n, [1, 2], progress=True)
    assert "<lambda>" in capsys.readouterr().err
    measure(lambda n: n, [1, 2], progress=False)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("sizes, match", [
    ([], "sizes is empty"),
    ([0, 10], "whole numbers >= 1"),
    ([-5], "whole numbers >= 1"),
    ([10, 2.5], "whole numbers >= 1"),
    ([100, 10], "strictly increasing"),
    ([10, 10], "strictly increasing"),
])
def test_measure_rejects_bad_sizes(sizes, match):
    with pytest.raises(ValueError, match=match):
        measure(lambda n: n, sizes, progress=False)


@pytest.mark.parametrize("kwargs, match", [
    ({"repeats": 0}, "repeats must be"), ({"repeats": 1.5}, "repeats must be"),
    ({"warmup": -1}, "warmup must be"), ({"memory": "gpu"}, "memory must be one of"),
])
def test_measure_rejects_bad_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        measure(lambda n: n, [1], progress=False, **kwargs)


def test_measure_rejects_non_callable():
    with pytest.raises(TypeError, match="fn must be callable"):
        measure(42, [1])


# --------------------------------------------------------------------------- kernels


@pytest.mark.parametrize("shape, block", [
    ((1, 1, 300, 64), 64), ((2, 3, 130, 16), 32), ((50, 8), 7), ((1, 1, 17, 4), 256),
])
def test_tiled_equals_sdpa_float32(shape, block):
    Q, K, V = qkv(shape)
    out = tiled_attention(Q, K, V, block=block)
    ref = F.scaled_dot_product_attention(Q, K, V)
    assert out.shape == ref.shape
    assert (out - ref).abs().max().item() <= 1e-5


def test_tiled_equals_numpy_reference_float64():
    Q, K, V = qkv((2, 40, 8), seed=3, dtype=torch.float64)
    out = tiled_attention(Q, K, V, block=6)
    ref, _ = scaled_dot_product_attention(Q.numpy(), K.numpy(), V.numpy())
    np.testing.assert_allclose(out.numpy(), ref, rtol=0, atol=1e-12)


def test_tiled_cross_attention_and_d_v():
    gen = torch.Generator().manual_seed(4)
    Q = torch.randn(3, 9, 8, generator=gen, dtype=torch.float64)
    K = torch.randn(3, 20, 8, generator=gen, dtype=torch.float64)
    V = torch.randn(3, 20, 5, generator=gen, dtype=torch.float64)
    out = tiled_attention(Q, K, V, block=4)
    ref, _ = scaled_dot_product_attention(Q.numpy(), K.numpy(), V.numpy())
    assert out.shape == (3, 9, 5)
    np.testing.assert_allclose(out.numpy(), ref, rtol=0, atol=1e-12)


def test_tiled_with_causal_and_padding_masks():
    Q, K, V = qkv((2, 2, 37, 8), seed=5, dtype=torch.float64)
    causal = torch.tril(torch.ones(37, 37, dtype=torch.bool))
    out = tiled_attention(Q, K, V, block=5, mask=causal)
    ref = F.scaled_dot_product_attention(Q, K, V, attn_mask=causal)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-12)
    lengths = torch.tensor([30, 11])
    padding = (torch.arange(37) < lengths[:, None])[:, None, None, :]  # (batch, 1, 1, n)
    out = tiled_attention(Q, K, V, block=8, mask=padding)
    ref = F.scaled_dot_product_attention(Q, K, V, attn_mask=padding)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-12)


def test_tiled_fully_masked_row_gives_zeros_like_reference():
    Q, K, V = qkv((6, 4), seed=6, dtype=torch.float64)
    mask = torch.ones(6, 6, dtype=torch.bool)
    mask[2] = False  # query 2 may attend to nothing
    mask[4, :3] = False  # query 4 only to keys in the second block
    out = tiled_attention(Q, K, V, block=3, mask=mask)
    ref, _ = scaled_dot_product_attention(Q.numpy(), K.numpy(), V.numpy(), mask=mask.numpy())
    assert not torch.isnan(out).any()
    assert torch.equal(out[2], torch.zeros(4, dtype=torch.float64))
    np.testing.assert_allclose(out.numpy(), ref, rtol=0, atol=1e-12)


def test_tiled_memory_is_linear_and_naive_quadratic():
    def setup(n):
        return qkv((1, 1, n, 16))

    sizes = [256, 512, 1024]
    tiled = measure(lambda Q, K, V: tiled_attention(Q, K, V, block=64), sizes, setup=setup,
                    repeats=1, warmup=0, progress=False)
    naive = measure(naive_attention, sizes, setup=setup, repeats=1, warmup=0, progress=False)
    assert fit_exponent(sizes, [m.peak_bytes for m in tiled]).slope == pytest.approx(1, abs=0.01)
    assert fit_exponent(sizes, [m.peak_bytes for m in naive]).slope == pytest.approx(2, abs=0.01)
    assert tiled[-1].peak_bytes * 10 < naive[-1].peak_bytes


def test_naive_attention_equals_sdpa():
    Q, K, V = qkv((2, 3, 50, 16), seed=7)
    ref = F.scaled_dot_product_attention(Q, K, V)
    assert (naive_attention(Q, K, V) - ref).abs().max().item() <= 1e-5


@pytest.mark.parametrize("fn", [tiled_attention, naive_attention])
def test_kernels_reject_mismatched_shapes(fn):
    Q, K, V = qkv((5, 8))
    with pytest.raises(ValueError, match=r"Q and K must share d_k.*\(5, 8\).*\(5, 4\)"):
        fn(Q, K[:, :4], V)
    with pytest.raises(ValueError, match="K and V must have the same number of keys"):
        fn(Q, K, V[:3])
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        fn(Q[0], K, V)
    with pytest.raises(TypeError, match="torch.Tensor .use torch.from_numpy"):
        fn(Q.numpy(), K, V)
    with pytest.raises(TypeError, match="floating-point"):
        fn(Q.long(), K, V)
    bad = Q.clone()
    bad[1, 2] = float("nan")
    with pytest.raises(ValueError, match="Q contains NaN"):
        fn(bad, K, V)


def test_tiled_rejects_bad_block_and_mask():
    Q, K, V = qkv((5, 8))
    for block in (0, -2, 1.5):
        with pytest.raises(ValueError, match="block must be a whole number >= 1"):
            tiled_attention(Q, K, V, block=block)
    with pytest.raises(TypeError, match="mask must be a boolean torch.Tensor"):
        tiled_attention(Q, K, V, mask=torch.ones(5, 5))
    with pytest.raises(ValueError, match=r"mask of shape \(4, 5\) does not broadcast"):
        tiled_attention(Q, K, V, mask=torch.ones(4, 5, dtype=torch.bool))


def test_matmul_peak_is_positive():
    assert cost.matmul_peak_gflops(n=64, repeats=2) > 0


def test_pick_device_is_cpu_or_cuda():
    assert cost.pick_device().type in ("cpu", "cuda")


# --------------------------------------------------------------------------- benchmark


def test_random_qkv_is_seeded_and_shaped():
    Q, K, V = cost.random_qkv(10, d_k=4, h=2, seed=3)
    assert Q.shape == K.shape == V.shape == (1, 2, 10, 4) and Q.dtype == torch.float32
    assert torch.equal(Q, cost.random_qkv(10, d_k=4, h=2, seed=3)[0])
    assert not torch.equal(Q, cost.random_qkv(10, d_k=4, h=2, seed=4)[0])
    Qn, _, _ = cost.random_qkv(10, d_k=4, h=2, seed=3, as_numpy=True)
    assert isinstance(Qn, np.ndarray) and np.array_equal(Qn, Q.numpy())
    with pytest.raises(ValueError, match="n must be a whole number >= 1"):
        cost.random_qkv(0)


def test_meta_tensors_count_memory_without_allocating():
    def setup(n):
        return tuple(torch.empty(1, 1, n, 64, device="meta") for _ in range(3))

    (m,) = measure(naive_attention, [1 << 16], setup=setup, repeats=1, warmup=0,
                   progress=False)
    assert m.error is None and m.peak_bytes == 2 * attention_bytes(1 << 16)  # 32 GiB, counted


@pytest.fixture(scope="module")
def small_benchmark():
    return cost.run_benchmark([64, 128, 256], d_k=16, block=32, repeats=1, progress=False)


def test_benchmark_measures_every_kernel_and_the_figures(small_benchmark):
    result = small_benchmark
    assert list(result["methods"]) == ["naive numpy", "naive torch", "torch SDPA",
                                       "tiled (block 32)"]
    for rows in result["methods"].values():
        assert [r["n"] for r in rows] == [64, 128, 256]
        assert all(r["error"] is None and r["seconds"] > 0 and r["gflops"] > 0 for r in rows)
    f = result["figures"]
    assert f["tiled_max_abs_diff"] <= 1e-5
    assert f["memory_ratio_n"] == 256
    assert f["naive_torch_over_tiled_memory"] == pytest.approx(
        result["methods"]["naive torch"][2]["peak_bytes"]
        / result["methods"]["tiled (block 32)"][2]["peak_bytes"])
    assert f["naive_torch_memory_exponent"] == pytest.approx(2.0, abs=1e-9)
    assert 1.7 < f["naive_numpy_memory_exponent"] <= 2.1  # at small n, fixed overheads lower it
    assert f["tiled_over_sdpa_throughput_2048"] is None  # 2048 was not in this sweep


def test_benchmark_reports_guard_refusals_and_goes_on(monkeypatch):
    monkeypatch.setattr(cost, "available_memory", lambda: 2 * 9 * attention_bytes(64))
    result = cost.run_benchmark([32, 64, 4096], d_k=8, block=16, repeats=1, progress=False)
    numpy_rows = result["methods"]["naive numpy"]
    assert numpy_rows[0]["error"] is None
    assert numpy_rows[2]["error"].startswith("MemoryGuardError: n = 4096 needs")
    assert numpy_rows[2]["seconds"] is None
    assert "4096" not in result["tiled_max_abs_diff_by_n"]
    assert "Refused or failed" in cost.benchmark_table(result)


def test_benchmark_table_lists_sizes_and_ratios(small_benchmark):
    table = cost.benchmark_table(small_benchmark)
    assert table.startswith("| n | naive numpy ms |")
    assert "| 256 |" in table
    assert "naive torch / tiled" in table and "fitted memory exponent: naive torch 2.000" in table


def test_main_writes_json_png_and_table(tmp_path, capsys):
    import json

    assert cost.main(["--min-n", "32", "--max-n", "64", "--d-k", "8", "--block", "16",
                      "--repeats", "1", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "cost.json").read_text())
    assert result["config"]["sizes"] == [32, 64]
    assert (tmp_path / "cost.png").stat().st_size > 1000
    assert (tmp_path / "cost.md").read_text().startswith("| n |")
    assert "wrote" in capsys.readouterr().out


def test_main_rejects_bad_sizes(tmp_path):
    with pytest.raises(SystemExit):
        cost.main(["--min-n", "64", "--max-n", "32", "--out", str(tmp_path)])


def test_tiled_broadcasts_leading_axes():
    gen = torch.Generator().manual_seed(8)
    Q = torch.randn(1, 4, 30, 8, generator=gen, dtype=torch.float64)
    K = torch.randn(3, 1, 30, 8, generator=gen, dtype=torch.float64)
    V = torch.randn(3, 4, 30, 5, generator=gen, dtype=torch.float64)
    out = tiled_attention(Q, K, V, block=7)
    ref = F.scaled_dot_product_attention(Q.expand(3, 4, 30, 8), K.expand(3, 4, 30, 8), V)
    assert out.shape == (3, 4, 30, 5)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-12)


def test_tiled_refuses_gradients_clearly_but_runs_under_no_grad():
    Q, K, V = qkv((6, 4))
    Q.requires_grad_(True)
    with pytest.raises(ValueError, match="forward pass only.*torch.no_grad"):
        tiled_attention(Q, K, V)
    with torch.no_grad():
        out = tiled_attention(Q, K, V, block=4)
    assert (out - F.scaled_dot_product_attention(Q, K, V)).abs().max().item() <= 1e-5


# --------------------------------------------------------------------------- teaching twins
# float64 on both sides: the two do the same sums in the same blocks, only the buffers differ,
# so they agree to a few units of float64 rounding (1e-12 leaves ~1e4 ulps of room).


@pytest.mark.parametrize("shape, block", [((1, 2, 37, 8), 5), ((40, 6), 7), ((3, 9, 4), 64)])
def test_plain_tiled_twin_equals_fast_tiled_float64(shape, block):
    Q, K, V = qkv(shape, seed=11, dtype=torch.float64)
    torch.testing.assert_close(tiled_attention_plain(Q, K, V, block=block),
                               tiled_attention(Q, K, V, block=block), rtol=0, atol=1e-12)


def test_plain_tiled_twin_equals_fast_with_random_mask_and_empty_rows():
    Q, K, V = qkv((2, 1, 30, 8), seed=12, dtype=torch.float64)
    mask = torch.rand(2, 1, 30, 30, generator=torch.Generator().manual_seed(0)) > 0.6
    mask[..., 4, :] = False  # a query with no key at all
    mask[..., 7, :10] = False  # a query whose first blocks are all masked
    plain = tiled_attention_plain(Q, K, V, block=4, mask=mask)
    torch.testing.assert_close(plain, tiled_attention(Q, K, V, block=4, mask=mask),
                               rtol=0, atol=1e-12)
    assert torch.equal(plain[..., 4, :], torch.zeros_like(plain[..., 4, :]))


def test_plain_tiled_twin_rejects_bad_block():
    Q, K, V = qkv((5, 4))
    with pytest.raises(ValueError, match="block"):
        tiled_attention_plain(Q, K, V, block=0)


# --------------------------------------------------------------------------- banded (torch)


@pytest.mark.parametrize("n, w", [(37, 2), (37, 6), (64, 16), (10, 40)])
def test_banded_attention_equals_masked_sdpa_float64(n, w):
    Q, K, V = qkv((1, 2, n, 8), seed=13, dtype=torch.float64)
    i = torch.arange(n)
    band = (i[:, None] - i[None, :]).abs() <= w // 2
    ref = F.scaled_dot_product_attention(Q, K, V, attn_mask=band)
    torch.testing.assert_close(banded_attention(Q, K, V, w), ref, rtol=0, atol=1e-12)


def test_banded_attention_memory_is_linear_in_n():
    def setup(n):
        return qkv((1, 1, n, 16))
    rows = measure(lambda Q, K, V: banded_attention(Q, K, V, 32), [512, 1024, 2048],
                   setup=setup, repeats=1, warmup=0, progress=False)
    assert abs(fit_exponent([r.n for r in rows], [r.peak_bytes for r in rows]).slope - 1) < 0.05


def test_banded_attention_rejects_odd_window():
    Q, K, V = qkv((8, 4))
    with pytest.raises(ValueError, match="even"):
        banded_attention(Q, K, V, 3)


# --------------------------------------------------------------------------- HBM accesses


def test_hbm_counts_hand_computed():
    assert hbm_accesses_standard(4, 2) == 4 * 4 * 2 + 4 * 16
    # sram 16 numbers, d = 2: key blocks of 16 / 8 = 2 rows, so T_c = 2 outer steps for n = 4
    assert hbm_accesses_flash(4, 2, 16) == 3 * 8 + 8 + 2 * (3 * 8 + 16)


def test_flash_reads_and_writes_fewer_numbers_than_standard_at_length():
    n, d, sram = 4096, 64, 192 * 1024 // 4
    assert hbm_accesses_flash(n, d, sram) < hbm_accesses_standard(n, d) / 3
    bigger = hbm_accesses_flash(n, d, 4 * sram)
    assert bigger < hbm_accesses_flash(n, d, sram)  # more SRAM, fewer passes over Q and O


def test_hbm_flash_rejects_too_small_sram():
    with pytest.raises(ValueError, match="sram"):
        hbm_accesses_flash(128, 64, 100)


def test_measure_reports_minimum_by_default_and_median_on_request(monkeypatch):
    clock = [0.0, 4.0, 10.0, 11.0, 20.0, 23.0, 30.0, 32.0]  # runs of 4, 1, 3 and 2 seconds
    for statistic, expected in [("min", 1.0), ("median", 2.5)]:
        ticks = iter(clock)
        monkeypatch.setattr(cost.time, "perf_counter", lambda t=ticks: next(t))
        (m,) = measure(lambda n: None, [1], repeats=4, warmup=0, memory="none", progress=False,
                       statistic=statistic)
        assert m.seconds == expected
    with pytest.raises(ValueError, match="statistic"):
        measure(lambda n: None, [1], statistic="mean", progress=False)
