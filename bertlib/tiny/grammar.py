"""A small English-like language whose grammar we wrote, with the ground truth of every sentence.

Notebook 09 pre-trains a tiny BERT on it. The grammar is built to defeat the two shortcuts a
model could use to guess whether a verb is singular or plural (Linzen, Dupoux & Goldberg 2016):

- *nearest noun* (agree with the closest noun before the verb) fails when a noun of the other
  number stands between the subject and its verb, an "attractor": "the key near the cabinets is";
- *first noun* (agree with the sentence's first noun) fails for verbs whose subject is not the
  first noun: the inner verb of an object relative ("the cat that the dogs chase sleeps") or of
  a that-complement ("the girl says that the boys near the tree run").

Constructions (``CONSTRUCTIONS``), each a template filled at random:

=============  ===========================================================  =================
name           example                                                       verbs (role)
=============  ===========================================================  =================
simple         the cat sleeps / the cat sees the dogs                        main
pp             the cat near the dogs sleeps                                  main
subj_rel       the cat that chases the dogs sleeps                           inner, main
obj_rel        the cat that the dogs chase sleeps                            inner, main
comp           the girl says that the boys near the tree run                 main, inner
comp_comp      the girl says that the boy thinks that the dogs near it run   main, middle, inner
adv            while the dogs sleep the cat near the trees runs              inner, main
=============  ===========================================================  =================

In ``adv`` (a fronted adverbial clause) the main verb's subject is not the sentence's first noun,
so the first-noun shortcut fails on main verbs too; with a prepositional phrase after the main
subject, the nearest-noun shortcut can fail on the same verb.

``comp_comp`` (a complement inside a complement) is never used for training: it tests whether
what the model learned carries over to a deeper structure it has not seen.

Every sentence comes with its ground truth: for each verb, the position of its subject's head
noun, its number, its role, and the attractors between the two. Sentences are split into train
and test by a hash of their text, so no test sentence can ever be drawn for training.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bertlib.checks import items, kind, one_of, whole

__all__ = ["NOUNS", "INTRANSITIVE", "TRANSITIVE", "COMPLEMENT", "ADJECTIVES", "PREPOSITIONS",
           "SUBORDINATORS",
           "CONSTRUCTIONS", "TRAIN_CONSTRUCTIONS", "UNSEEN_CONSTRUCTIONS", "MAX_PP", "Verb",
           "Sentence", "vocabulary", "sentence", "generate", "split_of", "nearest_noun",
           "first_noun", "other_form", "after_that_noun", "in_phrase", "nearest_outside_phrase",
           "shortcut_right"]

#: singular -> plural, for nouns and for verbs (3rd person singular -> plural).
NOUNS = {w: w + "s" for w in ("cat", "dog", "girl", "boy", "key", "tree", "bird", "teacher",
                              "farmer", "king", "horse", "student", "doctor", "cabinet",
                              "friend", "painter", "lion", "table", "author", "pilot")}
INTRANSITIVE = {w + "s": w for w in ("sleep", "run", "smile", "laugh", "wait", "fall", "sing",
                                     "swim")}
TRANSITIVE = {w + "s": w for w in ("chase", "see", "like", "follow", "help", "visit", "find",
                                   "call")}
COMPLEMENT = {w + "s": w for w in ("say", "think", "know", "believe", "hope")}
ADJECTIVES = ("big", "small", "old", "young", "red", "happy", "quiet", "brave")
PREPOSITIONS = ("near", "behind", "with", "under", "beside")
SUBORDINATORS = ("while", "because")
_FUNCTION_WORDS = ("the", "that")

CONSTRUCTIONS = ("simple", "pp", "subj_rel", "obj_rel", "comp", "comp_comp", "adv")
TRAIN_CONSTRUCTIONS = ("simple", "pp", "subj_rel", "obj_rel", "comp", "adv")
UNSEEN_CONSTRUCTIONS = ("comp_comp",)
#: Most prepositional phrases after one subject (a longer chain is out of the language's range).
MAX_PP = 3
_ADJECTIVE_PROB = 0.25
_SINGULARS = {id(t): tuple(t) for t in (NOUNS, INTRANSITIVE, TRANSITIVE, COMPLEMENT)}
_TEST_SHARE = 5  # one text in 5 (by hash) belongs to the test split


@dataclass(frozen=True)
class Verb:
    """Ground truth of one verb: its position in the sentence's words, its subject's head noun
    position, its role ("main", "inner", "middle"), whether it is plural, and the nouns between
    subject and verb (attractors, their count and whether any has the other number)."""

    position: int
    subject: int
    role: str
    plural: bool
    attractors: int
    attractor_differs: bool


@dataclass(frozen=True)
class Sentence:
    """A generated sentence: words, construction, its verbs' ground truth, and for every noun
    its position and number."""

    words: tuple[str, ...]
    construction: str
    verbs: tuple[Verb, ...]
    nouns: tuple[int, ...]
    noun_plural: tuple[bool, ...]

    @property
    def text(self) -> str:
        return " ".join(self.words)


def vocabulary() -> list[str]:
    """Every word of the language, in a fixed order (function words, nouns, verbs, ...)."""
    words = list(_FUNCTION_WORDS)
    for table in (NOUNS, INTRANSITIVE, TRANSITIVE, COMPLEMENT):
        for singular, plural in table.items():
            words += [singular, plural]
    return words + list(ADJECTIVES) + list(PREPOSITIONS) + list(SUBORDINATORS)


def other_form(word: str) -> str:
    """The verb's form of the other number: "sleeps" <-> "sleep". ValueError for a non-verb."""
    for table in (INTRANSITIVE, TRANSITIVE, COMPLEMENT):
        for singular, plural in table.items():
            if word == singular:
                return plural
            if word == plural:
                return singular
    raise ValueError(f"{word!r} is not a verb of the language")


