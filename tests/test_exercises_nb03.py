"""bertlib.exercises.nb03: the checkers accept right answers, name typical mistakes, and say
"not answered yet" (without raising) for the unsolved stubs."""

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from bertlib import exercises
from bertlib.exercises import Feedback, nb03, reset_tries
from bertlib.exercises.nb03 import (
    _GUESS_ABOVE,
    _GUESS_TOLERANCE,
    _NARROW_MARGIN,
    _NEAR_ONE,
    _QUERY,
    _TARGET,
    BANK_FIRST,
    BANK_NEUTRAL,
    BANK_RIVER,
    EMBED_PAIR,
    HEADS_TEXT,
    _bank_cosine,
    _bank_margin,
    _heads_both_ways,
    _heads_where_top,
    _river_lean,
    check_bank_sentence,
    check_embeddings,
    check_heads,
    check_position_guess,
)
from bertlib.hf.models import encode, load_bert, run_bert
from bertlib.hf.params import bert_params
from bertlib.paper.bert import layer_norm


@pytest.fixture(autouse=True)
def _every_try_explained(monkeypatch):
    reset_tries()  # each test starts as a fresh kernel would, and all its tries are explained
    monkeypatch.setattr(exercises, "EXPLAINED_TRIES", 10**6)


LESSON = Path(__file__).resolve().parents[1] / "notebooks" / "03_inside_bert.ipynb"
#: For the list behaviour that needs a longer answer than exercise 3's (fox and dog: one head on
#: the bundled model): lazy and dog, five heads both ways, one of them also with [CLS]/[SEP] in
WORDS = ("lazy", "dog")


def right_heads(skip_special=True):
    return _heads_both_ways(*WORDS, skip_special=skip_special)


def check(answer):
    return check_heads(answer, *WORDS)


@pytest.fixture(scope="module")
def parts():
    w = bert_params()
    enc = encode(*EMBED_PAIR)
    ids, types = enc["input_ids"][0].numpy(), enc["token_type_ids"][0].numpy()
    word = w.word[ids].astype(float)
    return w, word, w.position[:len(ids)], w.token_type[types], w.token_type[0]


def ln(w, x):
    return layer_norm(x, w.emb_gamma, w.emb_beta, w.eps)


def test_every_checker_says_not_answered_for_none():
    for check in (check_position_guess, check_heads, check_bank_sentence,
                  lambda x: check_embeddings(x, x)):
        fb = check(None)
        assert isinstance(fb, Feedback) and not fb.ok and "not answered yet" in fb.message


def test_right_embeddings_pass_also_in_float32(parts):
    w, word, pos, typ, _ = parts
    E = run_bert(*EMBED_PAIR).hidden_states[0]  # transformers' own output, float32
    fb = check_embeddings(torch.tensor(word + pos + typ, dtype=torch.float32), torch.tensor(E))
    assert fb.ok, fb.message


def test_embeddings_cannot_be_read_off_the_model(parts):
    # hidden_states[0] is E: handing it in for both, or without the sum, does not pass
    w, word, pos, typ, _ = parts
    E = run_bert(*EMBED_PAIR).hidden_states[0]
    fb = check_embeddings(None, E)
    assert "not answered yet" in fb.message and "`summed`" in fb.message and "still None" in fb.message
    assert "`E_pair`" in check_embeddings(word + pos + typ, None).message
    assert "already normalised" in check_embeddings(E, E).message
    fb = check_embeddings(word + pos + typ, word + pos + typ)
    assert "LayerNorm is missing" in fb.message and "σ²" not in fb.message  # no formula repeated
    assert "E differs" in check_embeddings(word + pos + typ, E + 0.01).message


@pytest.mark.parametrize("mistake, words", [
    ("all segment A", "which sentence do the pieces after the first [SEP] belong to"),
    ("all segment A", "token type of sentence A (0)"),
    ("no position", "position embeddings are missing"),
    ("no token type", "token-type (segment) embedding is missing"),
    ("no token type", "0 or 1"),
    ("word only", "only the word embeddings"),
])
def test_embedding_mistakes_are_named(parts, mistake, words):
    w, word, pos, typ, typ_a = parts
    S = {"all segment A": word + pos + typ_a, "no position": word + typ,
         "no token type": word + pos, "word only": word}[mistake]
    for E in (ln(w, S), ln(w, word + pos + typ)):  # the sum is checked first
        fb = check_embeddings(S, E)
        assert not fb.ok and words in fb.message


@pytest.mark.parametrize("mistake", ["all segment A", "no token type"])
def test_the_token_types_key_is_pointed_at_only_from_the_second_segment_slip(parts, mistake):
    # learner 21: with the key in the first message, exercise 1 was copy-paste from section 3;
    # learner 29: naming it at all did the exercise's finding, so the second slip is told where
    # to look (encode's keys), not the key
    w, word, pos, typ, typ_a = parts
    S = word + pos + (typ_a if mistake == "all segment A" else 0)
    first, same = (check_embeddings(S, ln(w, S)).message for _ in range(2))
    # learner 33: "look at everything `encode` returns" in the first message pointed straight at
    # the key, so the first slip gets the diagnosis only, the second where to look
    assert "token_type_ids" not in first and "`encode`" not in first and "segment" in first
    assert same == first  # learner 32: the same sum checked again does not climb
    S2 = S.copy()
    S2[0] += 1e-7  # a new sum, the same slip (within the slips' tolerance)
    second = check_embeddings(S2, ln(w, S2)).message
    assert "print the keys of what `encode` returns" in second and "token_type_ids" not in second
    reset_tries()  # a restarted kernel starts again without the key
    assert "token_type_ids" not in check_embeddings(S, ln(w, S)).message
    other = word + typ  # another slip does not count towards it
    reset_tries()
    assert "token_type_ids" not in check_embeddings(other, ln(w, other)).message
    assert "token_type_ids" not in check_embeddings(S, ln(w, S)).message


