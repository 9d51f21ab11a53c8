"""The repository's Binder files, read the way repo2docker reads them: shared by the file checks
(tests/test_binder.py) and the build check (tests/binder/test_build.py)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"


def runtime_python(binder: Path = BINDER) -> str:
    """The Python "x.y" named by binder/runtime.txt (repo2docker's syntax: `python-3.11`)."""
    runtime = binder / "runtime.txt"
    if not runtime.exists():
        raise AssertionError(
            f"{runtime.relative_to(binder.parent)} is missing: without it repo2docker picks its "
            "own default Python, which our pins may not support; write e.g. `python-3.11`"
        )
    text = runtime.read_text().strip()
    m = re.fullmatch(r"python-(\d+\.\d+)", text)
    if not m:
        raise AssertionError(
            f"{runtime.relative_to(binder.parent)} says {text!r}; expected `python-X.Y`, "
            "for example `python-3.11` (a bare major version lets repo2docker choose the minor)"
        )
    return m.group(1)

#: The Pythons the series supports: README, pyproject's requires-python and the checks agree on
#: them. Only runtime_python() (the saved outputs' Python) executes the notebooks here; the others
#: are resolved from PyPI (tests/binder/test_pythons.py).
PYTHONS = ("3.11", "3.12", "3.13", "3.14")
