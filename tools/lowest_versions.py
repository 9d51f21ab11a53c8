"""Install the lowest versions bertlib's ranges allow and run the series on them.

    python tools/lowest_versions.py [--venv DIR] [--keep]

Every runtime dependency in pyproject.toml is pinned to the lower bound of its range
(``numpy>=2.0,<3`` -> ``numpy==2.0``); their own dependencies resolve as pip chooses. Into a fresh
virtual environment go those pins, the test tools pinned in requirements.txt, nothing else. Then
the unit tests run, and every notebook (lessons and solutions) runs with ``--nbval-lax``: each
cell must run without an error; outputs are not compared, since they were saved with the pins of
requirements.txt. The tests run on 2 workers with ``--dist loadscope``, as ``make test`` does.
Exit status: pytest's (a resolve or install failure exits 2 and names it). ``make test-lowest``
runs it, in .ci/run; it prints how long the install and the tests took (wall clock, for the log).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ("pytest", "pytest-xdist", "nbval", "pyyaml")  # test tools, pinned in requirements.txt


def lowest_pins(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """`name==lower` for every runtime dependency of pyproject.toml (each needs a `>=` bound)."""
    pins = []
    for requirement in tomllib.loads(pyproject.read_text())["project"]["dependencies"]:
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*>=\s*([\w.]+)\s*(,.*)?", requirement)
        if not m:
            raise SystemExit(f"pyproject.toml: {requirement!r} has no `>=lower` bound to test")
        pins.append(f"{m.group(1)}=={m.group(2)}")
    return pins


def tool_pins(requirements: Path = ROOT / "requirements.txt") -> list[str]:
    lines = [line.split("#")[0].strip() for line in requirements.read_text().splitlines()]
    return [line for line in lines if line.split("==")[0].lower() in TOOLS]


def run(command: list[str], **kwargs) -> int:
    print("+", " ".join(str(c) for c in command), flush=True)
    return subprocess.run(command, **kwargs).returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, help="where to build it (default: a temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep the environment afterwards")
    args = parser.parse_args()
    venv = args.venv or Path(tempfile.mkdtemp(prefix="bertlib-lowest-")) / "venv"
    python = venv / "bin" / "python"
    start = time.monotonic()
    try:
        if run([sys.executable, "-m", "venv", "--clear", str(venv)]):
            return 2
        pins = lowest_pins()
        if run([python, "-m", "pip", "install", "--quiet", "--only-binary=:all:",
                *pins, *tool_pins()]):
            print(f"the lowest versions do not install together: {pins}", file=sys.stderr)
            return 2
        freeze = subprocess.run([python, "-m", "pip", "freeze"], capture_output=True,
                                text=True).stdout.lower()
        wrong = [p for p in pins if not re.search(
            rf"^{re.escape(p.split('==')[0].lower())}==\d", freeze, re.M)]
        for pin in pins:
            name, low = pin.split("==")
            got = re.search(rf"^{re.escape(name.lower())}==(\S+)", freeze, re.M)
            print(f"  {name:<22} lowest {low:<10} installed {got and got.group(1)}")
        if wrong:
            print(f"not installed: {wrong}", file=sys.stderr)
            return 2
        print(f"installed in {(time.monotonic() - start) / 60:.1f} min", flush=True)
        start = time.monotonic()
        env_python = str(python)
        status = run([env_python, "-m", "pytest", "-n", "2", "--dist", "loadscope",
                      "-p", "no:cacheprovider", "--ignore=tests/browser", "--ignore=tests/binder",
                      "--nbval-lax", "tests", "notebooks"], cwd=ROOT,
                     env={**_env(), "PYTHONPATH": str(ROOT)})
        print(f"tests and notebooks ran in {(time.monotonic() - start) / 60:.1f} min")
        return status
    finally:
        if not args.keep:
            shutil.rmtree(venv, ignore_errors=True)


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONHOME")}


if __name__ == "__main__":
    sys.exit(main())
