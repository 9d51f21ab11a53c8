"""Driving one notebook in a real JupyterLab page through Playwright.

JupyterLab is started with ``expose_app_in_browser``, so ``window.jupyterapp`` gives the same
command registry and notebook models that the menus use.
"""

from __future__ import annotations

import time

# Summary of the current notebook: every code cell's execution count and outputs.
_CELLS_JS = """
() => {
  const panel = window.jupyterapp.shell.currentWidget;
  if (!panel || !panel.content || !panel.content.model) return null;
  const cells = panel.content.model.cells;
  const out = [];
  for (let i = 0; i < cells.length; i++) {
    const c = cells.get(i);
    if (c.type !== 'code') continue;
    const outputs = [];
    for (let k = 0; k < c.outputs.length; k++) outputs.push(c.outputs.get(k).toJSON());
    out.push({source: c.sharedModel.getSource(), count: c.executionCount, outputs: outputs});
  }
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  return {cells: out, status: kernel ? kernel.status : 'none'};
}
"""


def output_text(output: dict) -> str:
    """The readable text of one output in nbformat JSON (stream, result, display or error)."""
    if output.get("output_type") == "stream":
        text = output.get("text", "")
    elif output.get("output_type") == "error":
        text = f"{output.get('ename')}: {output.get('evalue')}"
    else:
        data = output.get("data", {})
        text = data.get("text/plain", "") or data.get("text/html", "")
    return "".join(text) if isinstance(text, list) else text


class LabNotebook:
    """One notebook opened in JupyterLab in ``page``."""

    def __init__(self, page, lab_url: str, name: str):
        self.page = page
        self.name = name
        page.goto(f"{lab_url}/lab/tree/notebooks/{name}?reset", wait_until="domcontentloaded")
        page.wait_for_function(
            "() => window.jupyterapp && window.jupyterapp.shell.currentWidget && "
            "window.jupyterapp.shell.currentWidget.sessionContext && "
            "window.jupyterapp.shell.currentWidget.sessionContext.session && "
            "window.jupyterapp.shell.currentWidget.sessionContext.session.kernel && "
            "window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status === 'idle'",
            timeout=120_000,
        )

    def state(self) -> dict:
        return self.page.evaluate(_CELLS_JS)

    def run_all(self, timeout: float = 300) -> list[dict]:
        """Clear the stored outputs, run every cell, wait until all ran; return the code cells."""
        self.page.evaluate("() => window.jupyterapp.commands.execute('editmenu:clear-all')")
        self.page.evaluate(
            "() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        deadline = time.monotonic() + timeout
        idle_polls = 0
        while time.monotonic() < deadline:
            s = self.state()
            code = [c for c in s["cells"] if c["source"].strip()]
            done = all(c["count"] is not None for c in code)
            errored = any(o.get("output_type") == "error" for c in code for o in c["outputs"])
            idle_polls = idle_polls + 1 if (s["status"] == "idle" and (done or errored)) else 0
            if idle_polls >= 3:  # idle three polls in a row: nothing is queued any more
                return s["cells"]
            time.sleep(1.0)
        raise AssertionError(f"{self.name}: cells still running after {timeout:.0f} s")

    def errors(self, cells: list[dict]) -> list[str]:
        return [f"cell {i}: {output_text(o)}" for i, c in enumerate(cells)
                for o in c["outputs"] if o.get("output_type") == "error"]

    def rendered_images(self) -> int:
        """How many images (matplotlib figures) the page shows for this notebook."""
        return self.page.locator(
            ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-RenderedImage img").count()


_KERNEL_PRINT_JS = """
async (code) => {
  const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  const future = kernel.requestExecute({code: code, store_history: false});
  let out = '';
  future.onIOPub = (msg) => {
    if (msg.header.msg_type === 'stream') out += msg.content.text;
    if (msg.header.msg_type === 'error') out += 'ERROR ' + msg.content.ename + ': ' + msg.content.evalue;
  };
  await future.done;
  return out;
}
"""


def kernel_print(page, code: str) -> str:
    """Run ``code`` in the notebook's kernel (not in a cell) and return what it printed."""
    return page.evaluate(_KERNEL_PRINT_JS, code)
