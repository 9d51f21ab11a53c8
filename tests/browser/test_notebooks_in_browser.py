"""Every notebook, run top to bottom in a real JupyterLab in a real (headless) Chromium.

Run with `make test-browser`. It fails when a cell errors, when the first or last output is not
what the committed notebook shows, or when a figure does not render.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lab import LabNotebook, output_text

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))


def committed_outputs(name: str) -> list[str]:
    """Texts of the committed notebook's stream/result outputs, in order (nbval keeps them true)."""
    nb = json.loads((ROOT / "notebooks" / name).read_text())
    texts = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "code" or "NBVAL_IGNORE_OUTPUT" in "".join(cell["source"]):
            continue
        for out in cell.get("outputs", []):
            if out.get("output_type") in ("stream", "execute_result") and output_text(out).strip():
                texts.append(output_text(out).strip())
    return texts


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ holds no .ipynb"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_in_jupyterlab(name, browser, lab_url, screenshots):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        nb = LabNotebook(page, lab_url, name)
        cells = nb.run_all()
        assert not nb.errors(cells), f"{name}: error outputs in the browser: {nb.errors(cells)}"
        live = [output_text(o).strip() for c in cells
                if "NBVAL_IGNORE_OUTPUT" not in c["source"]
                for o in c["outputs"]
                if o.get("output_type") in ("stream", "execute_result") and output_text(o).strip()]
        expected = committed_outputs(name)
        assert expected, f"{name}: the committed notebook has no checked text output"
        assert live and live[0] == expected[0], f"{name}: first output differs"
        assert live[-1] == expected[-1], f"{name}: last output differs"
        has_figures = any("image/png" in o.get("data", {}) for c in cells for o in c["outputs"])
        if has_figures:
            page.wait_for_timeout(500)
            assert nb.rendered_images() > 0, f"{name}: figures in outputs but none rendered"
        page.screenshot(path=str(screenshots / f"{Path(name).stem}.png"), full_page=False)
    finally:
        page.close()
