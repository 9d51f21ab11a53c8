"""Before running: every widget and bertviz view shows a picture in a notebook nobody has run.

Two ways a learner meets a notebook before running it, both checked on every notebook:
- opened in a fresh JupyterLab, untrusted (a fresh clone) and trusted (after ``make lab``),
  without executing anything: no output may show a widget's text repr (``VBox(``, ``HBox(``,
  ``Output(``), and every interactive output (a widget, a bertviz view) must show a picture;
- rendered by nbconvert's HTML exporter, as static viewers (nbviewer, GitHub) do, scripts not
  run: every interactive output must hold an ``<img>`` or ``<svg>`` outside any script.

Screenshots of the unrun notebooks go with the others (``<notebook>_unrun_<mode>.png``), and the
outputs of notebook 03's explorer and head view, unrun and untrusted, as
``03_explorer_unrun.png`` and ``03_head_view_unrun.png``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import NOTEBOOKS

NAMES = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
TEXT_REPR = re.compile(r"\b(VBox|HBox|Output)\(")
#: The outputs of notebook 03 photographed for the README: (file stem, what the cell shows).
README_SHOTS = {"03_explorer_unrun": "AttentionExplorer(", "03_head_view_unrun": "head_view("}


def is_interactive(output: dict) -> bool:
    """A widget's output, or a bertviz view (HTML whose drawing needs its script)."""
    data = output.get("data", {})
    html = data.get("text/html", "")
    html = "".join(html) if isinstance(html, list) else html
    return WIDGET_VIEW in data or 'id="bertviz-' in html


def interactive_cells(nb: dict) -> list[int]:
    """Indices (among all cells) of the code cells with an interactive output."""
    return [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
            and any(is_interactive(o) for o in c.get("outputs", []))]


def read(name: str) -> dict:
    return json.loads((NOTEBOOKS / name).read_text())


# --- nbconvert's HTML, scripts not run ------------------------------------------------------
def pictureless_outputs(path: Path) -> list[str]:
    """The interactive cells of a notebook whose nbconvert HTML output shows no picture, or
    shows a widget's text repr, with scripts not run."""
    from bs4 import BeautifulSoup
    from nbconvert import HTMLExporter

    nb = json.loads(path.read_text())
    html, _ = HTMLExporter().from_filename(str(path))
    soup = BeautifulSoup(html, "html.parser")
    for script in soup.select("script"):
        script.decompose()
    cells = soup.select("div.jp-Cell")
    assert len(cells) == len(nb["cells"]), f"{path.name}: cells in HTML vs notebook"
    bad = []
    for i in interactive_cells(nb):
        outputs = cells[i].select_one(".jp-Cell-outputWrapper")
        text = outputs.get_text() if outputs else ""
        if outputs is None or not outputs.select("img, svg"):
            bad.append(f"cell {i}: no <img> or <svg>")
        if TEXT_REPR.search(text):
            bad.append(f"cell {i}: a widget's text repr {TEXT_REPR.search(text).group()!r}")
    return bad


@pytest.mark.parametrize("name", NAMES)
def test_nbconvert_html_shows_a_picture_for_every_interactive_output(name):
    bad = pictureless_outputs(NOTEBOOKS / name)
    assert not bad, f"{name} rendered by nbconvert (scripts off): {bad}"


# --- a fresh JupyterLab, nothing run ---------------------------------------------------------
_SCROLL_JS = """
async (i) => {
  const notebook = window.jupyterapp.shell.currentWidget.content;
  notebook.activeCellIndex = i;
  await notebook.scrollToItem(i, 'center');
}
"""
_CELL_JS = """
(i) => {
  const cell = window.jupyterapp.shell.currentWidget.content.widgets[i];
  const area = cell.node.querySelector('.jp-Cell-outputArea');
  const shown = (el) => {
    const r = el.getBoundingClientRect();
    return r.width > 40 && r.height > 40 && getComputedStyle(el).visibility !== 'hidden';
  };
  const pictures = area ? [...area.querySelectorAll('img, svg')].filter(
      (el) => shown(el) && (el.tagName.toLowerCase() !== 'img' ||
                            (el.complete && el.naturalWidth > 0))) : [];
  return {pictures: pictures.length, text: area ? area.textContent : ''};
}
"""
_OPENED_JS = """
() => {
  const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  return !!panel && !!panel.content && !!panel.context && panel.content && panel.content.widgets.length > 0 &&
         panel.context.isReady;
}
"""


def open_unrun(page, url: str, name: str) -> None:
    """Open the notebook in JupyterLab and wait until it is shown (nothing is executed)."""
    page.goto(f"{url}/lab/tree/notebooks/{name}?reset", wait_until="domcontentloaded")
    page.wait_for_function(_OPENED_JS, timeout=120_000)
    page.wait_for_timeout(3000)  # widget state restored, bertviz's scripts (if trusted) ran
    no = page.locator(".jp-toast-container button", has_text="No")  # the "news?" toast
    if no.count():
        no.first.click()


@pytest.mark.parametrize("name", NAMES)
def test_unrun_notebook_shows_pictures_not_widget_text(name, unrun_lab, browser, screenshots):
    url, mode = unrun_lab
    nb = read(name)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        open_unrun(page, url, name)
        bad, first = [], None
        for i, cell in enumerate(nb["cells"]):
            if cell["cell_type"] != "code" or not cell.get("outputs"):
                continue
            page.evaluate(_SCROLL_JS, i)  # JupyterLab draws only the cells near the view
            page.wait_for_timeout(400)
            seen = page.evaluate(_CELL_JS, i)
            found = TEXT_REPR.search(seen["text"])
            if found:
                bad.append(f"cell {i} shows a widget's text repr {found.group()!r}")
            if i in interactive_cells(nb):
                if not seen["pictures"]:
                    bad.append(f"cell {i}: an interactive output with no picture")
                if first is None:
                    first = i
                    page.screenshot(path=str(screenshots / f"{Path(name).stem}_unrun_{mode}.png"))
                source = "".join(cell["source"])
                for stem, call in README_SHOTS.items():
                    if mode == "untrusted" and name.startswith("03") and call in source:
                        area = page.locator(".jp-Notebook .jp-Cell").nth(i).locator(
                            ".jp-Cell-outputArea")
                        area.screenshot(path=str(screenshots / f"{stem}.png"))
        assert not bad, f"{name}, unrun, {mode}: {bad}"
    finally:
        page.close()