def test_embedding_shape_nan_and_type(parts):
    w, word, pos, typ, _ = parts
    S = word + pos + typ
    E = ln(w, S)
    assert "wrong shape" in check_embeddings(S, word[1:]).message
    assert "wrong shape" in check_embeddings(word[1:], E).message
    assert "NaN" in check_embeddings(S, np.full(word.shape, np.nan)).message
    assert "array of numbers" in check_embeddings(object(), E).message
    assert "differs" in check_embeddings(np.zeros(word.shape), E).message


def test_position_guess_right_wrong_and_one():
    measured = _bank_cosine(0)
    assert measured < 0.999  # the positions differ, so the input vectors do
    assert check_position_guess(measured - _GUESS_TOLERANCE / 2).ok
    for wrong, way in ((measured - 0.3, "too low, by more than 0.2"),
                       (measured - 0.1, "too low, by 0.05 to 0.2"),
                       (measured + 0.03, "too high, by less than 0.05")):
        reset_tries()  # a first try: it is told which way, and by how much in one of three bands
        fb = check_position_guess(wrong)
        assert fb.message.startswith(way) and f"{measured:.3f}" not in fb.message, fb.message
        assert f"{abs(wrong - measured):.2f}" not in fb.message  # never the distance itself
    for wrong in (measured - 0.3, measured + 0.15, measured - 0.15, -1.0):  # no miss reveals it
        message = check_position_guess(wrong).message
        assert f"{measured:.2f}" not in message and "_bank_cosine" not in message


def test_position_guess_band_lets_a_reasoned_guess_pass():
    # the worked solution's guess, reasoned from section 3's printed row lengths, passes
    assert check_position_guess(0.93).ok
    assert check_position_guess(_bank_cosine(0) - 0.15).message.startswith("too low")
    assert "between -1 and 1" in check_position_guess(3).message
    assert "a number" in check_position_guess("high").message
    # learner 31: 02 reads "12" as 12, so 03 reads "0.93" as 0.93, alike for right and wrong
    assert check_position_guess(" 0.93 ").ok
    replies = []
    for guess in ("0.5", 0.5):
        reset_tries()
        replies.append(check_position_guess(guess).message)
    assert replies[0] == replies[1] and replies[0].startswith("too low"), replies


def test_position_guess_is_about_the_sentences_it_names():
    first, river = run_bert(BANK_FIRST), run_bert(BANK_RIVER)
    assert first.tokens.index("bank") == 1 and river.tokens.index("bank") == 5


def test_heads_reference_passes_and_matches_a_direct_computation():
    run = run_bert(HEADS_TEXT)

    def one_way(a, b):  # a's largest weight, [CLS] and [SEP] left out, goes to b
        row = np.array(run.attentions[:, :, run.tokens.index(a)])
        row[..., [0, len(run.tokens) - 1]] = -1
        return {tuple(x) for x in np.argwhere(row.argmax(-1) == run.tokens.index(b)).tolist()}

    assert _heads_where_top() == sorted(one_way(_QUERY, _TARGET))
    direct = sorted(one_way(_QUERY, _TARGET) & one_way(_TARGET, _QUERY))
    assert _heads_both_ways() == direct and direct  # the bundled model: one head, (2, 7)
    assert check_heads(direct).ok
    assert len(right_heads()) > 2  # the longer answer the list tests below use


def test_the_right_heads_reply_weighs_the_link_against_cls():
    # learner 31: the one right head, (2, 7), sends most of every token's weight to [CLS]; the
    # "link" is the argmax of what is left, which the reply said nothing about
    run = run_bert(HEADS_TEXT)
    (layer, head), = _heads_both_ways()
    w = run.attentions[layer, head]
    i, j = run.tokens.index(_QUERY), run.tokens.index(_TARGET)
    assert w[:, 0].min() > 0.5 and max(w[i, j], w[j, i]) < 0.1  # a [CLS] head, a faint link
    message = check_heads([(layer, head)]).message
    for a, b in ((i, j), (i, 0), (j, i), (j, 0)):  # the pair's weights and [CLS]'s, both rows
        assert f"{w[a, b]:.3f}" in message, (w[a, b], message)
    assert f"at least {w[:, 0].min():.3f}" in message
    assert "most of its weight to [CLS]" in message and "section 5" in message
    assert "not a sign that the model links" in message


def test_a_right_list_with_real_links_is_not_called_a_cls_head():
    message = check(right_heads()).message  # lazy and dog: some heads give each other 0.2-0.4
    assert check(right_heads()).ok and "Weigh the link against [CLS]'s share" in message
    assert "not a sign" not in message


