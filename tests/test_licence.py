"""The licence files exist, pyproject points at the code licence, CITATION.cff is valid CFF 1.2."""

import datetime
import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_pyproject_licence_files_exist():
    # the package ships bertlib/data/ (CC BY 4.0) beside the code (MIT)
    assert PYPROJECT["license"] == "MIT AND CC-BY-4.0"
    for name in PYPROJECT["license-files"]:
        assert (ROOT / name).is_file(), f"pyproject.toml names licence file {name}, which is missing"
    assert "MIT License" in (ROOT / "LICENSE").read_text()


def test_content_licence_names_cc_by_and_its_url():
    text = (ROOT / "LICENSE-CONTENT").read_text()
    assert "CC BY 4.0" in text and "https://creativecommons.org/licenses/by/4.0/" in text
    assert "bertlib/data/" in text and "notebooks/" in text


def test_citation_cff_has_the_required_keys_and_agrees_with_the_project():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    missing = {"cff-version", "message", "title", "authors"} - cff.keys()
    assert not missing, f"CITATION.cff lacks the CFF 1.2 keys {sorted(missing)}"
    assert cff["cff-version"] == "1.2.0"
    assert all("name" in a or "family-names" in a for a in cff["authors"]), cff["authors"]
    assert cff["version"] == PYPROJECT["version"], "CITATION.cff and pyproject.toml disagree"
    assert isinstance(cff["date-released"], datetime.date), "date-released must be YYYY-MM-DD"
    assert set(cff["license"]) == set(PYPROJECT["license"].split(" AND "))
    readme = (ROOT / "README.md").read_text()
    assert f"version {cff['version']}" in readme, "the README's How to cite names another version"
    (repo,) = set(re.findall(r"mybinder\.org/v2/gh/([^/]+/[^/]+)/", readme))
    assert cff["repository-code"] == f"https://github.com/{repo}", (
        f"CITATION.cff's repository-code is {cff['repository-code']}, the Binder badge uses {repo}"
    )
