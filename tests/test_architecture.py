"""docs/ARCHITECTURE.md is the project's map: every bertlib module is in it, and imports go down."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAP = ROOT / "docs" / "ARCHITECTURE.md"


def _levels() -> dict[str, int]:
    rows = re.findall(r"^\| `([a-z_0-9]+)` \| (\d) \|", MAP.read_text(encoding="utf-8"), re.M)
    return {name: int(level) for name, level in rows}


def _modules() -> dict[str, Path]:
    """Top-level bertlib module (or package) name -> its files."""
    found = {}
    for path in sorted((ROOT / "bertlib").rglob("*.py")):
        rel = path.relative_to(ROOT / "bertlib")
        if rel.parts == ("__init__.py",):
            continue
        found.setdefault(rel.parts[0].removesuffix(".py"), []).append(path)
    return found


def _bertlib_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[0] == "bertlib":
                if len(parts) > 1:
                    names.add(parts[1])
                else:  # from bertlib import attention, toy
                    names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "bertlib" and len(parts) > 1:
                    names.add(parts[1])
    return names


def test_every_bertlib_module_is_on_the_map():
    missing = sorted(set(_modules()) - set(_levels()))
    assert not missing, f"add these bertlib modules to docs/ARCHITECTURE.md's table: {missing}"


def test_the_map_names_no_module_that_does_not_exist():
    extra = sorted(set(_levels()) - set(_modules()))
    assert not extra, f"docs/ARCHITECTURE.md lists modules that do not exist: {extra}"


def test_imports_only_go_to_a_lower_level():
    levels = _levels()
    wrong = []
    for name, files in _modules().items():
        for path in files:
            for target in _bertlib_imports(path) - {name, "__version__"}:
                if target in levels and levels[target] >= levels.get(name, 99):
                    wrong.append(f"{path.relative_to(ROOT)} (level {levels.get(name)}) imports "
                                 f"{target} (level {levels[target]})")
    assert not wrong, "imports must go to a lower level:\n" + "\n".join(wrong)


def test_the_import_scanner_sees_both_import_forms(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("from bertlib.models import load_bert\nfrom bertlib import toy\n"
                      "import bertlib.viz\n")
    assert _bertlib_imports(source) == {"models", "toy", "viz"}