def test_no_earlier_cell_of_the_lesson_answers_exercise_3():
    # What notebook 03 shows before the exercise, on the bundled model: section 5's previous-token
    # head (0, 2), which the explorer also opens on, and its next-token and "mat" heads (1, 8)
    # and (5, 3); the head view's heads 0-2 of layer 0; the model view's still picture, every
    # second layer x heads 0-3 (cell "model_view(..., layers=range(0, L, 2), heads=range(4))").
    shown = {(0, 2), (1, 8), (5, 3)} | {(0, k) for k in range(3)}
    shown |= {(layer, k) for layer in range(0, 6, 2) for k in range(4)}
    answer = set(_heads_both_ways())
    assert answer and not answer & shown
    # and the selection the lesson's model-view cell really stores (read from the notebook, so
    # a new selection there is checked too): every (layer, head) of its still picture
    cells = json.loads(LESSON.read_text())["cells"]
    call = next(re.search(r"model_view\(fox\.tokens, fox\.attentions, layers=(.+?), heads=(.+)\)"
                          r"\s*(?:#.*)?$", "".join(c["source"]), re.M) for c in cells
                if "model_view(fox.tokens" in "".join(c["source"]))
    layers, heads = (eval(x, {"range": range, "L": 6}) for x in call.groups())  # noqa: S307
    model_view_heads = {(layer, k) for layer in layers for k in heads}
    assert model_view_heads and not answer & model_view_heads, answer & model_view_heads
    tokens = run_bert(HEADS_TEXT).tokens
    assert abs(tokens.index(_QUERY) - tokens.index(_TARGET)) > 1  # not neighbours


def test_heads_mistakes_are_named():
    right = right_heads()
    one_based = [(layer + 1, head + 1) for layer, head in right]
    for answer in (one_based, one_based[:2]):  # learner 29: the convention, no confirmation
        message = check(answer).message
        assert "count from 0" in message and "(layer, head)" in message, message
        assert "1-based" not in message and "taken off" not in message, message
    with_special = right_heads(skip_special=False)
    partial = [right[0]] if [right[0]] != with_special else [right[1]]
    assert "missing" in check(partial).message
    assert "[CLS]" not in check(partial).message
    assert "missing" in check(right[:-1]).message
    fb = check(right + [(5, 6)] if (5, 6) not in right else right + [(5, 5)])
    assert "not right: (5, 6)" in fb.message or "not right: (5, 5)" in fb.message
    assert "pairs of whole numbers" in check([("a", "b")]).message
    assert "pairs of whole numbers" in check(3).message


def test_heads_name_the_wrong_pairs_and_count_the_missing_never_naming_them():
    right = right_heads()
    run = run_bert(HEADS_TEXT)  # where each word looks in each head, [CLS] and [SEP] left out
    tokens, tops = run.tokens, []
    for word in WORDS:
        row = np.array(run.attentions[:, :, tokens.index(word)])
        row[..., [0, len(tokens) - 1]] = -1
        tops.append(row.argmax(-1))
    wrong_pairs = [p for p in [(5, 6), (1, 1), (0, 0)] if p not in right]
    cases = {"empty": [], "partial": right[:2], "one short": right[:-1],
             "one extra": right + wrong_pairs[:1], "mixed": right[:1] + wrong_pairs}
    for name, answer in cases.items():
        fb = check(answer)
        assert not fb.ok, name
        missing = [p for p in right if p not in answer]
        for pair in missing:  # a right head the learner did not give is never printed
            assert str(pair) not in fb.message, (name, fb.message)
        if missing:  # that some are missing, never how many (that would say how many to find)
            said = "some right heads are missing" if answer else "your list is empty"
            assert said in fb.message, (name, fb.message)
            assert f"{len(missing)} right head" not in fb.message
        else:
            assert "missing" not in fb.message
        for pair in answer:
            if pair not in right:  # every wrong pair is named, with where the query looks there
                assert (f"{pair}, where {WORDS[0]!r} weights {tokens[tops[0][pair]]!r} most and "
                        f"{WORDS[1]!r} weights {tokens[tops[1][pair]]!r}") in fb.message
        kept = [p for p in answer if p in right]
        assert (f"{len(kept)} of your pairs" in fb.message) == bool(kept), (name, fb.message)
    assert "1 right head" not in check(right[:-1]).message
    assert f"{len(right)}" not in check([]).message


def test_one_based_answers_are_told_to_count_from_0_without_confirming_any_pair():
    # learner 21: "4 of your pairs are right once 1 is taken off" confirmed the whole answer;
    # learner 29: "with 1 taken off" alone still handed it over: every wrong list is told the
    # convention alike, and a shifted one nothing more
    right = right_heads()
    for shift in ((1, 1), (1, 0), (0, 1)):
        shifted = [(a + shift[0], b + shift[1]) for a, b in right]
        if any(b > 11 for _, b in shifted):
            continue
        reset_tries()
        message = check(shifted).message
        assert "count from 0" in message and "taken off" not in message, message
        assert "1-based" not in message, message  # its own right pairs may be counted, as any list's
        assert not any(str(pair) in message for pair in right), message


def test_a_right_subset_gets_no_cls_sep_diagnosis_whatever_way_it_was_found():
    # learner 22: a partial list made the right way, [(0, 10)], was told it was "exactly the heads
    # ... with [CLS] and [SEP] in the comparison": the checker cannot tell how a subset was found,
    # so every right subset gets the same "some right heads are missing", and names none of them
    right, with_special = right_heads(), right_heads(skip_special=False)
    subsets = [[pair] for pair in right] + [with_special] * bool(with_special)
    for answer in subsets:
        if set(answer) == set(right):
            continue
        reset_tries()
        message = check(answer).message
        assert "missing" in message and "[CLS]" not in message and "[SEP]" not in message, message
        assert not any(str(pair) in message for pair in set(right) - set(answer)), message


