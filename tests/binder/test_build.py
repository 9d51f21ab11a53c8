"""What Binder will build: repo2docker's plan for this repository, and every pin of
binder/requirements.txt resolved from PyPI for the image's Python on Linux x86-64.

Run by `make test-binder` (in .ci/run), not by `make test`: it needs jupyter-repo2docker
(tests/binder/requirements.txt) and PyPI. `repo2docker --no-build --debug` only writes the
Dockerfile it would build, so no Docker engine is needed. pip resolves with
`install --dry-run --only-binary=:all:`, so nothing is installed and a pin with no wheel for the
image's Python fails here instead of on mybinder.org.

PyTorch's CPU index (download.pytorch.org) is not reachable from every machine that runs this
check, so the `torch==X+cpu` line is resolved as `torch==X` from PyPI: the same release, whose
wheels exist for the same Pythons; PyPI's Linux build also pulls CUDA packages that the image's
CPU build does not (they are counted apart). When PyPI itself cannot be reached the check fails
and says so: a skip would hide the very break it exists for.
"""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from binder_files import (  # noqa: E402
    BINDER,
    CUDA_ONLY,
    ROOT,
    resolve,
    runtime_python,
)

# glibc of repo2docker's base image (buildpack-deps:<Ubuntu release>), for the manylinux tags.
GLIBC_MINOR = {"22.04": 35, "24.04": 39}


def repo2docker_plan(repo: Path) -> tuple[str, str]:
    """(Python "x.y" repo2docker picks, the Dockerfile it would build) for the folder `repo`."""
    exe = Path(sys.executable).parent / "repo2docker"
    assert exe.exists(), (
        f"{exe} is missing: `make test-binder` installs it from tests/binder/requirements.txt"
    )
    run = subprocess.run([exe, "--no-build", "--debug", str(repo)],
                         capture_output=True, text=True, timeout=120)
    log = run.stdout + run.stderr
    assert run.returncode == 0, f"repo2docker --no-build failed on {repo}:\n{log[-3000:]}"
    m = re.search(r"Building conda environment for python=(\d+\.\d+)", log)
    assert m, f"repo2docker did not say which Python it picks:\n{log[:3000]}"
    return m.group(1), log


def manylinux_platforms(dockerfile: str) -> list[str]:
    """pip --platform tags a wheel may carry to run on the image's base (newest glibc first)."""
    m = re.search(r"^FROM \S*buildpack-deps:(\S+)", dockerfile, re.M)
    assert m, "repo2docker's Dockerfile no longer starts FROM buildpack-deps:<release>"
    release = m.group(1)
    assert release in GLIBC_MINOR, (
        f"repo2docker's base image is buildpack-deps:{release}, new to this check: "
        f"add its glibc version to GLIBC_MINOR in {Path(__file__).name}"
    )
    tags = [f"manylinux_2_{minor}_x86_64" for minor in range(GLIBC_MINOR[release], 4, -1)]
    return tags + ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]


def pypi_requirements(binder: Path) -> list[str]:
    """binder/requirements.txt's pins, the CPU torch line as the same release on PyPI."""
    lines = []
    for line in (binder / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line and not line.startswith("-"):
            lines.append(re.sub(r"^(torch==[^+\s]+)\+cpu$", r"\1", line))
    return lines


def copy_repo(tmp_path: Path) -> Path:
    """A copy of what repo2docker reads (binder/ only, since it exists) to break on purpose."""
    repo = tmp_path / "repo"
    shutil.copytree(BINDER, repo / "binder")
    return repo


def test_repo2docker_picks_our_python_and_pip_installs_our_requirements():
    python, dockerfile = repo2docker_plan(ROOT)
    assert python == runtime_python(), (
        f"repo2docker picks Python {python}, binder/runtime.txt says {runtime_python()}"
    )
    assert 'pip install --no-cache-dir -r "binder/requirements.txt"' in dockerfile
    assert "RUN ./binder/postBuild" in dockerfile


def test_every_pin_resolves_for_the_image(tmp_path):
    python, dockerfile = repo2docker_plan(ROOT)
    packages = resolve(pypi_requirements(BINDER), python, manylinux_platforms(dockerfile), tmp_path)
    names = sorted(p["metadata"]["name"].lower() for p in packages)
    cuda = [n for n in names if CUDA_ONLY.fullmatch(n)]
    print(f"Python {python}: {len(names)} packages resolved from PyPI, of which {len(cuda)} "
          f"come only with PyPI's CUDA torch: {len(names) - len(cuda)} in the image")
    wheels = {p["metadata"]["name"].lower(): p["download_info"]["url"] for p in packages}
    assert f"cp{python.replace('.', '')}" in wheels["torch"].rsplit("/", 1)[1]


def test_environment_yml_makes_repo2docker_ignore_requirements(tmp_path):
    # The premise of test_binder.py's check: environment.yml shadows requirements.txt.
    repo = copy_repo(tmp_path)
    (repo / "binder" / "environment.yml").write_text("dependencies:\n  - python=3.11\n")
    _, dockerfile = repo2docker_plan(repo)
    assert "binder/requirements.txt" not in dockerfile


def test_without_runtime_repo2docker_picks_another_python(tmp_path):
    # Why binder/runtime.txt must exist: repo2docker's default is not the series' Python.
    repo = copy_repo(tmp_path)
    (repo / "binder" / "runtime.txt").unlink()
    python, _ = repo2docker_plan(repo)
    assert python != runtime_python(), f"repo2docker's default is now {python}: drop this test"


def test_runtime_naming_a_python_the_pins_do_not_support_names_the_pins(tmp_path):
    repo = copy_repo(tmp_path)
    (repo / "binder" / "runtime.txt").write_text("python-3.10\n")
    python, dockerfile = repo2docker_plan(repo)
    assert python == "3.10"
    with pytest.raises(AssertionError) as failure:
        resolve(pypi_requirements(repo / "binder"), python, manylinux_platforms(dockerfile),
                tmp_path)
    message = str(failure.value)
    print(message)
    assert "binder/requirements.txt does not install on Python 3.10" in message
    # Every pin with no build for Python 3.10 is named, each on its own line: the four issue 17
    # found, and ipython and pillow pinned since; every name is a real pin of the file.
    named = set(re.findall(r"^  (\S+==\S+): ", message, re.M))
    assert named == {"numpy==2.4.6", "transformers==5.24.0", "matplotlib==3.11.2",
                     "ipykernel==7.4.0", "ipython==9.18.1", "pillow==13.0.0"}, message
    assert named <= set(pypi_requirements(repo / "binder")), message


def test_unreachable_index_fails_and_says_so(tmp_path):
    with pytest.raises(pytest.fail.Exception, match="cannot reach the package index"):
        resolve(["six==1.17.0"], "3.11", ["manylinux1_x86_64"], tmp_path,
                index_url="https://pypi.invalid/simple")
