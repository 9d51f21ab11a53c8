"""Fixtures shared by the unit tests, and the markers that split them.

Markers (registered in pyproject.toml):
- ``model``: the test loads the real pretrained BERT (a second or two the first time in a
  process). Every test that takes the ``bert`` fixture is marked automatically; a test that
  loads the model another way says so with ``@pytest.mark.model``.
- ``slow``: the test alone takes about a second or more on a 2-core machine.

``make test-unit`` runs the rest, the numpy tests, in seconds: ``pytest -m "not model and not
slow"``; ``make test`` runs everything.
"""

import sys

import pytest

from bertlib.models import load_bert


@pytest.fixture(scope="session")
def bert():
    """The bundled pretrained BERT as a LoadedBert (model, tokenizer, name), loaded once."""
    return load_bert()


@pytest.fixture(autouse=True)
def close_figures():
    """After every test, close the matplotlib figures it left open (none are shared)."""
    yield
    plt = sys.modules.get("matplotlib.pyplot")  # not imported: no figure can be open
    if plt is not None:
        plt.close("all")


def pytest_collection_modifyitems(items):
    for item in items:
        if "bert" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.model)