def test_pairs_that_are_not_whole_numbers_are_a_form_error():
    # learner 22: (0.5, 10) was rounded down to (0, 10) and a whole list passed; True counted as 1
    right = right_heads()
    for bad in ((0.5, right[0][1]), (True, False), ("0", "10")):
        reset_tries()
        feedback = check([bad] + right[1:])
        assert not feedback.ok and "whole numbers" in feedback.message, (bad, feedback.message)
    assert check([(float(layer), np.int64(head)) for layer, head in right]).ok


def test_one_based_is_diagnosed_only_when_the_shift_nearly_gives_the_answer():
    right = right_heads()
    one_based = [(layer + 1, head + 1) for layer, head in right]
    with_zero = [one_based[0], (0, 0)]  # a 0 cannot be counted from 1
    assert "1-based" not in check(with_zero).message
    every = [(layer, head) for layer in range(1, 6) for head in range(1, 12)]
    wrong = [p for p in every if p not in one_based and p not in right][:12] + one_based[:1]
    fb = check(wrong)  # 13 pairs, one of them right after the shift
    assert not fb.ok and "1-based" not in fb.message and "checked only as a whole" in fb.message


def test_a_long_list_is_not_checked_pair_by_pair_so_elimination_reveals_nothing():
    # one layer's 12 heads at a time would name every wrong pair, and the unnamed one is right
    right = right_heads()
    for layer in range(6):
        fb = check([(layer, head) for head in range(12)])
        assert not fb.ok and "checked only as a whole" in fb.message
        assert not any(str(pair) in fb.message for pair in right)
    every = [(layer, head) for layer in range(6) for head in range(12)]
    assert "your list is the heads in which" not in check(every).message  # one-way among 72


def test_unknown_word_is_an_error():
    with pytest.raises(ValueError, match="not a word piece"):
        _heads_where_top("cat", "fox")


def test_bank_sentence_success_and_margin():
    text = "Willows lined the bank of the lake."
    to_money, to_river = _bank_margin(text)
    fb = check_bank_sentence(text)
    assert fb.ok == (to_river - to_money > max(0.0, _river_lean(BANK_NEUTRAL)))
    assert fb.ok and f"{to_river:.3f}" in fb.message


@pytest.mark.parametrize("text", [
    "bank", BANK_NEUTRAL, "We walked along the bank.", "I keep my savings in the bank."])
def test_bank_sentence_without_a_designed_context_fails(text):
    # bank with no (or a money) context leans to the money side: no design, no pass
    fb = check_bank_sentence(text)
    assert not fb.ok and "behind by" in fb.message and "with no context" in fb.message


def test_bank_sentence_failure_states_the_bar_it_applies():
    # learner 27: "I sat on the bank." leaned less to money than the no-context bank and was told
    # to "pull it further to the river side than that", a bar it had passed; the test is
    # lean > max(0, neutral), so with a money-leaning neutral bank the message asks for lean > 0
    text = "I sat on the bank."
    to_money, to_river = _bank_margin(text)
    lean, neutral = to_river - to_money, _river_lean(BANK_NEUTRAL)
    assert neutral < lean < 0  # the case the old message misstated
    fb = check_bank_sentence(text)
    assert not fb.ok and "further to the river side than that" not in fb.message, fb.message
    assert "nearer the river bank" in fb.message and "leans to the money side" in fb.message


@pytest.mark.parametrize("text, words", [
    ("She sat on the bank of the river.", "yours uses river"),
    ("The river was wide.", "needs the word piece 'bank'"),
    ("   ", "empty"),
    (42, "a str"),
])
def test_bank_sentence_mistakes_are_named(text, words):
    fb = check_bank_sentence(text)
    assert not fb.ok and words in fb.message


def test_embeddings_name_position_slips():
    w = bert_params(load_bert())
    enc = encode(*EMBED_PAIR)
    ids, types = enc["input_ids"][0].numpy(), enc["token_type_ids"][0].numpy()
    n, b = len(ids), int(np.argmax(types == 1))
    base = w.word[ids].astype(float) + w.token_type[types]
    restart = base + w.position[np.r_[np.arange(b), np.arange(n - b)]]
    assert "start again at 0" in check_embeddings(restart, restart).message
    shifted = base + w.position[1:n + 1]
    assert "off by one" in check_embeddings(shifted, shifted).message


def test_heads_name_a_missing_layer_and_the_reversed_direction():
    fb = check_heads([(6, 0)])
    assert not fb.ok and "names no head" in fb.message and "0..5" in fb.message
    # learner 28: exercise 3 asks for the link both ways; a list read off one row is named
    for a, b in ((_QUERY, _TARGET), (_TARGET, _QUERY)):
        one_way = _heads_where_top(a, b)
        assert set(one_way) != set(_heads_both_ways())  # the bundled model: more heads one way
        message = check_heads(one_way).message
        assert f"the heads in which {a!r} gives {b!r} its largest" in message, message
        assert "both ways" in message and str(_heads_both_ways()[0]) not in message
    either = sorted(set(_heads_where_top()) | set(_heads_where_top(_TARGET, _QUERY)))
    assert "either word looks most at the other" in check_heads(either).message


def test_bank_sentence_too_long_gets_no_advice_it_cannot_follow():
    fb = check_bank_sentence("the river bank " * 300)
    assert not fb.ok and "512" in fb.message and "truncate" not in fb.message


