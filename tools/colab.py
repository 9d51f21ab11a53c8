"""Open in Colab: one link and one first code cell per notebook, built from the repository's
address in one place (REPOSITORY below, which the README's Binder links use too).

    python tools/colab.py            # insert or update the cell, the link and the README's links
    python tools/colab.py --check    # change nothing; exit 1 naming every file that is out of date

Idempotent: a second run changes nothing. The first code cell, in Google Colab, clones the
repository into /content/bert-attention, pip installs bertlib from it (with its dependencies and
the bundled model) and moves into its notebooks/ folder, so what a notebook reads beside it is
there, as in JupyterLab. Anywhere else it does nothing: it binds no name, prints nothing,
imports nothing new. BERTLIB_COLAB=1 forces its Colab branch (tests/colab/ does so to run it
outside Colab) and BERTLIB_SOURCE names a checkout to use instead of cloning (there: a copy).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPOSITORY = "bert-attention/bert-attention"  # GitHub owner/name: Binder, Colab and pip use it
BRANCH = "main"  # the branch Colab opens the notebooks from
BINDER = f"https://mybinder.org/v2/gh/{REPOSITORY}/HEAD?urlpath=lab/tree/"
COLAB = f"https://colab.research.google.com/github/{REPOSITORY}/blob/{BRANCH}/"
BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
MARKER = "# Google Colab only:"  # the first line of the cell: how a rerun finds it

CELL = """MARKER fetch this series and install bertlib, its dependencies and
# the bundled BERT (one to three minutes, once per session). Elsewhere: prints and changes nothing.
if ("google.colab" in __import__("sys").modules
        or __import__("os").environ.get("BERTLIB_COLAB") == "1"):
    import os
    import subprocess
    import sys

    repo = os.environ.get("BERTLIB_SOURCE", "/content/bert-attention")
    steps = [] if os.path.isdir(repo) else [
        ["git", "clone", "--quiet", "--depth", "1", "--branch", "BRANCH", "URL", repo]]
    steps.append([sys.executable, "-m", "pip", "install", "--quiet", repo])
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode:
            print(done.stdout[-3000:], done.stderr[-3000:], sep="\\n")
            raise RuntimeError(f"{step[0]} failed (its last lines are above): "
                               "see 'Google Colab' in the README")
    os.chdir(os.path.join(repo, "notebooks"))  # as in JupyterLab: the series' files around
    # widgets (the notebooks' interactive controls: sliders, menus) need, with ipywidgets 8,
    # Colab's custom widget manager
    if "google.colab" in sys.modules:
        from google.colab import output
        output.enable_custom_widget_manager()
    print("bertlib is installed for this Colab session")""".replace("MARKER", MARKER).replace(
    "BRANCH", BRANCH).replace("URL", f"https://github.com/{REPOSITORY}")


def notebooks(root: Path = ROOT) -> list[Path]:
    """Every lesson and every solutions notebook."""
    return sorted((root / "notebooks").glob("*.ipynb")) + sorted(
        (root / "notebooks" / "solutions").glob("*.ipynb"))


def colab_url(relative: str) -> str:
    """The Colab address of the repository file `relative` (e.g. notebooks/01_x.ipynb)."""
    return COLAB + relative


def binder_url(relative: str) -> str:
    return BINDER + relative


def badge_line(relative: str) -> str:
    return f"[![Open In Colab]({BADGE})]({colab_url(relative)})"


def _source(cell: dict) -> str:
    return "".join(cell["source"])


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def with_colab(nb: dict, relative: str) -> dict:
    """`nb` (nbformat 4 JSON) with the Colab link ending its first markdown cell and the install
    cell as its first code cell, each inserted or updated in place."""
    cells = nb["cells"]
    first_md = next(c for c in cells if c["cell_type"] == "markdown")
    text = re.sub(r"\n*\[!\[Open In Colab\]\([^)]*\)\]\([^)]*\)\s*$", "", _source(first_md))
    first_md["source"] = _lines(text.rstrip("\n") + "\n\n" + badge_line(relative))
    code = [i for i, c in enumerate(cells) if c["cell_type"] == "code"]
    if code and _source(cells[code[0]]).startswith(MARKER):
        if _source(cells[code[0]]) != CELL:
            # it prints nothing outside Colab: an executed run without output stays valid
            kept = cells[code[0]]["execution_count"] if not cells[code[0]]["outputs"] else None
            cells[code[0]].update(source=_lines(CELL), outputs=[], execution_count=kept)
    else:
        where = code[0] if code else len(cells)
        cell = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                "source": _lines(CELL)}
        if nb.get("nbformat", 4) == 4 and nb.get("nbformat_minor", 0) >= 5:
            cell["id"] = "colab-install"
        cells.insert(where, cell)
    return nb


def dump(nb: dict) -> str:
    """nbformat's own layout (indent 1, non-ASCII kept, final newline), so a rerun is a no-op."""
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def readme_with_links(readme: str, names: list[str]) -> str:
    """The README's notebook table with each row's last column as the Binder and Colab links."""
    for name in names:
        relative = f"notebooks/{name}"
        links = f"[Binder]({binder_url(relative)}) · [Colab]({colab_url(relative)})"
        readme = re.sub(rf"^(\| \d\d \| \[[^\]]*\]\({re.escape(relative)}\) .*\| )[^|\n]*( \|)$",
                        lambda m, links=links: m.group(1) + links + m.group(2), readme,
                        flags=re.M)
    return readme


def planned(root: Path = ROOT) -> dict[Path, str]:
    """{file: its new text} for every file whose text the tool would change."""
    changes = {}
    for path in notebooks(root):
        text = path.read_text(encoding="utf-8")
        new = dump(with_colab(json.loads(text), path.relative_to(root).as_posix()))
        if new != text:
            changes[path] = new
    readme = root / "README.md"
    text = readme.read_text(encoding="utf-8")
    new = readme_with_links(text, [p.name for p in sorted((root / "notebooks").glob("*.ipynb"))])
    if new != text:
        changes[readme] = new
    return changes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; list what differs")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this)")
    args = parser.parse_args(argv)
    changes = planned(args.root)
    for path in changes:
        print(f"{'out of date' if args.check else 'updated'}: {path.relative_to(args.root)}")
        if not args.check:
            path.write_text(changes[path], encoding="utf-8")
    if args.check and changes:
        print("run `python tools/colab.py`, then re-execute the changed notebooks", file=sys.stderr)
    return 1 if args.check and changes else 0


if __name__ == "__main__":
    sys.exit(main())