class _Builder:
    """Appends words while recording nouns and verbs (used by :func:`sentence`)."""

    def __init__(self, rng: np.random.Generator):
        self.rng, self.words, self.nouns, self.plural, self.verbs = rng, [], [], [], []
        self.integers, self.random = rng.integers, rng.random  # looked up once per sentence

    def pick(self, options: Sequence[str]) -> str:
        return options[int(self.integers(len(options)))]

    def noun_phrase(self, n_pp: int = 0) -> int:
        """det (adj) noun (prep det (adj) noun)*; returns the head noun's position."""
        head = self._noun()
        for _ in range(n_pp):
            self.words.append(self.pick(PREPOSITIONS))
            self._noun()
        return head

    def _noun(self) -> int:
        self.words.append("the")
        if self.random() < _ADJECTIVE_PROB:
            self.words.append(self.pick(ADJECTIVES))
        plural = bool(self.random() < 0.5)
        singular = self.pick(_SINGULARS[id(NOUNS)])
        self.nouns.append(len(self.words))
        self.plural.append(plural)
        self.words.append(NOUNS[singular] if plural else singular)
        return len(self.words) - 1

    def verb(self, table: dict[str, str], subject: int, role: str) -> int:
        plural = self.plural[self.nouns.index(subject)]
        singular = self.pick(_SINGULARS[id(table)])
        between = [k for k, i in enumerate(self.nouns) if subject < i < len(self.words)]
        differs = any(self.plural[k] != plural for k in between)
        self.verbs.append(Verb(len(self.words), subject, role, plural, len(between), differs))
        self.words.append(table[singular] if plural else singular)
        return len(self.words) - 1

    def main_predicate(self, subject: int, role: str = "main") -> None:
        """An intransitive verb, or a transitive one with an object."""
        if self.random() < 0.5:
            self.verb(INTRANSITIVE, subject, role)
        else:
            self.verb(TRANSITIVE, subject, role)
            self.noun_phrase()


def sentence(construction: str, rng: np.random.Generator, max_pp: int = 2) -> Sentence:
    """One random sentence of a construction (see the module's table), with its ground truth.

    construction: one of CONSTRUCTIONS. rng: a numpy Generator (the only source of randomness).
    max_pp: most prepositional phrases after a subject, in 0..MAX_PP ("pp" draws 1..max_pp,
    so needs max_pp ≥ 1; the innermost subject of a complement draws 0..max_pp). With
    max_pp = 0 and no relative clauses, no noun ever stands between a subject and its verb.
    """
    return _build(construction, rng, _check_max_pp(construction, rng, max_pp))


def _check_max_pp(construction: str, rng, max_pp) -> int:
    """sentence's arguments checked: construction, rng, and max_pp in 0..MAX_PP, at least 1 for
    'pp' (ValueError naming the valid range). Returns max_pp, a whole number."""
    one_of(construction, "construction", CONSTRUCTIONS)
    kind(rng, "rng", np.random.Generator, "a numpy Generator (np.random.default_rng(seed))")
    max_pp = whole(max_pp, "max_pp (the number of prepositional phrases)", 0, MAX_PP)
    if construction == "pp" and max_pp == 0:
        raise ValueError("the 'pp' construction needs max_pp in 1..3 (at least one "
                         "prepositional phrase), got 0")
    return max_pp