def test_heads_refuse_a_pair_named_twice():
    right = right_heads()
    fb = check(right + right[:1])
    assert not fb.ok and f"{right[0]} is listed 2 times" in fb.message


def test_bank_sentence_words_are_whole_words_and_one_bank_is_measured():
    for word in ("waterside", "riverbank", "waterfowl", "streamy", "Rivers", "downstream"):
        fb = check_bank_sentence(f"We saw the {word} by the bank.")
        assert not fb.ok and f"yours uses {word.lower()}" in fb.message, fb.message
    assert "contains 'river'" in check_bank_sentence("The riverbank was a bank.").message
    assert "yours uses" not in check_bank_sentence("Willows lined the bank of the lake.").message
    assert "yours uses water" in check_bank_sentence("The water reached the bank.").message
    fb = check_bank_sentence("The bank that lends money is far from the bank of the lake.")
    assert not fb.ok and "2 banks" in fb.message


@pytest.mark.parametrize("which", ["first [SEP] in B", "last [SEP] in A", "one piece"])
def test_embeddings_name_the_piece_in_the_wrong_segment(parts, which):
    w, word, pos, typ, _ = parts
    types = encode(*EMBED_PAIR)["token_type_ids"][0].numpy().copy()
    pieces = load_bert().tokenizer.convert_ids_to_tokens(encode(*EMBED_PAIR)["input_ids"][0])
    i = {"first [SEP] in B": pieces.index("[SEP]"), "last [SEP] in A": len(pieces) - 1,
         "one piece": 2}[which]
    types[i] = 1 - types[i]
    S = word + pos + w.token_type[types]
    fb = check_embeddings(S, ln(w, S))
    assert not fb.ok and f"piece {i}, {pieces[i]!r}" in fb.message
    assert f"got the token type of segment {types[i]}" in fb.message


def test_embeddings_name_the_first_wrong_piece_of_any_kind(parts):
    w, word, pos, typ, _ = parts
    S = word + pos + typ
    S[4] += 0.5
    fb = check_embeddings(S, ln(w, S))
    assert not fb.ok and "piece 4" in fb.message and "1 row(s) wrong" in fb.message


def test_position_guess_refuses_one_and_says_why(monkeypatch):
    # 1 ("same word, same vector") is the misconception: outside the printed band, it fails
    # with its own message, which neither gives the value nor says "too high by ..."
    measured = _bank_cosine(0)
    assert 1.0 - measured > _GUESS_ABOVE  # 1 lies above the band (bundled model: 0.956)
    for guess in (1.0, 0.9999):
        fb = check_position_guess(guess)
        assert not fb.ok and "identical vectors would give 1" in fb.message
        assert "what else does E add" in fb.message and f"{measured:.2f}" not in fb.message
    monkeypatch.setattr(nb03, "_bank_cosine", lambda layer, model=None: 0.7)
    fb = check_position_guess(1.0)
    assert not fb.ok and "identical vectors" in fb.message and "0.7" not in fb.message
    # the band is the printed one: _GUESS_TOLERANCE below, _GUESS_ABOVE above
    assert check_position_guess(0.7 - _GUESS_TOLERANCE + 0.005).ok
    assert check_position_guess(0.7 + _GUESS_ABOVE - 0.005).ok
    assert not check_position_guess(0.7 + _GUESS_ABOVE + 0.005).ok
    assert not check_position_guess(0.7 - _GUESS_TOLERANCE - 0.005).ok


def test_position_guess_nearly_one_needs_the_reasoning():
    # "basically the same word, say 0.99" is within 0.04 of 0.956 but skips the reasoning about
    # the position row: on a first try it fails with a "why below 1?" nudge
    measured = _bank_cosine(0)
    assert measured + _GUESS_ABOVE < _NEAR_ONE  # the bundled model: 0.956
    for guess in (0.99, _NEAR_ONE):
        reset_tries()
        fb = check_position_guess(guess)
        assert not fb.ok and fb.message.startswith("too high"), fb.message
        assert "why below 1" in fb.message and "position row" in fb.message
        assert f"{measured:.2f}" not in fb.message
    assert "identical vectors would give 1" in check_position_guess(1).message
    fb = check_position_guess(0.93)  # the worked solution's reasoned guess
    assert fb.ok and f"{measured:.3f}" in fb.message and "below" in fb.message
    assert check_position_guess(measured + _GUESS_ABOVE / 2).ok  # a little above still passes
    assert "pointing apart" in check_position_guess(-0.5).message


def test_position_guess_only_the_first_try_says_which_way(monkeypatch):
    # learner 20: "a little too low" / "well too high" on every try let 3 guesses halve their
    # way in. Now the first wrong try says which way, later ones only "not within the band"
    monkeypatch.setattr(nb03, "_bank_cosine", lambda layer, model=None: 0.6)
    for off in np.arange(-0.5, 0.35, 0.01):
        guess = float(0.6 + off)
        reset_tries()
        first = check_position_guess(guess)
        if first.ok or guess < 0 or guess > 0.999:
            continue
        assert first.message.startswith(f"too {'high' if off > 0 else 'low'}"), (off, first)
        further = guess + (1e-3 if off > 0 else -1e-3)  # a new guess, further off the same way
        if 0 <= further <= 0.999:
            second = check_position_guess(further).message
            assert "not within the band" in second and "too " not in second, second


