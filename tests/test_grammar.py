"""Tests of bertlib.tiny.grammar: the generated sentences and their ground truth."""

import numpy as np
import pytest

from bertlib.tiny import grammar as g

# Sentences drawn with np.random.default_rng(7) and max_pp=2; the ground truth below was
# checked by hand, word by word (positions count words from 0).
HAND_CHECKED = {
    "simple": ("the student sings", [(2, 1, "main", False, 0, False)]),
    "pp": ("the doctor beside the key beside the cat sings",
           [(8, 1, "main", False, 2, False)]),
    "subj_rel": ("the student that finds the big bird laughs",
                 [(3, 1, "inner", False, 0, False), (7, 1, "main", False, 1, False)]),
    "obj_rel": ("the student that the quiet trees find laughs",
                [(6, 5, "inner", True, 0, False), (7, 1, "main", False, 1, True)]),
    "comp": ("the student believes that the key beside the cat near the kings swims",
             [(2, 1, "main", False, 0, False), (12, 5, "inner", False, 2, True)]),
    "comp_comp": ("the student believes that the big bird hopes that the girl laughs",
                  [(2, 1, "main", False, 0, False), (7, 6, "middle", False, 0, False),
                   (11, 10, "inner", False, 0, False)]),
    "adv": ("because the doctor sleeps the kings find the birds",
            [(3, 2, "inner", False, 0, False), (6, 5, "main", True, 0, False)]),
}


@pytest.mark.parametrize("construction", g.CONSTRUCTIONS)
def test_hand_checked_sentences_and_their_ground_truth(construction):
    s = g.sentence(construction, np.random.default_rng(7), max_pp=2)
    text, verbs = HAND_CHECKED[construction]
    assert s.text == text
    assert [(v.position, v.subject, v.role, v.plural, v.attractors, v.attractor_differs)
            for v in s.verbs] == verbs


def test_shortcuts_on_a_hand_checked_object_relative():
    s = g.sentence("obj_rel", np.random.default_rng(7), max_pp=2)
    inner, main = s.verbs
    assert g.first_noun(s) == 1 and g.nearest_noun(s, inner) == 5 and g.nearest_noun(s, main) == 5
    assert g.other_form("find") == "finds" and g.other_form("laughs") == "laugh"


def test_every_verb_agrees_with_its_subject_noun():
    for s in g.generate(600, g.CONSTRUCTIONS, seed=3):
        for v in s.verbs:
            noun = s.words[v.subject]
            assert noun in g.NOUNS or noun in g.NOUNS.values()
            assert (noun in g.NOUNS.values()) == v.plural
            verb = s.words[v.position]
            plural_verbs = {**g.INTRANSITIVE, **g.TRANSITIVE, **g.COMPLEMENT}.values()
            assert (verb in plural_verbs) == v.plural
            between = [i for i in s.nouns if v.subject < i < v.position]
            assert v.attractors == len(between)


def test_generation_is_seeded_and_splits_are_disjoint():
    a = [s.text for s in g.generate(300, seed=5)]
    assert a == [s.text for s in g.generate(300, seed=5)]
    test = {s.text for s in g.generate(300, seed=5, split="test")}
    assert not test & set(a)
    assert all(g.split_of(t) == "test" for t in test)


def test_constructions_are_drawn_in_turn_and_vocabulary_covers_them():
    sents = g.generate(10, ("pp", "comp"), seed=0)
    assert [s.construction for s in sents] == ["pp", "comp"] * 5
    vocab = set(g.vocabulary())
    assert len(vocab) == len(g.vocabulary())
    assert all(w in vocab for s in g.generate(500, g.CONSTRUCTIONS) for w in s.words)


def test_shortcuts_fail_where_the_grammar_means_them_to():
    sents = g.generate(2000, g.CONSTRUCTIONS, seed=1)
    nearest_ok, first_ok = {}, {}
    for s in sents:
        number = dict(zip(s.nouns, s.noun_plural, strict=True))
        for v in s.verbs:
            key = (s.construction, v.role)
            nearest_ok.setdefault(key, []).append(number[g.nearest_noun(s, v)] == v.plural)
            first_ok.setdefault(key, []).append(number[g.first_noun(s)] == v.plural)
    assert np.mean(nearest_ok[("pp", "main")]) < 0.8
    # the fronted adverbial clause: the main verb's subject is not the first noun
    assert np.mean(first_ok[("adv", "main")]) < 0.65
    assert np.mean(first_ok[("obj_rel", "inner")]) < 0.6
    assert np.mean(nearest_ok[("comp", "inner")]) < 0.9
    assert np.mean(first_ok[("comp", "inner")]) < 0.6


