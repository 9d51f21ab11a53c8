"""Binder's configuration is complete and agrees with the rest of the repository.

Fast checks of the files only. What repo2docker will actually build (the Python it picks, every
pin resolved for that Python on Linux x86-64) is checked by tests/binder/ (`make test-binder`).
"""

import os
import re
import shutil
import tomllib
from pathlib import Path

import pytest
from binder_files import BINDER, PYTHONS, ROOT, runtime_python
from packaging.specifiers import SpecifierSet

# Files that make repo2docker build with conda (or another tool) instead of pip installing
# binder/requirements.txt; any of them would shadow our pins.
SHADOWING = ["environment.yml", "environment.yaml", "Pipfile", "Pipfile.lock", "setup.py",
             "install.R", "project.toml", "pixi.toml", "Project.toml", "default.nix"]


def pins(path: Path) -> dict[str, str]:
    """{package: version} of the `name==version` lines, local labels such as +cpu dropped."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s;+]+)(\+\S+)?", line)
        if m:
            out[m.group(1).lower()] = m.group(2)
        elif line and not line.startswith("-"):
            raise AssertionError(f"{path}: line {line!r} is not an exact pin")
    return out


def binder_problems(binder: Path, requirements: Path) -> list[str]:
    """What is wrong with a binder/ folder, each message naming the file and the pin."""
    problems = []
    for name in SHADOWING:
        if (binder / name).exists():
            problems.append(
                f"binder/{name} exists: repo2docker would build from it and ignore "
                "binder/requirements.txt; delete it (pins live in binder/requirements.txt)"
            )
    try:
        runtime_python(binder)
    except AssertionError as e:
        problems.append(str(e))
    main, ours = pins(requirements), pins(binder / "requirements.txt")
    for name in sorted(main.keys() | ours.keys()):
        if name not in ours:
            problems.append(f"binder/requirements.txt lacks {name}=={main[name]} "
                            f"(pinned in {requirements.name})")
        elif name not in main:
            problems.append(f"binder/requirements.txt pins {name}=={ours[name]}, "
                            f"which {requirements.name} does not")
        elif main[name] != ours[name]:
            problems.append(f"binder/requirements.txt pins {name}=={ours[name]}, "
                            f"{requirements.name} pins {name}=={main[name]}")
    return problems


def ci_python() -> str:
    workflow = (ROOT / ".github" / "workflows" / "ci.yml").read_text()
    versions = set(re.findall(r"python-version:\s*[\"']?([\d.]+)", workflow))
    assert len(versions) == 1, f".github/workflows/ci.yml: expected one python-version, got {versions}"
    return versions.pop()


def readme_python() -> str:
    m = re.search(r"saved outputs were\s+computed with Python (\d+\.\d+)\.\d+", README())
    assert m, "README.md no longer says `The notebooks' saved outputs were computed with Python X.Y.Z`"
    return m.group(1)


def README() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def test_one_python_executes_everywhere():
    python = runtime_python()
    where = {"binder/runtime.txt": python, ".github/workflows/ci.yml": ci_python(),
             "README.md (saved outputs were computed with Python ...)": readme_python()}
    assert len(set(where.values())) == 1, f"the Python version drifted: {where}"
    assert python == PYTHONS[0], f"the executed Python {python} is not the lowest supported"


def test_readme_pyproject_and_checks_agree_on_the_supported_pythons():
    said = re.search(r"You need Python ((?:\d+\.\d+, )*\d+\.\d+ or \d+\.\d+)", README())
    assert said, "README.md no longer says `You need Python 3.11, 3.12, ... or 3.14`"
    assert tuple(re.findall(r"\d+\.\d+", said.group(1))) == PYTHONS, (
        f"README says Python {said.group(1)}; the checks resolve {PYTHONS} (binder_files.PYTHONS)")
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    spec = SpecifierSet(requires)
    refused = [p for p in PYTHONS if f"{p}.0" not in spec]
    assert not refused, f"pyproject's requires-python {requires!r} refuses Python {refused}"
    # Below 3.11 the pins have no wheels (tests/binder/test_build.py names them for 3.10).
    assert "3.10.0" not in spec, f"requires-python {requires!r} lets Python 3.10 install bertlib"


def test_binder_uses_cpu_torch():
    text = (BINDER / "requirements.txt").read_text()
    assert re.search(r"^torch==[\d.]+\+cpu$", text, re.M)
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in text


def test_post_build_is_executable_strict_and_installs_bertlib():
    post = BINDER / "postBuild"
    assert os.access(post, os.X_OK), "binder/postBuild must be executable"
    lines = [line.strip() for line in post.read_text().splitlines()]
    assert lines[0].startswith("#!"), "postBuild needs a shebang"
    assert "set -euo pipefail" in lines, "postBuild must stop at the first failing command"
    assert any(re.match(r"pip install .*-e \.$", line) for line in lines)


def test_post_build_optional_download_cannot_fail_or_hang_the_build():
    text = (BINDER / "postBuild").read_text()
    m = re.search(r"^if ! timeout (\d+) python .*bert-base-uncased", text, re.M | re.S)
    assert m, "the optional bert-base download must run under `if ! timeout N python ...`"
    assert int(m.group(1)) <= 600, "the optional download's timeout should stay under 10 minutes"


@pytest.fixture
def binder_copy(tmp_path):
    """A copy of binder/ and requirements.txt to break on purpose."""
    shutil.copytree(BINDER, tmp_path / "binder")
    shutil.copy(ROOT / "requirements.txt", tmp_path / "requirements.txt")
    return tmp_path / "binder", tmp_path / "requirements.txt"


def test_environment_yml_is_named_as_shadowing_requirements(binder_copy):
    binder, requirements = binder_copy
    (binder / "environment.yml").write_text("dependencies:\n  - python=3.11\n")
    (problem,) = binder_problems(binder, requirements)
    assert "binder/environment.yml" in problem and "ignore binder/requirements.txt" in problem


def test_missing_or_vague_runtime_is_named(binder_copy):
    binder, requirements = binder_copy
    (binder / "runtime.txt").write_text("python-3\n")
    (problem,) = binder_problems(binder, requirements)
    assert "binder/runtime.txt says 'python-3'" in problem
    (binder / "runtime.txt").unlink()
    (problem,) = binder_problems(binder, requirements)
    assert "binder/runtime.txt is missing" in problem


def test_drifting_pins_are_named(binder_copy):
    binder, requirements = binder_copy
    text = (binder / "requirements.txt").read_text()
    text = text.replace("numpy==2.4.6", "numpy==2.4.5").replace("tqdm==4.70.1\n", "")
    (binder / "requirements.txt").write_text(text + "six==1.17.0\n")
    problems = binder_problems(binder, requirements)
    assert problems == [
        "binder/requirements.txt pins numpy==2.4.5, requirements.txt pins numpy==2.4.6",
        "binder/requirements.txt pins six==1.17.0, which requirements.txt does not",
        "binder/requirements.txt lacks tqdm==4.70.1 (pinned in requirements.txt)",
    ]

