"""Fixtures for the real-browser test: a JupyterLab of our own and Debian's Chromium.

The notebooks are copied to a temporary folder before JupyterLab serves them, so running them in
the browser (and JupyterLab's autosave) never touches the committed, executed notebooks.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
INSTALL_HINT = "apt-get update && apt-get install -y chromium"
# The notebooks under test: the committed ones, or BERTLIB_NOTEBOOKS (e.g. re-executed copies).
NOTEBOOKS = Path(os.environ.get("BERTLIB_NOTEBOOKS", ROOT / "notebooks"))
SCREENSHOTS = Path(os.environ.get("BERTLIB_SCREENSHOTS", ROOT / "tests" / "browser" / "screenshots"))
# Flags that keep Chromium from reaching out to the network (there is none here) at start-up.
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def free_port() -> int:
    """A TCP port that nothing listens on right now (the OS picks it, so no clash)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def chromium_path() -> str:
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        pytest.fail(f"Chromium not found at {CHROMIUM}. Install it with: {INSTALL_HINT} "
                    "(or set CHROMIUM to its path)", pytrace=False)
    return CHROMIUM


@contextlib.contextmanager
def jupyterlab(root: Path, env: dict | None = None):
    """Start JupyterLab with no token on a free port over the folder ``root``; yield its URL."""
    log_path = root / "jupyterlab.log"
    for _attempt in range(3):  # a port taken between choosing and binding: choose again
        port = free_port()
        log = open(log_path, "w")  # noqa: SIM115 - closed below
        proc = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", "--no-browser", f"--ServerApp.port={port}",
             "--ServerApp.port_retries=0", "--ServerApp.ip=127.0.0.1",
             "--IdentityProvider.token=", "--ServerApp.password=",
             f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
             "--ServerApp.disable_check_xsrf=True", "--allow-root"],
            stdout=log, stderr=subprocess.STDOUT, cwd=root, env=env,
        )
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"{url}/api/status", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        else:
            proc.kill()
            log.close()
            tail = log_path.read_text()[-3000:]
            if "already in use" in tail:
                continue
            pytest.fail(f"JupyterLab did not start (exit code {proc.poll()}); log tail:\n{tail}",
                        pytrace=False)
        break
    else:
        pytest.fail(f"JupyterLab found no free port in 3 tries; log tail:\n"
                    f"{log_path.read_text()[-3000:]}", pytrace=False)
    try:
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="session")
def lab_url(tmp_path_factory):
    """JupyterLab over a copy of the notebooks (running them there never touches the originals)."""
    root = tmp_path_factory.mktemp("lab")
    shutil.copytree(NOTEBOOKS, root / "notebooks")
    with jupyterlab(root) as url:
        yield url


@pytest.fixture(scope="session", params=["untrusted", "trusted"])
def unrun_lab(request, tmp_path_factory):
    """A fresh JupyterLab over fresh copies of the notebooks, which nothing will run: as a fresh
    clone opens them ("untrusted": JupyterLab's own trust database knows none of them), or after
    ``make lab`` has marked them trusted (a trust database of its own, so the machine's is left
    alone). Yields (url, mode)."""
    root = tmp_path_factory.mktemp(f"unrun-{request.param}")
    shutil.copytree(NOTEBOOKS, root / "notebooks")
    env = {**os.environ, "JUPYTER_DATA_DIR": str(root / "jupyter-data")}
    if request.param == "trusted":
        subprocess.run([sys.executable, "-m", "jupyter", "trust",
                        *map(str, sorted((root / "notebooks").glob("*.ipynb")))],
                       env=env, check=True, capture_output=True)
    with jupyterlab(root, env) as url:
        yield url, request.param


@pytest.fixture(scope="session")
def browser(chromium_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium_path, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="session")
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots go to {SCREENSHOTS}")
    return SCREENSHOTS
