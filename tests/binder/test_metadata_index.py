"""metadata_index.MetadataIndex, the stand-in for PyPI's index that test_pythons.py resolves
through: it must show pip the same releases as PyPI and the very METADATA the wheels hold, so a
resolve through it equals one straight from PyPI (`make test-pythons`; needs PyPI)."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from binder_files import PYPI, pip, require_index  # noqa: E402
from metadata_index import JSON_TYPE, MetadataIndex, fetch, metadata_in_wheel  # noqa: E402


@pytest.fixture(scope="module")
def index():
    require_index(PYPI)
    with MetadataIndex() as served:
        yield served


def pypi_files(project: str) -> list[dict]:
    status, _, body = fetch(f"{PYPI}/{project}/", {"Accept": JSON_TYPE})
    assert status == 200, f"PyPI answered {status} for {project}"
    return json.loads(body)["files"]


def test_metadata_read_from_the_wheel_is_pypis_own():
    # torch's Windows wheel: 122 MB, a zip directory of thousands of files; PyPI also serves its
    # METADATA apart. Read by range requests, the member must be that file, byte for byte.
    url = next(f["url"] for f in pypi_files("torch")
               if f["filename"] == "torch-2.13.0-cp311-cp311-win_amd64.whl")
    status, _, separate = fetch(url + ".metadata")
    assert status == 200, "PyPI no longer serves this wheel's METADATA apart: pick another"
    assert metadata_in_wheel(url) == separate


def test_pages_list_pypis_files_with_their_metadata_here(index):
    ours = json.loads(fetch(f"{index.url}/six/", {"Accept": JSON_TYPE})[2])["files"]
    theirs = pypi_files("six")
    same = ("filename", "hashes", "requires-python", "yanked")
    assert [{k: f.get(k) for k in same} for f in ours] == [
        {k: f.get(k) for k in same} for f in theirs]
    wheels = [f for f in ours if f["filename"].endswith(".whl")]
    assert wheels and all(f["core-metadata"] is True and f["url"].startswith(
        index.url.removesuffix("/simple") + "/files/") for f in wheels)
    assert not any("core-metadata" in f for f in ours if not f["filename"].endswith(".whl"))
    status, _, metadata = fetch(wheels[-1]["url"] + ".metadata")
    assert status == 200 and metadata.startswith(b"Metadata-Version")


def test_a_resolve_through_it_equals_one_from_pypi(index, tmp_path):
    def resolved(index_url):
        report = tmp_path / "report.json"
        run = pip(["install", "--dry-run", "--ignore-installed", "--only-binary=:all:",
                   "--python-version", "3.12", "--platform", "manylinux_2_17_x86_64",
                   "--quiet", "--report", str(report), "requests==2.34.2"], index_url)
        assert run.returncode == 0, run.stderr
        return sorted((p["metadata"]["name"], p["metadata"]["version"],
                       p["download_info"]["url"].rsplit("/", 1)[1])
                      for p in json.loads(report.read_text())["install"])

    served = index.requests["metadata"]
    through_it = resolved(index.url)
    assert index.requests["metadata"] > served, "pip did not take the metadata from the index"
    assert through_it == resolved(PYPI) and len(through_it) >= 5
