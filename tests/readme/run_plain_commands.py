"""The README's plain commands for macOS and Linux run exactly as written (`make test-plain`).

The block under "### macOS and Linux" is read out of README.md and run by bash, stopping at the
first failing command (`bash -e`), in a fresh copy of the repository (what a learner's clone
holds: no .venv, no .git). Its last command starts JupyterLab; the test waits for the URL it
prints, so every command before it succeeded, then stops the server. Slow (a fresh environment
with torch and JupyterLab) and needs PyPI, so not part of `make test`.

JupyterLab refuses to run as root unless told to; CI runs as root, so the test allows it through
a Jupyter config file of its own (JUPYTER_CONFIG_DIR), leaving the README's commands untouched.

Named run_*.py, not test_*.py, so `pytest tests` (make test, the README's unit tests) does not
collect it; `make test-plain` names the file, and pytest collects a file it is given by name.
"""

import json
import os
import re
import resource
import shutil
import signal
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIP = {".git", ".venv", "build", "__pycache__", "bertlib.egg-info", "screenshots"}
URL = re.compile(r"http://(?:localhost|127\.0\.0\.1):\d+/lab\S*")


def readme_block(title: str = "macOS and Linux") -> str:
    """The first ```bash block after the README heading `### {title}`."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(rf"^### {re.escape(title)}\n.*?^```(?:bash|sh)\n(.*?)^```", text, re.M | re.S)
    assert m, f"README.md has no ```bash block under '### {title}'"
    return m.group(1)


def test_block_installs_tests_and_starts_jupyterlab(tmp_path):
    clone = tmp_path / "bert-attention"
    shutil.copytree(ROOT, clone, ignore=lambda _d, names: [n for n in names if n in SKIP])
    config = tmp_path / "jupyter-config"
    config.mkdir()
    (config / "jupyter_server_config.json").write_text(
        json.dumps({"ServerApp": {"allow_root": True, "open_browser": False}}))
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "MAKEFLAGS")}
    env.update(JUPYTER_CONFIG_DIR=str(config), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    cpu0, wall0, log = _children_cpu(), time.monotonic(), []
    shell = subprocess.Popen(["bash", "-e", "-c", readme_block()], cwd=clone, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
    url = None
    try:
        for line in shell.stdout:
            log.append(line)
            if URL.search(line):
                url = URL.search(line).group(0)
                break
    finally:
        os.killpg(shell.pid, signal.SIGTERM)
        shell.wait(timeout=60)
    cpu, wall = _children_cpu() - cpu0, time.monotonic() - wall0
    assert url, "the block stopped before JupyterLab printed its URL:\n" + "".join(log[-60:])
    assert any(re.search(r"\d+ passed", line) for line in log), "".join(log[-60:])
    python = clone / ".venv" / "bin" / "python"
    freeze = subprocess.run([python, "-m", "pip", "list", "--format=freeze"],
                            capture_output=True, text=True, check=True).stdout
    assert re.search(r"^torch==[\d.]+\+cpu$", freeze, re.M), "torch is not the CPU-only build"
    cuda = [line for line in freeze.splitlines() if line.startswith(("nvidia-", "triton"))]
    assert not cuda, f"CUDA packages came with torch: {cuda}"
    size = subprocess.run(["du", "-sm", clone / ".venv"], capture_output=True, text=True)
    print(f"README block: JupyterLab at {url.split('?')[0]}; .venv {size.stdout.split()[0]} MB, "
          f"{freeze.count(chr(10))} packages; CPU {cpu / 60:.1f} min, wall {wall / 60:.1f} min")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