def _build(construction: str, rng: np.random.Generator, max_pp: int) -> Sentence:
    """:func:`sentence` without its checks (its caller made them)."""
    b = _Builder(rng)
    if construction == "simple":
        b.main_predicate(b.noun_phrase())
    elif construction == "pp":
        b.main_predicate(b.noun_phrase(int(rng.integers(1, max_pp + 1))))
    elif construction == "subj_rel":
        subject = b.noun_phrase()
        b.words.append("that")
        b.verb(TRANSITIVE, subject, "inner")
        b.noun_phrase()
        b.main_predicate(subject)
    elif construction == "adv":
        b.words.append(b.pick(SUBORDINATORS))
        b.main_predicate(b.noun_phrase(), "inner")
        b.main_predicate(b.noun_phrase(int(rng.integers(0, min(max_pp, 1) + 1))))
    elif construction == "obj_rel":
        subject = b.noun_phrase()
        b.words.append("that")
        b.verb(TRANSITIVE, b.noun_phrase(), "inner")
        b.main_predicate(subject)
    else:
        roles = ["main", "inner"] if construction == "comp" else ["main", "middle", "inner"]
        subject = b.noun_phrase()
        for k, role in enumerate(roles[:-1]):
            b.verb(COMPLEMENT, subject, role)
            b.words.append("that")
            innermost = k == len(roles) - 2
            subject = b.noun_phrase(int(rng.integers(0, max_pp + 1)) if innermost else 0)
        b.main_predicate(subject, roles[-1])
    return Sentence(tuple(b.words), construction, tuple(b.verbs), tuple(b.nouns),
                    tuple(b.plural))


def split_of(text: str) -> str:
    """"test" for one text in five (by a CRC-32 hash of the text), else "train"."""
    return "test" if zlib.crc32(text.encode()) % _TEST_SHARE == 0 else "train"


def generate(n: int, constructions: Sequence[str] = TRAIN_CONSTRUCTIONS, seed: int = 0,
             split: str = "train", max_pp: int = 2) -> list[Sentence]:
    """n sentences of the given split, constructions drawn in turn (n // len each, the rest
    from the first ones), reproducible from ``seed``.

    Only sentences whose text hashes into ``split`` are kept ("train" or "test", see
    :func:`split_of`), so the two splits never share a sentence. n: 1..1_000_000. max_pp is
    checked by :func:`sentence`, which every sentence comes from.
    """
    n = whole(n, "n (the number of sentences)", 1, 1_000_000)
    constructions = items(constructions, "constructions", f"names from {CONSTRUCTIONS}")
    for c in constructions:
        one_of(c, "construction", CONSTRUCTIONS)
    one_of(split, "split", ("train", "test"))
    rng = np.random.default_rng(seed)
    max_pp = [_check_max_pp(c, rng, max_pp) for c in constructions][0]  # each construction's
    out = []
    while len(out) < n:
        s = _build(constructions[len(out) % len(constructions)], rng, max_pp)
        if split_of(s.text) == split:
            out.append(s)
    return out


def nearest_noun(s: Sentence, verb: Verb) -> int:
    """Position of the noun closest before the verb (the nearest-noun shortcut's subject)."""
    return max(i for i in s.nouns if i < verb.position)


def first_noun(s: Sentence) -> int:
    """Position of the sentence's first noun (the first-noun shortcut's subject)."""
    return s.nouns[0]


def after_that_noun(s: Sentence) -> int:
    """Position of the first noun after the sentence's first "that" (the first noun when it has
    no "that"): a shortcut right on every comp inner verb, and on comp_comp it picks the middle
    clause's subject."""
    that = next((i for i, w in enumerate(s.words) if w == "that"), -1)
    return next((i for i in s.nouns if i > that), s.nouns[0])


def in_phrase(s: Sentence) -> tuple[bool, ...]:
    """For each noun of ``s.nouns`` (same order), whether it stands inside a prepositional phrase:
    its determiner "the" (before an optional adjective) follows a preposition, as
    ``noun_phrase`` writes "near the (big) dogs"."""
    inside = []
    for i in s.nouns:
        det = i - 2 if s.words[i - 1] in ADJECTIVES else i - 1
        inside.append(det > 0 and s.words[det - 1] in PREPOSITIONS)
    return tuple(inside)


def nearest_outside_phrase(s: Sentence, verb: Verb) -> int:
    """Position of the noun closest before the verb that is not inside a prepositional phrase
    (a fourth shortcut's subject): right on every pp, comp inner and adv main verb, wrong where
    a relative clause puts its own noun between (subj_rel's object, obj_rel's inner subject).
    Every verb's subject is such a noun, so one always exists."""
    return max(i for i, inside in zip(s.nouns, in_phrase(s), strict=True)
               if i < verb.position and not inside)


def shortcut_right(sentences: Sequence[Sentence], pick) -> np.ndarray:
    """(R,) bool, one row per verb of every sentence in order (the rows of
    :func:`bertlib.tiny.agreement.make_sentence_set`): whether the noun at ``pick(s, verb)`` (a
    position, e.g. :func:`nearest_outside_phrase`) has the verb's number."""
    sentences = items(sentences, "sentences", "grammar Sentences")
    kind(sentences[0], "sentences[0]", Sentence, "a grammar Sentence")
    return np.array([dict(zip(s.nouns, s.noun_plural, strict=True))[pick(s, v)] == v.plural
                     for s in sentences for v in s.verbs], dtype=bool)
