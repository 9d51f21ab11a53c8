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