def test_halving_on_the_position_guess_learns_one_direction_at_most(monkeypatch):
    # the search: halve [-1, 1] by the message's "too high"/"too low". With the real limit it
    # gets a direction once, then identical messages, so it cannot home in on the band
    monkeypatch.setattr(exercises, "EXPLAINED_TRIES", 3)
    measured, low, high, ways = _bank_cosine(0), -1.0, 1.0, []
    for _ in range(8):
        guess = (low + high) / 2
        fb = check_position_guess(guess)
        if fb.ok:
            break
        way = "high" if "too high" in fb.message else "low" if "too low" in fb.message else None
        ways.append(way)
        if way == "high":
            high = guess
        elif way == "low":
            low = guess
    assert not fb.ok and sum(w is not None for w in ways) == 1, ways
    assert high - low >= 1.0 > _GUESS_TOLERANCE + _GUESS_ABOVE  # the band is still far narrower
    assert low <= measured <= high


def test_position_guess_misses_ask_for_reasoning_and_leak_no_number():
    # every failure: never the value nor a band edge, and a question about the position row
    # instead of "guess again"; past the learner's own number, a miss's text is one of a few
    measured, texts = _bank_cosine(0), set()
    for guess in np.round(np.arange(-1.0, 1.0001, 0.005), 3):
        fb = check_position_guess(float(guess))
        if fb.ok:
            continue
        own = f"(you said {guess:.3f})"
        text = fb.message.replace(own, "").split(" (explained try")[0]
        assert not re.search(r"\d\.\d", text), fb.message  # no value, no edge, no distance
        assert "again" not in text.lower(), fb.message
        assert ("which rows make the two E differ" in text) == (len(texts) > 0), fb.message
        texts.add(text)
    assert len(texts) <= 7  # the first try's direction, then: identical, negative, not within,
    assert f"{measured:.2f}" not in "".join(texts)  # with one pointer (try 2) or both (later)


def test_position_guess_pointers_climb_one_per_new_wrong_try():
    # learner 32: every wrong try listed every ingredient; now the first gets direction and size,
    # each later new guess one pointer more; the same guess again gets the same message
    first = check_position_guess(0.5).message
    assert first.startswith("too low") and "reason it out" not in first
    assert "places apart" not in first and "row lengths" not in first
    second = check_position_guess(0.6).message
    assert "which rows make the two E differ" in second and "places apart" not in second
    assert check_position_guess(0.6).message.startswith(second.split(" (your answer")[0])
    third = check_position_guess(0.7).message
    assert "which rows make the two E differ" in third and "How many places apart" in third


def test_a_first_miss_says_the_guess_before_the_hint():
    # learner 30: "…more than you assumed. (you said 0.500) Before another number, …"
    message = check_position_guess(0.5).message
    assert message.startswith("too low, by more than 0.2 (you said 0.500): ")
    assert ". (you said" not in message


@pytest.mark.parametrize("lean, narrow", [(0.002, True), (0.05, False)])
def test_bank_sentence_success_names_a_narrow_margin(monkeypatch, lean, narrow):
    monkeypatch.setattr(nb03, "_bank_margin", lambda text, model=None: (0.5, 0.5 + lean))
    monkeypatch.setattr(nb03, "_river_lean", lambda text, model=None: -0.01)
    fb = check_bank_sentence("The boat drifted toward the bank.")
    assert fb.ok and f"a margin of {lean:.3f}" in fb.message
    assert ("narrow win" in fb.message) == narrow == (lean < _NARROW_MARGIN)


@pytest.mark.parametrize("axis, ddof, named", [(-1, 1, "d − 1"), (0, 0, "over the tokens")])
def test_embeddings_name_a_layer_norm_with_the_wrong_variance_or_axis(parts, axis, ddof, named):
    w, word, pos, typ, _ = parts
    S = word + pos + typ
    mu, var = S.mean(axis, keepdims=True), S.var(axis, ddof=ddof, keepdims=True)
    fb = check_embeddings(S, w.emb_gamma * (S - mu) / np.sqrt(var + w.eps) + w.emb_beta)
    assert not fb.ok and named in fb.message and "`summed` is right" in fb.message
    assert "γ, β" not in fb.message  # the learner did use them: the slip is elsewhere


def test_heads_given_as_head_layer_get_the_convention_not_a_confirmation():
    # learner 29: "right with their numbers swapped" handed over the answer
    right = right_heads()
    reset_tries()
    fb = check([(head, layer) for layer, head in right])
    assert not fb.ok and "(layer, head)" in fb.message and "swapped" not in fb.message
    assert "right with" not in fb.message and not any(str(p) in fb.message for p in right)


def test_an_empty_list_from_keeping_cls_and_sep_names_that_slip():
    # learner 29: with [CLS]/[SEP] compared no head fits, so the natural answer is []; the
    # checker asked to "look at both words' rows", not at the exclusion the exercise asks for
    assert _heads_both_ways() and not _heads_both_ways(skip_special=False)  # the exercise's words
    reset_tries()
    fb = check_heads([])
    assert not fb.ok and "[CLS] and [SEP] in the comparison" in fb.message
    assert not any(str(pair) in fb.message for pair in _heads_both_ways())
    assert "at least one" not in fb.message and "fits" not in fb.message  # learner 30


