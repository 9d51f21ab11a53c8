"""The README's links point at files that exist, and it lists every notebook."""

import re
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
LINKS = re.findall(r"\]\(([^)\s]+)\)", README)


def test_relative_links_resolve_to_files():
    relative = [u for u in LINKS if not re.match(r"[a-z]+:", u) and not u.startswith("#")]
    assert relative, "the README links no repository files"
    missing = [u for u in relative if not (ROOT / unquote(u.split("#")[0])).exists()]
    assert not missing, f"README links to missing files: {missing}"


def test_binder_links_open_existing_notebooks():
    targets = re.findall(r"mybinder\.org/v2/gh/[^)\s]+?urlpath=lab/tree/([^)\s&]+)", README)
    assert targets, "the README has no Binder launch links"
    missing = [t for t in targets if not (ROOT / unquote(t)).exists()]
    assert not missing, f"Binder links to missing paths: {missing}"
    slugs = set(re.findall(r"mybinder\.org/v2/gh/([^/]+/[^/]+)/", README))
    assert len(slugs) == 1, f"Binder links disagree on the repository: {slugs}"


def test_every_notebook_is_listed_with_a_launch_link():
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        assert f"(notebooks/{nb.name})" in README, f"{nb.name} is not in the README's table"
        assert f"urlpath=lab/tree/notebooks/{nb.name})" in README, f"{nb.name}: no Binder link"


def test_readme_test_command_is_what_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text()
    for command in re.findall(r"^make (\S+)", ci, re.M):
        assert f"make {command}" in README, f".ci/run runs `make {command}`, the README doesn't say"
