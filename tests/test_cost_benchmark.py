"""benchmarks/attention_cost.py (`make bench`): the sweep, its figures, table, plot and command line."""

import importlib.util
import json
from pathlib import Path

import pytest

from bertlib.lab import cost
from bertlib.lab.cost import attention_bytes, attention_flops

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "attention_cost.py"
_SPEC = importlib.util.spec_from_file_location("attention_cost", _PATH)
bench = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench)

pytestmark = pytest.mark.slow  # each runs a small sweep of four kernels


#: What the memory guard is told is free (it allows half: 5.3 MB): every kernel fits at n <= 256;
#: at n = 1024 naive numpy (about 38 MB) and naive torch (about 8.4 MB) are refused, SDPA (0.5 MB)
#: and tiled (1.4 MB) run. (n = 1024, not a larger n: the tiled kernel's Python loop over blocks
#: grows as n², and the sweep runs it five times.)
FREE_BYTES = 2 * 9 * attention_bytes(384)


@pytest.fixture(scope="module")
def small_benchmark():
    """One small sweep (one fresh measuring process) shared by the tests below, with a size the
    guard refuses for two kernels, so the same run shows the sweep going on past a refusal."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cost, "available_memory", lambda: FREE_BYTES)
        return bench.run_benchmark([64, 128, 256, 1024], d_k=16, block=32, repeats=1,
                                   progress=False)


def test_benchmark_measures_every_kernel_and_the_figures(small_benchmark):
    result = small_benchmark
    assert list(result["methods"]) == ["naive numpy", "naive torch", "torch SDPA",
                                       "tiled (block 32)"]
    for name, all_rows in result["methods"].items():
        assert [r["n"] for r in all_rows] == [64, 128, 256, 1024]
        refused = name in ("naive numpy", "naive torch")  # at 1024 (FREE_BYTES)
        rows = all_rows[:3] if refused else all_rows
        assert all(r["error"] is None for r in rows)
        assert all(r["resident_bytes"] >= 0 for r in rows)  # seen by the OS, in one fresh process
        assert all(r["seconds"] <= r["median"] <= r["slowest"] for r in rows)
        # GFLOP/s = the counted FLOPs over the measured time
        assert [r["gflops"] for r in rows] == [attention_flops(r["n"], 16) / r["seconds"] / 1e9
                                                for r in rows]
    f = result["figures"]
    assert f["tiled_max_abs_diff"] <= 1e-5
    assert f["memory_ratio_n"] == 256
    assert f["naive_torch_over_tiled_memory"] == pytest.approx(
        result["methods"]["naive torch"][2]["peak_bytes"]
        / result["methods"]["tiled (block 32)"][2]["peak_bytes"])
    assert f["naive_torch_memory_exponent"] == pytest.approx(2.0, abs=1e-9)
    assert 1.7 < f["naive_numpy_memory_exponent"] <= 2.1  # at small n, fixed overheads lower it
    assert f["tiled_over_sdpa_throughput_2048"] is None  # 2048 was not in this sweep


def test_benchmark_reports_guard_refusals_and_goes_on(small_benchmark):
    result = small_benchmark
    for name in ("naive numpy", "naive torch"):
        last = result["methods"][name][3]
        assert last["error"].startswith("MemoryGuardError: n = 1024 needs")
        assert last["seconds"] is None and last["gflops"] is None
        assert last["resident_bytes"] is None  # a refused size is not measured in the process
    assert result["methods"]["torch SDPA"][3]["error"] is None  # the sweep went on at 1024
    assert "1024" not in result["tiled_max_abs_diff_by_n"]  # naive torch, the reference, refused
    assert "Refused or failed" in bench.benchmark_table(result)


def test_benchmark_table_lists_sizes_and_ratios(small_benchmark):
    table = bench.benchmark_table(small_benchmark)
    assert table.startswith("| n | naive numpy ms |")
    assert "| 256 |" in table
    assert "naive torch / tiled" in table and "fitted memory exponent: naive torch 2.000" in table


def test_main_writes_json_png_and_table(tmp_path, capsys, monkeypatch, small_benchmark):
    # the sweep itself is the fixture's (tested above): main's part is the arguments it passes
    # and the three files it writes from the result
    calls = []

    def recorded_run(sizes, **kwargs):
        calls.append((sizes, kwargs))
        return small_benchmark

    monkeypatch.setattr(bench, "run_benchmark", recorded_run)
    assert bench.main(["--min-n", "32", "--max-n", "64", "--d-k", "8", "--block", "16",
                      "--repeats", "1", "--out", str(tmp_path)]) == 0
    assert calls == [([32, 64], {"d_k": 8, "block": 16, "repeats": 1})]
    written = json.loads((tmp_path / "cost.json").read_text())
    assert written == json.loads(json.dumps(small_benchmark))  # JSON makes tuples lists
    assert (tmp_path / "cost.png").stat().st_size > 1000
    assert (tmp_path / "cost.md").read_text().startswith("| n |")
    assert "wrote" in capsys.readouterr().out


def test_main_rejects_bad_sizes(tmp_path):
    with pytest.raises(SystemExit):
        bench.main(["--min-n", "64", "--max-n", "32", "--out", str(tmp_path)])



def test_main_sweeps_powers_of_two_between_min_and_max(tmp_path, monkeypatch):
    seen = {}

    def fake_run(sizes, **kwargs):
        seen["sizes"] = sizes
        raise SystemExit(0)

    monkeypatch.setattr(bench, "run_benchmark", fake_run)
    with pytest.raises(SystemExit):
        bench.main(["--min-n", "100", "--max-n", "1000", "--out", str(tmp_path)])
    assert seen["sizes"] == [100, 200, 400, 800]
