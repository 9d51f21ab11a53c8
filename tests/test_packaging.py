"""pyproject.toml declares what bertlib needs at run time, in ranges that hold the exact pins."""

import ast
import functools
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from bertlib.pictures import bertviz_offline

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
#: Imported only inside ``try: ... except ImportError`` with a message saying how to add it.
OPTIONAL = {"nltk"}
#: Needed without an import statement: the offline bertviz views read files out of these
#: packages (bertviz_offline._LIBRARIES), tokenizers runs transformers' fast tokenizers, and
#: ``python tools/execute.py`` starts an ipykernel.
NOT_IMPORTED = {pkg for pkg, _ in bertviz_offline._LIBRARIES.values()} | {"tokenizers", "ipykernel"}


def declared(requirements) -> dict[str, Requirement]:
    reqs = (Requirement(r) for r in requirements)
    return {re.sub(r"[-_.]+", "-", r.name).lower(): r for r in reqs}


def third_party_imports() -> set[str]:
    """Top-level names of every module that bertlib's source imports, stdlib and bertlib aside."""
    names = set()
    for path in (ROOT / "bertlib").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n != "bertlib"}


@functools.cache
def installed_modules() -> dict[str, list[str]]:
    """Top-level module -> the distributions that install it here, read once (it reads every
    installed package's file list, about a second each time)."""
    return importlib.metadata.packages_distributions()


def distribution(module: str) -> str:
    """The distribution that installs ``module`` here (e.g. PIL -> pillow)."""
    dists = installed_modules().get(module)
    if not dists:
        raise AssertionError(f"bertlib imports {module!r}, which is not installed here")
    return re.sub(r"[-_.]+", "-", dists[0]).lower()


def pins() -> dict[str, str]:
    """{package: version} of requirements.txt's name==version lines (local labels dropped)."""
    out = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s;+#]+)\S*", line.split("#")[0].strip())
        if m:
            out[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(2)
    return out


@pytest.mark.slow  # packages_distributions() reads every installed package's file list
def test_every_third_party_module_bertlib_imports_is_declared():
    runtime, extras = declared(PROJECT["dependencies"]), PROJECT["optional-dependencies"]
    optional = declared(r for group in extras.values() for r in group)
    needed = {m: distribution(m) for m in third_party_imports() - OPTIONAL}
    missing = {m: d for m, d in needed.items() if d not in runtime}
    assert not missing, f"imported by bertlib but not in pyproject's dependencies: {missing}"
    assert {declared([m]).popitem()[0] for m in OPTIONAL} <= set(optional)
    assert not {declared([p]).popitem()[0] for p in NOT_IMPORTED} - set(runtime)


def test_every_range_holds_the_pin_of_requirements_txt():
    pinned = pins()
    assert {"torch", "transformers", "numpy"} <= set(pinned), "requirements.txt lost its pins"
    for name, req in declared(PROJECT["dependencies"]).items():
        version = pinned.get(name) or importlib.metadata.version(name)  # unpinned: what runs here
        assert req.specifier.contains(version, prereleases=True), (
            f"pyproject's {req} does not allow {name} {version} (requirements.txt / installed)")
        assert req.specifier, f"{name}: give a range (>=tested,<next major), not a bare name"


def test_declared_pins_of_requirements_txt_are_all_runtime_or_tooling():
    # Whatever requirements.txt pins is either a bertlib dependency or a known tool of the repo.
    tools = {"jupyterlab", "pytest", "pytest-xdist", "nbval", "ruff", "pyyaml"}
    unexplained = set(pins()) - set(declared(PROJECT["dependencies"])) - tools
    assert not unexplained, f"pinned but neither a bertlib dependency nor a tool: {unexplained}"


def test_a_lower_bound_left_at_the_pin_says_why():
    # tools/lowest_versions.py runs the series on every lower bound; one that could not be
    # lowered (it equals requirements.txt's pin) carries a comment saying why, on its line or
    # in the comment lines just above it.
    pinned = pins()
    lines = (ROOT / "pyproject.toml").read_text().splitlines()
    start = lines.index("dependencies = [")
    silent = []
    for i in range(start + 1, lines.index("]", start)):
        m = re.match(r'\s*"([A-Za-z0-9_.\-]+)>=([\w.]+)', lines[i])
        if not m:
            continue
        name = re.sub(r"[-_.]+", "-", m.group(1)).lower()
        at_pin = Version(m.group(2)) == Version(pinned.get(name, "0"))
        said = "#" in lines[i] or lines[i - 1].strip().startswith("#")
        if at_pin and not said:
            silent.append(name)
    assert not silent, f"pyproject: say why these lower bounds equal the pin: {silent}"


def test_lowest_versions_pins_every_lower_bound():
    import sys

    sys.path.insert(0, str(ROOT / "tools"))
    import lowest_versions

    lowest = dict(p.split("==") for p in lowest_versions.lowest_pins())
    for req in declared(PROJECT["dependencies"]).values():
        low = next(s.version for s in req.specifier if s.operator == ">=")
        assert lowest[req.name] == low
        assert req.specifier.contains(low), f"{req}: its lower bound lies outside its range"


def test_every_data_file_is_shipped_by_a_package_data_pattern():
    """A wheel (Colab installs one) holds only the data files that tool.setuptools.package-data
    matches: a new data folder must get its pattern, or a notebook fails outside the checkout."""
    import fnmatch

    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]["bertlib"]
    files = [p.relative_to(ROOT / "bertlib").as_posix()
             for p in (ROOT / "bertlib" / "data").rglob("*") if p.is_file()]
    unshipped = [f for f in files
                 if not any(fnmatch.fnmatchcase(f, pat) and f.count("/") == pat.count("/")
                            for pat in patterns)]
    assert files and not unshipped, f"add a package-data pattern for {unshipped}"
