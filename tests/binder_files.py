"""The repository's Binder files, read the way repo2docker reads them, and pip against PyPI alone:
shared by the file checks (tests/test_binder.py), the build check (tests/binder/test_build.py) and
the per-Python check (tests/binder/test_pythons.py)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"
PYPI = "https://pypi.org/simple"
# Packages that only PyPI's CUDA build of torch pulls in (the image's +cpu build does not).
CUDA_ONLY = re.compile(r"nvidia-.*|cuda-.*|triton")


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


def pip(args: list[str], index_url: str) -> subprocess.CompletedProcess:
    """pip against `index_url` alone: this machine's pip configuration (find-links, extra
    indexes, constraints) is set aside, so no local file can stand in for a missing wheel."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PIP_") or k in ("PIP_CERT", "PIP_CLIENT_CERT", "PIP_PROXY")}
    env["PIP_CONFIG_FILE"] = os.devnull
    command = [sys.executable, "-m", "pip", *args, "--index-url", index_url,
               "--disable-pip-version-check", "--retries", "2", "--timeout", "30"]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)


def require_index(index_url: str) -> None:
    probe = pip(["index", "versions", "pip"], index_url)
    if probe.returncode != 0:
        reason = [line for line in probe.stderr.splitlines() if line.strip()][-3:]
        pytest.fail(
            f"cannot reach the package index {index_url}, so the Binder check cannot resolve "
            f"binder/requirements.txt; it fails rather than skip. pip said:\n" + "\n".join(reason),
            pytrace=False,
        )


def resolve(requirements: list[str], python: str, platforms: list[str], tmp: Path,
            index_url: str = PYPI, source: str = "binder/requirements.txt",
            why: str = "the Python repo2docker picks from binder/runtime.txt") -> list[dict]:
    """Resolve the pins for `python` on `platforms` without installing; pip's report's
    `install` list. On failure, every pin with no wheel is named with pip's reason.
    (pip evaluates environment markers for the Python running it: CI runs the runtime's.)"""
    require_index(index_url)
    target = ["--dry-run", "--ignore-installed", "--only-binary=:all:", "--python-version",
              python, *[a for p in platforms for a in ("--platform", p)], "--quiet"]
    req = tmp / "requirements-pypi.txt"
    req.write_text("\n".join(requirements) + "\n")
    report = tmp / "report.json"
    run = pip(["install", *target, "--report", str(report), "-r", str(req)], index_url)
    if run.returncode == 0:
        return json.loads(report.read_text())["install"]
    failures = []
    for pin in requirements:  # pin by pin, to name every one that fails, not only pip's first
        one = pip(["install", *target, "--no-deps", pin], index_url)
        if one.returncode != 0:
            version = pin.split("==")[1]
            why = re.search(rf"\b{re.escape(version)} (Requires-Python [^;\n]+)", one.stderr)
            reason = why.group(1) if why else f"no wheel for Python {python} on Linux x86-64"
            failures.append(f"  {pin}: {reason}")
    detail = "\n".join(failures) or run.stderr.strip()[-2000:]
    raise AssertionError(
        f"{source} does not install on Python {python}, {why}, for Linux x86-64:\n{detail}"
    )
