"""bertlib.claims: a claim about the bundled model's numbers is asserted with that model, and only
reported with any other."""

import pytest

from bertlib.claims import claim, is_bundled
from bertlib.loading import BUNDLED_NAME, LoadedBert, bundled_model_path

BUNDLED = LoadedBert(None, None, BUNDLED_NAME)
OTHER = LoadedBert(None, None, "prajjwal1/bert-tiny")


def test_is_bundled_by_name_or_by_folder():
    assert is_bundled(BUNDLED)
    assert is_bundled(LoadedBert(None, None, bundled_model_path()))
    assert not is_bundled(OTHER)
    with pytest.raises(TypeError, match="bert must be the LoadedBert that load_bert"):
        is_bundled("all-MiniLM-L6-v2")


def test_claim_asserts_for_the_bundled_model_and_reports_for_another(capsys):
    assert claim(BUNDLED, "two is more than one", 2 > 1, measured=2)
    with pytest.raises(AssertionError, match=r"no longer true .*: one is more than two \(measured: 1\)"):
        claim(BUNDLED, "one is more than two", 1 > 2, measured=1)
    assert not claim(OTHER, "one is more than two", 1 > 2, measured=1)
    assert "with prajjwal1/bert-tiny it does not hold (measured: 1)" in capsys.readouterr().out


def test_claim_needs_its_statement_in_words():
    with pytest.raises(ValueError, match="statement .* is empty"):
        claim(BUNDLED, "  ", True)
    with pytest.raises(TypeError, match="statement .* must be a string"):
        claim(BUNDLED, None, True)