def test_the_after_that_shortcut_solves_comp_and_picks_comp_comps_middle_subject():
    for s in g.generate(300, ("comp", "comp_comp", "simple"), seed=2):
        number = dict(zip(s.nouns, s.noun_plural, strict=True))
        noun = g.after_that_noun(s)
        if s.construction == "comp":
            assert number[noun] == s.verbs[-1].plural  # right on every comp inner verb
        elif s.construction == "comp_comp":
            assert noun == s.verbs[1].subject  # the middle clause's subject
        else:
            assert noun == g.first_noun(s)  # no "that": the first noun


@pytest.mark.parametrize("kwargs, message", [
    ({"n": 0}, "n (the number of sentences) must be a whole number in 1..1000000"),
    ({"n": 5, "max_pp": 4}, "max_pp (the number of prepositional phrases) must be a whole "
                            "number in 0..3, got 4"),
    ({"n": 5, "max_pp": -1}, "in 0..3, got -1"),
    ({"n": 5, "max_pp": 0}, "the 'pp' construction needs max_pp in 1..3"),
    ({"n": 5, "constructions": ["pp", "passive"]}, "; got 'passive'"),
    ({"n": 5, "constructions": []}, "constructions must be a non-empty list of names from"),
    ({"n": 5, "split": "dev"}, "split must be one of 'train', 'test'; got 'dev'"),
])
def test_bad_requests_name_the_valid_range(kwargs, message):
    with pytest.raises(ValueError) as err:
        g.generate(**kwargs)
    assert message in str(err.value)


def test_a_count_that_is_not_whole_is_a_type_error():
    with pytest.raises(TypeError, match="must be a whole number in 1..1000000, got 2.5"):
        g.generate(2.5)


def test_sentence_rejects_unknown_construction_depth_and_rng():
    with pytest.raises(ValueError, match="construction must be one of"):
        g.sentence("comp_comp_comp", np.random.default_rng(0))
    with pytest.raises(ValueError, match="in 0..3"):
        g.sentence("pp", np.random.default_rng(0), max_pp=9)
    with pytest.raises(ValueError, match="needs max_pp in 1..3"):
        g.sentence("pp", np.random.default_rng(0), max_pp=0)
    with pytest.raises(TypeError, match="numpy Generator"):
        g.sentence("pp", 0)
    with pytest.raises(TypeError, match="constructions must be a list of names .*, got str 'pp'"):
        g.generate(5, constructions="pp")
    with pytest.raises(ValueError, match="not a verb"):
        g.other_form("cat")


def test_without_prepositional_phrases_complements_have_no_attractors():
    for s in g.generate(200, ("simple", "comp"), seed=4, max_pp=0):
        assert all(v.attractors == 0 for v in s.verbs)


def test_in_phrase_marks_the_nouns_after_a_preposition():
    s = g.sentence("comp", np.random.default_rng(7), max_pp=2)
    # "the student believes that the key beside the cat near the kings swims"
    assert g.in_phrase(s) == (False, False, True, True)
    t = g.Sentence(("the", "cat", "near", "the", "big", "dogs", "sleeps"), "pp",
                   (g.Verb(6, 1, "main", False, 1, True),), (1, 5), (False, True))
    assert g.in_phrase(t) == (False, True)  # an adjective between "the" and the noun
    assert g.nearest_outside_phrase(t, t.verbs[0]) == 1 and g.nearest_noun(t, t.verbs[0]) == 5


def test_the_outside_phrase_shortcut_is_right_where_only_phrases_stand_between():
    sents = g.generate(1400, g.CONSTRUCTIONS, seed=1)
    right = g.shortcut_right(sents, g.nearest_outside_phrase)
    keys = [(s.construction, v.role) for s in sents for v in s.verbs]
    assert right.shape == (len(keys),)
    by = {k: right[[i for i, key in enumerate(keys) if key == k]].mean() for k in set(keys)}
    for k in [("pp", "main"), ("comp", "inner"), ("adv", "main"), ("comp_comp", "inner")]:
        assert by[k] == 1.0
    assert by[("subj_rel", "main")] < 0.65 and by[("obj_rel", "main")] < 0.65
    # its noun is never inside a phrase, and it is the subject wherever no clause intervenes
    for s in sents[:200]:
        for v in s.verbs:
            noun = g.nearest_outside_phrase(s, v)
            assert not g.in_phrase(s)[s.nouns.index(noun)]
    nearest = g.shortcut_right(sents, lambda s, v: g.nearest_noun(s, v))
    assert not np.array_equal(right, nearest)


def test_shortcut_right_rejects_what_is_not_a_list_of_sentences():
    with pytest.raises(TypeError, match="sentences must be a list"):
        g.shortcut_right("the cat sleeps", g.nearest_outside_phrase)
    with pytest.raises(ValueError, match="non-empty"):
        g.shortcut_right([], g.nearest_outside_phrase)
    with pytest.raises(TypeError, match="a grammar Sentence"):
        g.shortcut_right(["the cat sleeps"], g.nearest_outside_phrase)