def test_an_empty_list_is_not_told_that_some_head_fits():
    fb = check([])  # lazy and dog: an empty list that [CLS]/[SEP] do not explain
    assert not fb.ok and "your list is empty" in fb.message and "every head" in fb.message
    assert "at least one" not in fb.message and "fits" not in fb.message  # learner 30


def test_exercise_1_leaves_token_type_ids_for_the_checker_to_teach():
    cells = json.loads(LESSON.read_text())["cells"]
    task = next("".join(c["source"]) for c in cells if "Embeddings of a pair" in "".join(c["source"]))
    assert "token_type_ids" not in task  # exercise 1 leaves the key for the checker to teach


def test_an_empty_list_of_heads_is_called_empty_without_a_count():
    fb = check([])
    assert not fb.ok and "your list is empty" in fb.message
    assert f"{len(right_heads())}" not in fb.message


def test_half_answered_embeddings_name_the_learners_variable_and_empty_text_reads_plainly(parts):
    _, word, pos, typ, _ = parts
    fb = check_embeddings(word + pos + typ, None)
    assert "not answered yet" in fb.message and "`E_pair`" in fb.message
    for text in ("", "   "):
        fb = check_bank_sentence(text)
        assert not fb.ok and "empty" in fb.message and "plenty" not in fb.message
        assert fb.message.count(":") == 1  # one colon, not "...: type a sentence: ..."
    assert "plenty" in check_bank_sentence("bank " * 600).message  # too long: told how long


def test_bank_sentence_riverbank_gets_the_forbidden_word_message():
    # learner 24: "riverbank" got "needs the word piece 'bank'", not the message the text promises
    message = nb03.check_bank_sentence("We walked along the riverbank.").message
    assert "riverbank (it contains 'river')" in message and "needs the word piece" not in message


def test_position_guess_band_passes_the_lessons_reasoning_but_not_0_97():
    # issue 26: 0.97 passed (0.014 above the bundled model's cosine, inside a band reaching 0.02
    # above); then (learner 26) a guess reasoned from what the lesson printed, neighbours 0.85
    # and rows 100 apart 0.15 interpolated to 0.83 for rows four apart, gave 0.977 and failed.
    # The lesson now prints the mean cosine of positions 4 apart (0.50: the likeness falls fast),
    # and the reasoning from it passes; taking rows four apart as alike as neighbours does not
    w = bert_params()
    word, pos, typ = (float(np.linalg.norm(rows, axis=-1).mean())
                      for rows in (w.word, w.position, w.token_type))
    P = w.position.astype(float)

    def mean_cos(k):  # the mean cosine of positions k apart, as section 3 prints it
        return float(np.mean([P[p] @ P[p + k] / np.linalg.norm(P[p]) / np.linalg.norm(P[p + k])
                              for p in range(len(P) - k)]))

    def reasoned(cos_p, typ=typ):  # the rows as unrelated directions: the solution's formula
        return (word**2 + typ**2 + pos**2 * cos_p) / (word**2 + pos**2 + typ**2)

    measured = _bank_cosine(0)
    assert round(reasoned(mean_cos(4)), 2) == 0.93 and check_position_guess(0.93).ok
    assert check_position_guess(round(reasoned(mean_cos(4), typ=0.0), 2)).ok  # type row left out
    assert check_position_guess(round(measured, 2)).ok  # the value itself, rounded
    # learner 33: the same reasoning written with one decimal, 0.9, was told the reasoning was off
    assert round(reasoned(mean_cos(4)), 1) == 0.9 and check_position_guess(0.9).ok
    assert check_position_guess("0.9").ok and round(reasoned(mean_cos(4), typ=0.0), 1) == 0.9
    reset_tries()
    fb = check_position_guess(0.85)  # below the one-decimal rounding: still told which way
    assert not fb.ok and fb.message.startswith("too low, by 0.05 to 0.2"), fb.message
    interpolated = 0.85 + (0.15 - 0.85) * 3 / 99  # learner 26: from k = 1 and k = 100
    for guess in (0.97, round(reasoned(mean_cos(1)), 2), reasoned(interpolated)):
        reset_tries()
        fb = check_position_guess(guess)
        assert not fb.ok and fb.message.startswith("too high, by less than 0.05"), fb.message
        assert "position row" in fb.message  # differs more than assumed, or counts: why below 1?
    assert measured + _GUESS_ABOVE < 0.97 < measured + 2 * _GUESS_ABOVE  # a near miss, told so
    # what the reasoning needs is printed (section 3), the answer is not
    cells = json.loads(LESSON.read_text())["cells"]
    printed = "".join("".join(o.get("text", [])) for c in cells for o in c.get("outputs", [])
                      if c["cell_type"] == "code" and ("gaps = (" in "".join(c["source"])
                                                       or "lengths = {" in "".join(c["source"])))
    assert f"k = 4: {mean_cos(4):.2f}" in printed and "mean length" in printed, printed
    assert f"{measured:.2f}" not in printed and f"{measured:.3f}" not in printed
    task = next("".join(c["source"]) for c in cells if "**2. Predict" in "".join(c["source"]))
    assert "k places apart" in task and "unrelated" in task


