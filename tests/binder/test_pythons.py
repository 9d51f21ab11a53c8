"""Every pin of requirements.txt installs from PyPI on each Python the series supports (3.11 to
3.14, binder_files.PYTHONS), as a binary wheel or a pure-Python one (`make test-pythons`, in
.ci/run: a few minutes).

- Linux x86-64: the whole pinned set is resolved together (`pip install --dry-run`), as a learner's
  `pip install -r requirements.txt` would, for each Python.
- macOS arm64 and Windows x86-64: each pin alone (`--no-deps`): pip evaluates dependency markers
  for the machine it runs on, so a full resolve "for Windows" from Linux would pull Linux-only
  packages. Every pin must have a wheel for that platform and Python; their own dependencies are
  not resolved there.

pip reads PyPI's project pages through metadata_index.MetadataIndex, which serves each wheel's
METADATA apart (PEP 658): pip resolves from those files instead of downloading every wheel it
considers (PyPI's CUDA torch and its nvidia-* packages: about 3 GB per Python, all of it again on
every run, since the files come without cache headers). The four Linux resolves run at once and
share the pages. Only the saved outputs' Python (binder/runtime.txt, 3.11) executes the notebooks
here; the other Pythons are resolved, not executed. Needs PyPI (fails, never skips, without it).
"""

import re
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from binder_files import (  # noqa: E402
    CUDA_ONLY,
    PYPI,
    PYTHONS,
    ROOT,
    pip,
    require_index,
    resolve,
)
from metadata_index import MetadataIndex  # noqa: E402

# pip widens a macOS tag to the older macOS and universal2 tags it accepts, but not a
# manylinux_2_x tag: for Linux every tag a glibc 2.35 system (Ubuntu 22.04) runs is listed.
PLATFORMS = {"macOS arm64": "macosx_14_0_arm64", "Windows x86-64": "win_amd64"}
LINUX = [f"manylinux_2_{minor}_x86_64" for minor in range(35, 4, -1)] + [
    "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]


def requirements() -> list[str]:
    lines = [line.split("#")[0].strip() for line in (ROOT / "requirements.txt").read_text()
             .splitlines()]
    return [line for line in lines if line and not line.startswith("-")]


@pytest.fixture(scope="module")
def index():
    """PyPI's pages, with each wheel's metadata served apart (metadata_index), for this module."""
    require_index(PYPI)
    with MetadataIndex() as served:
        yield served


@pytest.fixture(scope="module")
def linux_resolves(index, tmp_path_factory):
    """{python: pip's report's `install` list, or the AssertionError naming what failed}, the four
    resolves run at once (each waits mostly on the network)."""
    def one(python):
        try:
            return resolve(requirements(), python, LINUX, tmp_path_factory.mktemp(python),
                           index_url=index.url, source="requirements.txt",
                           why="one of the Pythons the README supports")
        except AssertionError as failure:
            return failure
    with ThreadPoolExecutor(len(PYTHONS)) as pool:
        return dict(zip(PYTHONS, pool.map(one, PYTHONS), strict=True))


def wheel_gaps(pins: list[str], python: str, platform: str, label: str,
               index_url: str = PYPI) -> list[str]:
    """The pins with no wheel for `python` on `platform`, each named with the platform and Python
    (one pip run for all; pin by pin only when that run fails)."""
    target = ["install", "--dry-run", "--ignore-installed", "--no-deps", "--only-binary=:all:",
              "--python-version", python, "--platform", platform, "--quiet"]
    if pip([*target, *pins], index_url).returncode == 0:
        return []
    gaps = []
    for pin in pins:
        one = pip([*target, pin], index_url)
        if one.returncode != 0:
            why = re.search(r"(Requires-Python [^;\n]+)", one.stderr)
            gaps.append(f"{pin}: no wheel for Python {python} on {label}"
                        + (f" ({why.group(1)})" if why else ""))
    return gaps


@pytest.mark.parametrize("python", PYTHONS)
def test_whole_pinned_set_resolves_on_linux(python, linux_resolves):
    packages = linux_resolves[python]
    if isinstance(packages, AssertionError):
        raise packages
    names = [p["metadata"]["name"].lower() for p in packages]
    cuda = [n for n in names if CUDA_ONLY.fullmatch(n)]
    print(f"Python {python}, Linux x86-64: {len(names)} packages resolved from PyPI "
          f"({len(cuda)} of them only because PyPI's Linux torch is the CUDA build)")


def test_every_pin_has_a_wheel_for_macos_and_windows(index):
    pins = requirements()
    jobs = [(python, tag, label) for python in PYTHONS for label, tag in PLATFORMS.items()]
    with ThreadPoolExecutor(4) as pool:
        gaps = [g for found in pool.map(lambda j: wheel_gaps(pins, *j, index.url), jobs)
                for g in found]
    assert not gaps, "\n".join(gaps)
    print(f"{len(pins)} pins have wheels for {', '.join(PLATFORMS)} on Python "
          f"{', '.join(PYTHONS)}")


def test_a_pin_without_a_wheel_is_named_with_platform_and_python(index):
    # numpy 1.26 was never built for Python 3.13: the check must say so, naming all three.
    gaps = wheel_gaps(["six==1.17.0", "numpy==1.26.4"], "3.13", "win_amd64", "Windows x86-64",
                      index.url)
    assert gaps == ["numpy==1.26.4: no wheel for Python 3.13 on Windows x86-64"], gaps
