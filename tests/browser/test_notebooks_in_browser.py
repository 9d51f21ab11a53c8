"""Every notebook, run top to bottom in a real JupyterLab in a real (headless) Chromium.

Run with `make test-browser`. It fails when a cell errors, when the first or last output is not
what the committed notebook shows, or when a figure does not render.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from lab import LabNotebook, kernel_print, output_text

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))


def cell_text(outputs: list[dict]) -> str:
    """A cell's printed text and results, joined in order.

    JupyterLab merges consecutive outputs of the same stream while nbformat files may keep them
    apart, so cells are compared as a whole, not output by output.
    """
    return "".join(output_text(o) for o in outputs
                   if o.get("output_type") in ("stream", "execute_result")).strip()


def checked_texts(cells: list[tuple[str, list[dict]]]) -> list[str]:
    """Text of each (source, outputs) cell whose output nbval compares, skipping empty ones."""
    texts = [cell_text(outputs) for source, outputs in cells
             if "NBVAL_IGNORE_OUTPUT" not in source]
    return [t for t in texts if t]


def committed_outputs(name: str) -> list[str]:
    """The committed notebook's checked cell texts, in order (nbval keeps them true)."""
    nb = json.loads((ROOT / "notebooks" / name).read_text())
    return checked_texts([("".join(c["source"]), c.get("outputs", [])) for c in nb["cells"]
                          if c["cell_type"] == "code"])


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ holds no .ipynb"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_in_jupyterlab(name, browser, lab_url, screenshots):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        nb = LabNotebook(page, lab_url, name)
        cells = nb.run_all()
        assert not nb.errors(cells), f"{name}: error outputs in the browser: {nb.errors(cells)}"
        live = checked_texts([(c["source"], c["outputs"]) for c in cells])
        expected = committed_outputs(name)
        assert expected, f"{name}: the committed notebook has no checked text output"
        assert live and live[0] == expected[0], f"{name}: first checked cell's output differs"
        assert live[-1] == expected[-1], f"{name}: last checked cell's output differs"
        has_figures = any("image/png" in o.get("data", {}) for c in cells for o in c["outputs"])
        if has_figures:
            page.wait_for_timeout(500)
            assert nb.rendered_images() > 0, f"{name}: figures in outputs but none rendered"
        dismiss_news_prompt(page)
        page.screenshot(path=str(screenshots / f"{Path(name).stem}.png"), full_page=False)
        if page.locator(".bertlib-attention-explorer").count():
            check_explorer(page, name, screenshots)
        if page.locator("[id^=bertviz]").count():
            check_bertviz(page, name)
    finally:
        page.close()


def dismiss_news_prompt(page) -> None:
    """Answer JupyterLab's "get notified about news?" toast, so screenshots show the notebook."""
    no = page.locator(".jp-toast-container button", has_text="No")
    if no.count():
        no.first.click()


def explorer_variable(name: str) -> str:
    """The name the notebook gives its BERT explorer (``explorer = BertAttentionExplorer(...)``)."""
    source = "\n".join("".join(c["source"]) for c in
                       json.loads((ROOT / "notebooks" / name).read_text())["cells"])
    found = re.findall(r"^(\w+)\s*=\s*(?:Bert)?AttentionExplorer\(", source, re.M)
    assert found, f"{name}: shows an explorer but assigns none to a variable"
    return found[-1]


def check_explorer(page, name: str, screenshots: Path) -> None:
    """Type a sentence, change layer and head, give bad input: the view redraws or says why."""
    var = explorer_variable(name)
    box = page.locator(".bertlib-attention-explorer").last
    box.scroll_into_view_if_needed()
    view = box.locator(".explorer-view").first

    def view_text() -> str:
        view.wait_for(state="visible", timeout=30_000)
        return view.text_content() or ""

    def commit(selector: str, value: str) -> None:
        field = box.locator(f"{selector} input")
        field.fill(value)
        field.press("Enter")

    def wait_for_new_view(old: str, what: str) -> str:
        try:
            page.wait_for_function(
                "([el, old]) => { const v = el.querySelector('.explorer-view');"
                " return v && v.textContent !== old; }",
                arg=[box.element_handle(), old], timeout=60_000)
        except Exception as exc:
            raise AssertionError(f"{name}: the explorer did not redraw after {what}") from exc
        return view_text()

    before = view_text()
    static_shown = box.evaluate(
        "(el) => { const out = el.closest('.jp-OutputArea-child');"
        " const above = out && out.previousElementSibling;"
        " return !!above && getComputedStyle(above).display !== 'none'; }")
    assert not static_shown, f"{name}: the static picture still shows above the live explorer"
    commit(".explorer-text", "Birds fly south when winter comes")
    after_text = wait_for_new_view(before, "a new sentence")
    labels = {(t or "").strip() for t in view.locator("svg text").all_text_contents()}
    assert {"birds", "winter"} <= labels, f"{name}: view labels {sorted(labels)[:20]}"
    state = kernel_print(page, f"print({var}.tokens, repr({var}.message))")
    assert "'birds'" in state and "'winter'" in state, f"{name}: explorer state {state!r}"
    assert state.rstrip().endswith("''"), f"{name}: explorer shows an error: {state!r}"

    commit(".explorer-layer", "2")
    after_layer = wait_for_new_view(after_text, "a layer change")
    assert "layer 2" in after_layer, f"{name}: view after layer 2: {after_layer[:80]!r}"
    box.locator(".explorer-head select").select_option(label="head 3")
    after_head = wait_for_new_view(after_layer, "a head change")
    assert "layer 2, head 3" in after_head, f"{name}: view after head 3: {after_head[:80]!r}"
    state = kernel_print(page, f"print({var}._layer, {var}._head)")
    assert state.split() == ["2", "3"], f"{name}: explorer at layer/head {state!r}, wanted 2 3"
    page.screenshot(path=str(screenshots / f"{Path(name).stem}_explorer.png"))

    commit(".explorer-layer", "99")
    box.get_by_text(re.compile(r"layer must be a whole number in 0\.\.\d+")).first.wait_for(timeout=30_000)
    commit(".explorer-text", "   ")
    box.get_by_text(re.compile("empty")).first.wait_for(timeout=30_000)
    assert box.locator(".jp-OutputArea-output [data-mime-type*=error]").count() == 0, (
        f"{name}: the explorer shows a traceback instead of a message")
    assert "Traceback" not in (box.text_content() or ""), f"{name}: a traceback in the explorer"
    assert box.locator(".explorer-text input").is_enabled()


def check_bertviz(page, name: str) -> None:
    """bertviz's head view draws its SVG with the sentence's tokens, with no internet."""
    view = page.locator("[id^=bertviz]").first
    view.scroll_into_view_if_needed()
    labels = view.locator("svg text")
    try:
        labels.first.wait_for(timeout=30_000)
    except Exception as exc:
        raise AssertionError(f"{name}: bertviz drew no SVG text (scripts not loaded?)") from exc
    texts = {(t or "").strip() for t in labels.all_text_contents()}
    assert {"quick", "brown", "fox"} <= texts, f"{name}: bertviz labels {sorted(texts)[:20]}"
