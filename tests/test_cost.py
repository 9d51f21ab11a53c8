"""bertlib.lab.cost: the counts, the sweep and its log-log fit, the memory guard, the inputs."""

import math

import numpy as np
import pytest
import torch

from bertlib.lab import cost
from bertlib.lab.cost import (
    REPEATS,
    WARMUP,
    Fit,
    Measurement,
    MemoryGuardError,
    attention_bytes,
    attention_flops,
    check_memory,
    ffn_bytes,
    ffn_flops,
    fit_exponent,
    hbm_accesses_flash,
    hbm_accesses_standard,
    measure,
    projection_flops,
)
from bertlib.paper.kernels import naive_attention

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
        ([10], [1.0], "at least 2 points with different sizes"),
        ([], [], "at least 2 points with different sizes"),
        ([10, 20], [1.0, 0.0], "values must be finite and > 0"),
        ([10, 20], [1.0, -3.0], "values must be finite and > 0"),
        ([10, 20], [1.0, float("nan")], "values must be finite and > 0"),
        ([0, 20], [1.0, 2.0], "sizes must be finite and > 0"),
        ([10, 20, 30], [1.0, 2.0], "sizes and values must have the same shape"),
        ([10, 10], [1.0, 2.0], "at least 2 points with different sizes"),
        ([[10, 20]], [[1.0, 2.0]], "sizes must have 1 dimensions"),
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


@pytest.mark.parametrize("bad, error", [
    (0, ValueError), (-1, ValueError), (2.5, TypeError), (True, TypeError), ("8", TypeError),
])
def test_counts_reject_bad_sizes(bad, error):
    with pytest.raises(error, match="n must be a whole number >= 1"):
        attention_flops(bad, 64)
    with pytest.raises(error, match="n must be a whole number >= 1"):
        attention_bytes(bad)
    with pytest.raises(error, match="d_ff must be a whole number >= 1"):
        ffn_flops(8, 4, bad)


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


def test_available_memory_agrees_with_psutil():
    psutil = pytest.importorskip("psutil")
    available = cost.available_memory()
    memory = psutil.virtual_memory()
    # both read the kernel's estimate; other programs may allocate between the two readings
    assert isinstance(available, int) and abs(available - memory.available) < 0.05 * memory.total


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


def test_measure_counts_torch_tensor_bytes_exactly(torch_qkv):
    def setup(n):
        return torch_qkv((1, 1, n, 16))

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
    ([], "sizes must be one or more n"),
    ([0, 10], "each size n in sizes must be a whole number >= 1, got 0"),
    ([-5], "each size n in sizes must be a whole number >= 1, got -5"),
    ([100, 10], "strictly increasing"),
    ([10, 10], "strictly increasing"),
])
def test_measure_rejects_bad_sizes(sizes, match):
    with pytest.raises(ValueError, match=match):
        measure(lambda n: n, sizes, progress=False)


def test_measure_rejects_a_size_that_is_not_whole():
    with pytest.raises(TypeError, match="each size n in sizes must be a whole number >= 1, got 2.5"):
        measure(lambda n: n, [10, 2.5], progress=False)


@pytest.mark.parametrize("kwargs, match", [
    ({"repeats": 0}, "repeats must be"), ({"warmup": -1}, "warmup must be"),
    ({"memory": "gpu"}, "memory must be one of"),
])
def test_measure_rejects_bad_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        measure(lambda n: n, [1], progress=False, **kwargs)


def test_measure_rejects_a_fractional_repeat_count():
    with pytest.raises(TypeError, match="repeats must be a whole number >= 1, got 1.5"):
        measure(lambda n: n, [1], repeats=1.5, progress=False)


def test_measure_rejects_non_callable():
    with pytest.raises(TypeError, match="fn must be callable"):
        measure(42, [1])
    with pytest.raises(TypeError, match="setup must be callable or None, got int"):
        measure(lambda n: n, [1], setup=3)


def test_matmul_peak_is_two_n_cubed_over_the_fastest_run(monkeypatch):
    clock = iter([0.0, 0.5, 1.0, 1.25, 2.0, 3.0])  # 3 timed runs of 0.5, 0.25 and 1 seconds
    monkeypatch.setattr(cost.time, "perf_counter", lambda: next(clock))
    assert cost.matmul_peak_gflops(n=8, repeats=3, device="cpu") == 2 * 8**3 / 0.25 / 1e9


def test_pick_device_prefers_a_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert cost.pick_device() == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert cost.pick_device() == torch.device("cuda")


# --------------------------------------------------------------------------- inputs


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


def test_measure_keeps_every_timed_run_and_tells_a_difference_beyond_the_spread():
    (m,) = measure(lambda n: sum(range(n)), [1000], repeats=4, memory="none", progress=False)
    assert len(m.times) == 4 and m.seconds == m.fastest == min(m.times)
    assert m.fastest <= m.median <= m.slowest == max(m.times)
    fast = Measurement(1, 1.0, None, None, (1.0, 1.2, 1.1))
    slow = Measurement(1, 2.0, None, None, (2.0, 2.5))
    overlapping = Measurement(1, 1.1, None, None, (1.1, 3.0))
    assert fast.beyond_spread(slow) and slow.beyond_spread(fast)
    assert not fast.beyond_spread(overlapping) and not overlapping.beyond_spread(slow)


def test_one_timing_procedure_is_the_default():
    calls = []
    measure(calls.append, [7], memory="none", progress=False)
    assert len(calls) == WARMUP + REPEATS and (WARMUP, REPEATS) == (1, 5)


@pytest.mark.parametrize("element_bytes, d", [(2, 64), (2, 128), (4, 64), (4, 128)])
def test_flash_traffic_is_theta_n2_d2_over_m_and_its_saving_levels_off_at_m_over_3d2(element_bytes, d):
    M = 192 * 1024 // element_bytes  # 192 KB of SRAM, in numbers of this size
    for n in (4096, 65536):
        assert 12 <= hbm_accesses_flash(n, d, M) / (n * n * d * d / M) <= 14
    saving = hbm_accesses_standard(65536, d) / hbm_accesses_flash(65536, d, M)
    assert saving == pytest.approx(M / (3 * d * d), rel=0.05)
    if (element_bytes, d) == (4, 128):  # d = √(M/3): no saving at all
        assert saving < 1