def test_heads_name_cls_sep_kept_in_when_the_same_list_comes_again():
    # issue 26: the heads found with [CLS] and [SEP] left in the comparison got a generic "some
    # heads are missing". Here that list is a right part of the answer, which a learner may also
    # find the right way (learner 22), so the first time it gets no doubt; the same list a
    # second time is told the slip, as a question, without naming or counting a missing head
    right, kept = right_heads(), right_heads(skip_special=False)
    assert kept and set(kept) < set(right)  # the bundled model: (0, 3) only
    first = check(kept).message
    assert "[CLS]" not in first and "missing" in first
    assert check(kept).message.startswith(first)  # at once again: the same message, no try
    check([(5, 0)])  # another list in between: kept comes back as a new try
    again = check(kept).message
    assert "would be right if the [CLS] and [SEP] positions counted" in again, again
    assert "which positions does the question ask" in again and "missing" in again
    assert not any(str(pair) in again for pair in set(right) - set(kept)), again
    assert str(len(right)) not in again.replace("1 of your pairs", "")
    other = next([pair] for pair in right if [pair] != kept)  # another right part, twice: no hint
    for answer in (other, [(5, 0)], other):
        assert "[CLS]" not in check(answer).message


def test_a_layer_norm_without_gamma_and_beta_or_over_the_whole_array_is_named(parts):
    # learner 26: both got "E differs from its LayerNorm by up to ...", unlike ddof=1 and axis 0
    w, word, pos, typ, _ = parts
    S = word + pos + typ
    bare = (S - S.mean(-1, keepdims=True)) / np.sqrt(S.var(-1, keepdims=True) + w.eps)
    fb = check_embeddings(S, bare)
    assert not fb.ok and "`summed` is right" in fb.message and "γ" in fb.message, fb.message
    assert "learned" in fb.message and "differs" not in fb.message
    whole = w.emb_gamma * (S - S.mean()) / np.sqrt(S.var() + w.eps) + w.emb_beta
    fb = check_embeddings(S, whole)
    assert not fb.ok and "whole (n, d) array" in fb.message and "last axis" in fb.message
    assert check_embeddings(S, ln(w, S)).ok


def test_a_layer_norm_with_gamma_and_beta_swapped_is_named(parts):
    # learner 28: γ and β traded places got "E differs from its LayerNorm by up to 16.7"
    w, word, pos, typ, _ = parts
    S = word + pos + typ
    x = (S - S.mean(-1, keepdims=True)) / np.sqrt(S.var(-1, keepdims=True) + w.eps)
    fb = check_embeddings(S, w.emb_beta * x + w.emb_gamma)
    assert not fb.ok and "scales each feature by β and shifts it by γ" in fb.message, fb.message
    assert "`summed` is right" in fb.message and "differs" not in fb.message


def test_exercise_2_tells_the_band_only_after_the_guess():
    # learner 28: "a guess passes from 0.04 below the measured cosine to 0.01 above it", printed
    # before the guess, told that careful reasoning tends to come out low; a right guess is told
    cells = json.loads(LESSON.read_text())["cells"]
    sources = ["".join(c["source"]) for c in cells]
    task = next(s for s in sources if "**2. Predict" in s)
    code = next(s for s in sources if "check_position_guess(guess)" in s)
    assert "_GUESS_TOLERANCE" not in code and "_GUESS_ABOVE" not in code
    assert "band" not in task and "below the measured" not in task and "accepts" in task
    # learner 33: how precise a guess must be is said, without the band's lopsided edges
    assert "Two decimals are plenty" in task and "a few hundredths" in task
    assert f"{_GUESS_TOLERANCE}" not in task and f"{_GUESS_ABOVE}" not in task
    fb = check_position_guess(0.93)
    assert fb.ok and f"from {_GUESS_TOLERANCE} below to {_GUESS_ABOVE} above" in fb.message


def test_exercise_2_shows_its_two_sentences_before_the_guess():
    # learner 33: named only as nb03.BANK_FIRST and nb03.BANK_RIVER, the sentences were seen only
    # by running the cell; the task's text shows them, as the constants hold them
    cells = json.loads(LESSON.read_text())["cells"]
    task = next("".join(c["source"]) for c in cells if "**2. Predict" in "".join(c["source"]))
    flat = " ".join(task.split())
    assert f'`nb03.BANK_FIRST`, "{BANK_FIRST}" (piece 1)' in flat, flat
    assert f'`nb03.BANK_RIVER`, "{BANK_RIVER}" (piece 5)' in flat, flat
    for text, piece in ((BANK_FIRST, 1), (BANK_RIVER, 5)):
        assert run_bert(text).tokens.index("bank") == piece


def test_exercise_2_says_plainly_to_reason_on_the_sum():
    # learner 29: "reasoning on the sum before it is what the checker expects" read as a riddle
    cells = json.loads(LESSON.read_text())["cells"]
    task = next("".join(c["source"]) for c in cells if "**2. Predict" in "".join(c["source"]))
    assert "You need not\nwork the LayerNorm out: reason on the plain sum" in task


def test_section_3_shows_that_two_equal_mean_lengths_come_from_different_rows():
    # learner 30: "position 0.47" and "token type 0.47" read as a copy-paste slip
    cells = json.loads(LESSON.read_text())["cells"]
    printed = next("".join("".join(o.get("text", [])) for o in c["outputs"]) for c in cells
                   if c["cell_type"] == "code" and "lengths = {" in "".join(c["source"]))
    means = dict(re.findall(r"length ‖row‖ of a (\w[\w ]*) embedding: (\d\.\d\d)", printed))
    assert set(means) == {"word", "position", "token type"}, printed
    assert "512 rows" in printed and "(2 rows" in printed  # each mean's own count and range
    same = means["position"] == means["token type"]
    assert ("for two different kinds of rows" in printed) == same, printed
