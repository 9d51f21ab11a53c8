"""The committed notebooks: executed top to bottom, small enough to read and to download."""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted(
    (ROOT / "notebooks" / "solutions").glob("*.ipynb"))
MAX_CELL_LINES = 25  # one idea per cell, readable without scrolling
MAX_BYTES = 2 * 2**20  # GitHub and nbviewer stay quick; the static pictures stay small


def _code_cells(path: Path) -> list[dict]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [c for c in cells if c["cell_type"] == "code" and "".join(c["source"]).strip()]


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT / "notebooks"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_name)
def test_every_code_cell_is_at_most_25_lines(path):
    long = [(i, len("".join(c["source"]).splitlines())) for i, c in enumerate(_code_cells(path))
            if len("".join(c["source"]).splitlines()) > MAX_CELL_LINES]
    assert not long, f"{_name(path)}: code cells (index, lines) over {MAX_CELL_LINES}: {long}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_name)
def test_committed_executed_top_to_bottom_without_errors(path):
    cells = _code_cells(path)
    counts = [c["execution_count"] for c in cells]
    assert counts == list(range(1, len(cells) + 1)), (
        f"{_name(path)}: execution counts {counts[:8]}...: re-run it with make execute")
    errors = [o.get("ename") for c in cells for o in c["outputs"] if o["output_type"] == "error"]
    assert not errors, f"{_name(path)} was saved with errors {errors}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_name)
def test_notebook_file_is_under_2_mb(path):
    assert path.stat().st_size < MAX_BYTES, f"{_name(path)} is {path.stat().st_size:,} bytes"


def test_every_lesson_has_its_solutions_notebook():
    lessons = {p.name for p in (ROOT / "notebooks").glob("*.ipynb")}
    solutions = {p.name for p in (ROOT / "notebooks" / "solutions").glob("*.ipynb")}
    assert lessons == solutions, f"lessons without solutions: {sorted(lessons - solutions)}"


def _colab():
    import sys

    sys.path.insert(0, str(ROOT / "tools"))
    import colab

    return colab


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_name)
def test_carries_exactly_the_colab_cell_and_link(path):
    colab = _colab()
    text = path.read_text(encoding="utf-8")
    relative = path.relative_to(ROOT).as_posix()
    expected = colab.dump(colab.with_colab(json.loads(text), relative))
    assert text == expected, (f"{_name(path)}: its Colab link or first code cell differs from "
                              "tools/colab.py's: run python tools/colab.py, then re-execute it")
    cells = json.loads(text)["cells"]
    first = next(c for c in cells if c["cell_type"] == "code")
    assert "".join(first["source"]) == colab.CELL and not first["outputs"], (
        f"{_name(path)}: the Colab cell must print nothing outside Colab")
    links = [c for c in cells if colab.colab_url(relative) in "".join(c["source"])]
    assert len(links) == 1 and links[0]["cell_type"] == "markdown", _name(path)


def test_colab_tool_is_idempotent_and_the_cell_changes_nothing_outside_colab(tmp_path):
    import os
    import subprocess
    import sys

    colab = _colab()
    nb = json.loads(NOTEBOOKS[0].read_text(encoding="utf-8"))
    once = colab.dump(colab.with_colab(nb, "notebooks/x.ipynb"))
    assert colab.dump(colab.with_colab(json.loads(once), "notebooks/x.ipynb")) == once
    code = [c for c in json.loads(once)["cells"] if c["cell_type"] == "code"]
    assert "".join(code[0]["source"]) == colab.CELL
    assert len([c for c in code if "".join(c["source"]) == colab.CELL]) == 1
    probe = ("before = set(globals()); import os; cwd = os.getcwd(); del os\n" + colab.CELL
             + "\nimport os\nassert os.getcwd() == cwd\n"
             "print(sorted(set(globals()) - before - {'before', 'cwd', 'os'}))")
    env = {k: v for k, v in os.environ.items() if k not in ("BERTLIB_COLAB", "BERTLIB_SOURCE")}
    run = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "[]\n", f"outside Colab the cell printed or bound: {run.stdout!r}"
