"""Tests of the WordNet prior as Xia et al. computed it (Wu-Palmer averaged over synset pairs),
and of notebook 08's design and predict-then-check checkers."""

import sys
import types

import numpy as np
import pytest

from bertlib.exercises import nb08
from bertlib.hf import custom as C
from bertlib.hf.loading import load_bert
from bertlib.hf.models import encode


@pytest.fixture(scope="module")
def bert():
    return load_bert()


class FakeSynset:
    """A synset whose Wu-Palmer similarity with another is a fixed number from ``table``."""

    def __init__(self, name, table):
        self.name, self.table = name, table

    def lemmas(self):
        return [types.SimpleNamespace(antonyms=lambda: [])]

    def wup_similarity(self, other):
        return self.table.get((self.name, other.name))


def fake_wordnet(monkeypatch, senses, wup):
    synsets = {word: [FakeSynset(s, wup) for s in names] for word, names in senses.items()}
    corpus = types.ModuleType("nltk.corpus")
    corpus.wordnet = types.SimpleNamespace(synsets=lambda w: synsets.get(w, []))
    monkeypatch.setitem(sys.modules, "nltk", types.ModuleType("nltk"))
    monkeypatch.setitem(sys.modules, "nltk.corpus", corpus)


def test_wordnet_prior_averages_wu_palmer_over_synset_pairs_with_a_common_ancestor(bert,
                                                                                  monkeypatch):
    # "cat" has two senses, "dog" one: the value is the mean of the Wu-Palmer scores, both ways,
    # not the best one; a pair with no common ancestor (None) is left out, as in the authors'
    # code (counting it 0 would give 0.2 for cat-car)
    wup = {("cat.animal", "dog.animal"): 0.8, ("cat.tractor", "dog.animal"): 0.2,
           ("cat.animal", "car.vehicle"): 0.4, ("cat.tractor", "car.vehicle"): None,
           ("cat.tractor", "run.verb"): None, ("cat.animal", "run.verb"): None}
    wup.update({(b, a): v for (a, b), v in list(wup.items())})  # the same both ways
    fake_wordnet(monkeypatch, {"cat": ["cat.animal", "cat.tractor"], "dog": ["dog.animal"],
                               "car": ["car.vehicle"], "run": ["run.verb"]}, wup)
    R = C.similarity_prior("cat", "dog car run", source="wordnet", model=bert)
    # [CLS] cat [SEP] dog car run [SEP]
    assert R[1, 3] == pytest.approx(0.5)  # (0.8 + 0.2) / 2, where the best sense would give 0.8
    assert R[1, 4] == pytest.approx(0.4)  # the None pair left out
    assert R[1, 5] == 0.0  # no pair has a common ancestor: 0
    assert R[3, 1] == R[1, 3]  # symmetric


def test_zero_prior_prediction_checker_explains_each_guess():
    assert nb08.check_zero_prior_prediction("second")
    assert nb08.check_zero_prior_prediction(" Second ")
    for guess, needle in {"first": "R = 1 keeps the first score", "third": "LOWERED",
                          "2": 'answer with "first"', None: "not answered yet"}.items():
        fb = nb08.check_zero_prior_prediction(guess)
        assert not fb and needle in fb.message, (guess, fb.message)


def test_prior_design_checker_measures_cat_to_feline_against_the_target(bert):
    a, b = nb08.CHECK_PAIRS[0]
    tokens = bert.tokenizer.convert_ids_to_tokens(encode(a, b)["input_ids"][0])
    n, cat = len(tokens), tokens.index("cat")
    feline = [tokens.index("fe"), tokens.index("##line")]
    design = np.ones((n, n))
    design[cat] = 0
    design[cat, feline] = 1  # cat keeps only its scores to feline; all others become 0
    assert nb08.check_prior_design(design)
    weak = design.copy()
    weak[cat] = 0.5
    weak[cat, feline] = 1  # feline singled out by 0.5, but its rivals keep half their scores
    cases = {
        "not answered yet": None,
        "shape (16, 16)": np.ones((3, 3)),
        "keep R in [0, 1]": 2 * design,
        "NaN or inf": np.full((n, n), np.nan),
        "changes nothing": np.ones((n, n)),
        "does not single out 'feline'": C.similarity_prior(a, b, model=bert),  # [CLS] gets 1 too
        "the target is 2×": weak,
    }
    for needle, R in cases.items():
        fb = nb08.check_prior_design(R)
        assert not fb and needle in fb.message, (needle, fb.message)
    assert bert.model.config._attn_implementation != C.PRIOR_ATTENTION  # the checker undid it
