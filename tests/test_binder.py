"""Binder's configuration is complete and agrees with requirements.txt."""

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"


def pins(path: Path) -> dict[str, str]:
    """{package: version} of the `name==version` lines, local labels such as +cpu dropped."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s;+]+)(\+\S+)?", line)
        if m:
            out[m.group(1).lower()] = m.group(2)
        elif line and not line.startswith("-"):
            raise AssertionError(f"{path.name}: line {line!r} is not an exact pin")
    return out


def test_binder_pins_match_requirements():
    main, binder = pins(ROOT / "requirements.txt"), pins(BINDER / "requirements.txt")
    assert main, "requirements.txt has no pins"
    assert binder == main, (
        f"binder/requirements.txt drifted from requirements.txt: "
        f"only in main {sorted(set(main.items()) - set(binder.items()))}, "
        f"only in binder {sorted(set(binder.items()) - set(main.items()))}"
    )


def test_binder_uses_cpu_torch():
    text = (BINDER / "requirements.txt").read_text()
    assert re.search(r"^torch==[\d.]+\+cpu$", text, re.M)
    assert "--extra-index-url" in text


def test_binder_reads_only_files_it_understands():
    # With a binder/ folder, repo2docker reads only that folder; environment.yml would win over
    # requirements.txt, so there must be exactly one environment file.
    names = {p.name for p in BINDER.iterdir()}
    assert "requirements.txt" in names and "environment.yml" not in names


def test_post_build_is_executable_strict_and_installs_bertlib():
    post = BINDER / "postBuild"
    assert os.access(post, os.X_OK), "binder/postBuild must be executable"
    lines = [line.strip() for line in post.read_text().splitlines()]
    assert lines[0].startswith("#!"), "postBuild needs a shebang"
    assert "set -e" in lines, "postBuild must stop at the first failing command"
    assert any(re.match(r"pip install .*-e \.$", line) for line in lines)

