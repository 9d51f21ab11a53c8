"""Checkers for notebook 03's "Try it" exercises, on the BERT that ``load_bert()`` returns
(the answer is computed on the model in use); ``None`` gets "not answered yet", never a raise.

1. :func:`check_embeddings` (reproduce): S = W_word[t] + W_pos[0…n−1] + W_type[seg] of a sentence
   *pair* and E = LayerNorm(S), both (n, d) (S too, so ``hidden_states[0]`` alone cannot pass).
2. :func:`check_position_guess` (predict, then check): the input cosine of *bank* at 2 positions.
3. :func:`check_heads` (reproduce): every (layer, head) in which two words each give the other
   their largest weight, [CLS] and [SEP] left out.
4. :func:`check_bank_sentence` (design): a sentence whose final *bank* is closer to the river
   *bank* than to the money *bank* (as a context-free *bank* is not), without river words.
Each names the slips it knows; 2 and 3 explain only the first three wrong tries.
"""

from __future__ import annotations as _annotations

import re as _re
from contextlib import suppress as _suppress

import numpy as _np

from bertlib.exercises import Feedback as _Feedback
from bertlib.exercises import as_answer_array as _as_answer_array
from bertlib.exercises import as_answer_number as _as_answer_number
from bertlib.exercises import as_answer_pairs as _as_answer_pairs
from bertlib.exercises import count_try as _count_try
from bertlib.exercises import embedding_slips as _slips
from bertlib.exercises import explained_tries as _explained_tries
from bertlib.exercises import form_error as _form_error
from bertlib.exercises import how_far_apart as _how_far_apart
from bertlib.exercises import not_answered as _unanswered
from bertlib.exercises import wrong_tries as _wrong_tries
from bertlib.exercises.ladder import climb as _climb
from bertlib.hf.loading import load_bert as _load_bert
from bertlib.hf.models import attention_maps as _attention_maps
from bertlib.hf.models import encode as _encode
from bertlib.hf.models import run_bert as _run_bert
from bertlib.paper.attention import cosine as _cosine

#: Public: the checkers and the texts the lesson and its solutions name. What computes an answer
#: (the heads, the cosine, the band around it) is private, so Tab on ``nb03.`` does not offer it.
__all__ = ["EMBED_PAIR", "HEADS_TEXT", "BANK_RIVER", "BANK_FIRST", "BANK_NEUTRAL",
           "check_embeddings", "check_position_guess", "check_heads", "check_bank_sentence"]

#: Exercise 1's input: a pair, so the token types are 0 for the first sentence and 1 after it.
EMBED_PAIR = ("The kettle boiled.", "She poured the tea.")
HEADS_TEXT = "The quick brown fox jumps over the lazy dog"
#: Exercise 3: fox and dog, five pieces apart, each looking most at the other: no previous- or
#: next-token head links them, so the lesson's pictures (section 5, the explorer) do not answer it.
_QUERY, _TARGET = "fox", "dog"
#: The two senses of *bank*, as in the lesson's section 6 (bank is piece 5 in both).
BANK_RIVER = "We sat on the bank of the river and watched the water."
_BANK_MONEY = "She went to the bank to ask for a loan."
#: Exercise 2: *bank* as piece 1, to compare with piece 5 of BANK_RIVER at the input.
BANK_FIRST = "Bank holidays are long."
#: A guess up to this far *below* the measured cosine counts as right: one reasoned from section
#: 3's printed means (row lengths, cosine 4 apart): the solution's 0.93, 0.92 without the type row,
#: and (learner 33) either written with one decimal, 0.9.
_GUESS_TOLERANCE = 0.06
#: A guess up to this far *above* the measured cosine counts as right: a right reasoning rounded
#: up, not 0.97 (rows four apart taken to be as alike as neighbours, 0.85) nor "say 0.99".
_GUESS_ABOVE = 0.01
#: A too-high guess this close to 1 reads as "the same vector": it gets the "why below 1?" nudge.
_NEAR_ONE = 0.98
#: What a wrong guess is told to reason on: the second wrong try gets the first, the third both.
_POINTERS = ("which rows make the two E differ, and how long is each next to the word row (section "
             "3's row lengths)?", "How many places apart are the two pieces, and how alike are "
             "position rows that far apart (section 3's cosines of positions k apart)?")
#: Exercise 4: a river-side margin below this still passes, and the message calls it narrow.
_NARROW_MARGIN = 0.02
#: Exercise 4's baseline, *bank* with no context: a design must end nearer the river bank.
BANK_NEUTRAL = "There is a bank."
#: Exercise 4 bans words containing these, the river sentences' (copying is no design; riverbank).
_FORBIDDEN = ("river", "water", "stream")


def _not_answered(what: str) -> _Feedback:
    return _unanswered(f"{what}, then run this cell again")


def _model(model):  # the model in use: the given one, else load_bert()'s
    return model or _load_bert()


def _check_sum(S, variants: dict, pieces: tuple) -> _Feedback | None:
    """Feedback on the sum S, or None if it is right."""
    found = _slips.match(S, variants)
    if found == "S right":
        return None
    if found == "E right":
        return _Feedback(False, "`summed` is already normalised (it equals E): it is the sum of "
                                "the three embeddings, before the LayerNorm")
    if found:  # where the token types are: named from the second such slip on (a new sum:
        key = ("; print the keys of what `encode` returns for a pair: one of them says which "
               "sentence each piece belongs to") * (found[2:] in ("all segment A", "no token type")
                                                    and _climb("nb03.segments", S)[0] > 1)  # the
        # same sum checked again gets the same message)
        return _Feedback(False, f"`summed`: {_slips.EMBED_HINTS[found[2:]]}{key}")
    worst = float(_np.abs(S - variants["right"][0]).max())
    return _Feedback(False, f"`summed` differs from word + position + token type by up to "
                            f"{worst:.3g}{_slips.first_wrong_piece(S, variants, pieces)}")


def check_embeddings(summed, E, pair: tuple[str, str] = EMBED_PAIR, model=None) -> _Feedback:
    """Check a learner's sum ``summed`` and embedding output ``E``, both (n, d), for ``pair``.

    summed = W_word[t] + W_pos[0…n−1] + W_type[seg], E = LayerNorm(summed), with t the piece ids
    and seg the token types (0 up to the first [SEP], 1 after it). model: None = ``load_bert()``.
    """
    if summed is None and E is None:
        return _not_answered("compute `summed` (the three embeddings added) and `E_pair` (its "
                             "LayerNorm), one row per word piece of the pair")
    if summed is None or E is None:
        which = "`E_pair` (its LayerNorm)" if E is None else "`summed` (the three embeddings added)"
        return _not_answered(f"{which} is still None: compute it too")
    variants, pieces = _slips.embedding_variants(pair, model)
    shape = variants["right"][0].shape
    why = " (one row per word piece, [CLS] and both [SEP] included)"
    summed = _as_answer_array(summed, "summed", shape, layout="(n, d)", why=why)
    E = _as_answer_array(E, "E", shape, layout="(n, d)", why=why)
    if isinstance(form := summed if isinstance(summed, _Feedback) else E, _Feedback):
        return form
    wrong = _check_sum(summed, variants, pieces)
    if wrong is not None:
        return wrong
    found = _slips.match(E, variants)
    if found == "E right":
        return _Feedback(True, f"correct: the sum and E match BERT's (within {_slips.ATOL:g}) for "
                               f"all {E.shape[0]} pieces")
    if found == "S right":
        return _Feedback(False, "`summed` is right, but E equals it: the LayerNorm is missing")
    if found is not None and found[2:] in _slips.LAYER_NORM_SLIPS:
        return _Feedback(False, f"`summed` is right, but {_slips.EMBED_HINTS[found[2:]]}")
    worst = float(_np.abs(E - variants["right"][1]).max())
    return _Feedback(False, f"`summed` is right, but E differs from its LayerNorm by up to "
                            f"{worst:.3g}: normalise each token over its d features, with γ, β, ε")


def _bank_vector(text: str, layer: int, model=None) -> _np.ndarray:
    run = _run_bert(text, model=_model(model))
    return run.hidden_states[layer, run.tokens.index("bank")].astype(_np.float64)


def _bank_cosine(layer: int = 0, model=None) -> float:
    """cos(u, v) = u·v / (‖u‖ ‖v‖) of *bank* in BANK_FIRST (piece 1) and BANK_RIVER (piece 5),
    after ``layer`` layers (0 = the embedding output)."""
    return _cosine(_bank_vector(BANK_FIRST, layer, model), _bank_vector(BANK_RIVER, layer, model))


@_explained_tries("section 3's printed row lengths and cosines of positions k apart")
def check_position_guess(guess, model=None) -> _Feedback:
    """Check a guess of *bank*'s input cosine (:func:`_bank_cosine`, layer 0), measured on the
    model. Right from _GUESS_TOLERANCE below it to _GUESS_ABOVE above: reasoned from section 3's
    means (lengths, the cosine of positions 4 apart), 0.93 passes for the bundled 0.956, 0.97 does
    not. Only the first wrong try is told which way and roughly how far (else guesses could halve
    in); each later one adds one pointer (_POINTERS) to what to reason on. A str that reads as a
    number ("0.9") counts as that number, as in notebook 02."""
    with _suppress(ValueError):  # learner 31: 02's check_cost_guess reads "12", so this reads "0.9"
        guess = float(guess) if isinstance(guess, str) else guess
    guess = _as_answer_number(guess, "your guess (a cosine)", -1.0, 1.0,
                              todo="write your guess, a number between -1 and 1, in `guess`, "
                                   "then run this cell again")
    if isinstance(guess, _Feedback):
        return guess
    measured = _bank_cosine(0, model)
    off = guess - measured
    if -_GUESS_TOLERANCE <= off <= _GUESS_ABOVE:
        return _Feedback(True, f"close enough (from {_GUESS_TOLERANCE} below to {_GUESS_ABOVE} "
                               f"above): the cosine is {measured:.3f} (you said {guess:.3f}, "
                               f"{abs(off):.3f} {'above' if off > 0 else 'below'}). Same word "
                               "piece, but a different position embedding: similar, not the same")
    step = _wrong_tries(check_position_guess) + 1  # this try, if wrong (the same answer again
    why = " Before another number, reason it out: " * (step > 1) + " ".join(  # is no new try)
        _POINTERS[:step - 1])
    if guess > 0.999 or guess < 0:  # "identical" or "opposite": ideas to unlearn, on any try
        idea = ("identical vectors would give 1; what else does E add?" if guess > 0 else "a "
                "negative cosine: vectors pointing apart, yet both share word and type rows.")
        return _Feedback(False, f"{idea}{why}")
    if step > 1:  # a second number: no direction (no halving)
        return _Feedback(False, f"not within the band (you said {guess:.3f}).{why}")
    if off > 0 and guess >= _NEAR_ONE:  # "nearly the same word": right idea, reasoning skipped
        hint = "close to 1, as if the position row barely counted: why below 1?"
    else:
        hint = ("the position rows differ more than you assumed." if off > 0 else
                "the shared word row outweighs the position row more than you assumed.")
    return _Feedback(False, f"{_how_far_apart(guess, measured)} (you said {guess:.3f}): "
                            f"{hint}")  # a coarse size, never the value nor the band's edges


def _top_keys(query: str, text: str, skip_special: bool, model,
              target: str | None = None) -> tuple[list[str], _np.ndarray]:
    """(tokens, (layers, heads) index of the key that ``query`` weights most in each head);
    ``query`` and ``target`` (if given) must be word pieces of ``text``."""
    tokens, A = _attention_maps(text, model=_model(model))
    for word in (query, target or query):
        if word not in tokens:
            raise ValueError(f"{word!r} is not a word piece of {text!r}: {tokens}")
    row = A[:, :, tokens.index(query), :].copy()  # (layers, heads, n)
    if skip_special:
        row[..., [t in ("[CLS]", "[SEP]") for t in tokens]] = -1.0
    return tokens, row.argmax(axis=-1)


def _heads_where_top(query: str = _QUERY, target: str = _TARGET, text: str = HEADS_TEXT,
                    skip_special: bool = True, model=None) -> list[tuple[int, int]]:
    """Every 0-based (layer, head) whose largest weight from ``query`` goes to ``target``.

    skip_special: leave [CLS] and [SEP] out of the comparison (they often take most weight).
    """
    tokens, top = _top_keys(query, text, skip_special, model, target)
    hits = _np.argwhere(top == tokens.index(target))
    return [(int(layer), int(head)) for layer, head in hits]


def _heads_both_ways(a: str = _QUERY, b: str = _TARGET, text: str = HEADS_TEXT,
                    skip_special: bool = True, model=None) -> list[tuple[int, int]]:
    """Every (layer, head) in which ``a`` gives ``b`` its largest weight and ``b`` gives ``a``
    its largest (exercise 3: two rows, as attention need not be symmetric)."""
    return sorted(set(_heads_where_top(a, b, text, skip_special, model))
                  & set(_heads_where_top(b, a, text, skip_special, model)))


def _heads_slip(answer: set, expected: set, query: str, target: str, model) -> _Feedback | None:
    """Feedback for (head, layer) order, a pair naming no head (a form error), one way only."""
    config = _model(model).model.config
    L, H = config.num_hidden_layers, config.num_attention_heads
    outside = sorted((a, b) for a, b in answer if not (0 <= a < L and 0 <= b < H))
    if outside:
        return _form_error(f"{outside[0]} names no head: each pair is (layer, head), layers run "
                           f"0..{L - 1} and heads 0..{H - 1} ({L} layers of {H} heads)")
    ways = {(x, y): set(_heads_where_top(x, y, model=model)) for x, y in ((query, target),
                                                                          (target, query))}
    for (x, y), one_way in ways.items():
        if answer == one_way != expected:  # one row read: the other word's row left out
            return _Feedback(False, f"your list is the heads in which {x!r} gives {y!r} its "
                             f"largest weight; the question asks both ways: {y!r} giving {x!r} its "
                             "largest too, in the same head (the two rows are not each other's "
                             "mirror)")
    if answer == set.union(*ways.values()) != expected:
        return _Feedback(False, "your list holds the heads in which either word looks most at the "
                         "other; the question asks for the heads in which both do")
    return None


@_explained_tries("section 5 and the exercise (both words' rows in every head, [CLS], [SEP] out)")
def check_heads(heads, query: str = _QUERY, target: str = _TARGET, model=None) -> _Feedback:
    """Check a learner's list of (layer, head) pairs, 0-based: the heads in which each word gives
    the other its largest weight, [CLS] and [SEP] left out."""
    pairs = _as_answer_pairs(heads, "(layer, head)", "[(0, 2), (3, 11)]", "head", todo="put "
                             "your list of (layer, head) pairs in `your_heads`, then run this cell "
                             "again")
    if isinstance(pairs, _Feedback):
        return pairs
    answer, expected = set(pairs), set(_heads_both_ways(query, target, model=model))
    if answer == expected:
        return _Feedback(True, f"correct: in {len(expected)} head(s), {sorted(expected)}, "
                               f"{query!r} and {target!r} each give the other their largest weight "
                               "(after [CLS]/[SEP]). "
                               + _link_size(sorted(expected), query, target, model))
    slip = _heads_slip(answer, expected, query, target, model)
    if slip is not None:
        return slip
    kept = set(_heads_both_ways(query, target, skip_special=False, model=model))  # [CLS], [SEP] in
    if not answer and not kept:  # learner 29: with [CLS]/[SEP] compared, no head fits
        return _Feedback(False, "your list is empty: before you settle on no head, did you "  # l30
                                "leave [CLS] and [SEP] in the comparison? The question compares "
                                "the words' weights with those two positions left out"
                                + _CONVENTION)
    # learner 22: the hint from this list's second judging on (checked twice in a row, it gets
    again = bool(answer) and answer == kept and _count_try("nb03.specials") > 1  # the same reply)
    return _Feedback(False, _heads_wrong(answer, expected, (query, target), model) + again * (
        "; and your list, again, is exactly the heads that would be right if the [CLS] and [SEP] "
        "positions counted: which positions does the question ask you to compare?") + _CONVENTION)


def _link_size(heads: list, a: str, b: str, model) -> str:
    """What the link weighs in each right head: the pair's weights beside what [CLS] takes
    (learner 31: in the bundled model's one head, 0.06 to each other, 0.8-0.9 to [CLS])."""
    tokens, A = _attention_maps(HEADS_TEXT, model=_model(model))
    i, j, cls = tokens.index(a), tokens.index(b), tokens.index("[CLS]")
    parts, sink = [], True
    for layer, head in heads:
        w = A[layer, head]
        floor = float(w[:, cls].min())  # the least any token of the sentence gives [CLS]
        sink &= floor > 0.5 and max(w[i, j], w[j, i]) < min(w[i, cls], w[j, cls])
        parts.append(f"in ({layer}, {head}) {a!r} gives {b!r} {w[i, j]:.3f} and [CLS] "
                     f"{w[i, cls]:.3f}; {b!r} gives {a!r} {w[j, i]:.3f} and [CLS] {w[j, cls]:.3f}; "
                     f"every token there gives [CLS] at least {floor:.3f}")
    verdict = (" Every word there sends most of its weight to [CLS] (a [CLS]/[SEP] head, as in "
               "notebook 02), and the 'link' is only the largest piece of what [CLS] leaves: one "
               "head picked after the fact, as section 5 warns, not a sign that the model links "
               "the two words") if sink else (
               " Weigh the link against [CLS]'s share before reading it as a relation (section 5)")
    return ("But look at the weights: " if sink else "The weights: ") + "; ".join(parts) + "." \
        + verdict


#: What every wrong list of check_heads is told, whatever it holds (never which pairs it fixes).
_CONVENTION = " (layers and heads count from 0; each pair is (layer, head), in that order)"


def _heads_wrong(answer: set, expected: set, words: tuple[str, str], model) -> str:
    """Which pairs of a short list are wrong (where each word looks); never which are missing."""
    missing, extra, right = expected - answer, sorted(answer - expected), answer & expected
    if len(answer) > 6:  # pair by pair, a long list would name the right ones by elimination
        return (f"not the answer: a list of {len(answer)} pairs is checked only as a whole; keep "
                f"only the heads where you saw each of {words} give the other its largest weight")
    parts = [f"{len(right)} of your pairs {'is' if len(right) == 1 else 'are'} right"] * bool(right)
    if extra:
        (tokens, top), (_, back) = (_top_keys(w, HEADS_TEXT, True, model) for w in words)
        where = [f"{pair}, where {words[0]!r} weights {tokens[top[pair]]!r} most and {words[1]!r} "
                 f"weights {tokens[back[pair]]!r} most" for pair in extra]
        parts.append(f"not right: {'; '.join(where)}")
    if missing:  # never how many: that would tell how many heads to look for
        parts.append("some right heads are missing from your list" if answer else "your list is "
                     "empty: before you settle on no head, look at both words' rows in every head")
    return "; ".join(parts)


def _bank_margin(text: str, model=None) -> tuple[float, float]:
    """(cos to the money bank, cos to the river bank) of *bank* in ``text`` after the last layer."""
    last = (bert := _model(model)).model.config.num_hidden_layers
    mine = _bank_vector(text, last, bert)
    return tuple(_cosine(mine, _bank_vector(t, last, bert)) for t in (_BANK_MONEY, BANK_RIVER))


def _river_lean(text: str, model=None) -> float:
    """cos to the river bank − cos to the money bank of *bank* in ``text``, after the last layer."""
    to_money, to_river = _bank_margin(text, model)
    return to_river - to_money


def _sentence_problem(text, model) -> _Feedback | None:
    if not isinstance(text, str):
        return _Feedback(False, f"the answer should be a sentence (a str), got "
                                f"{type(text).__name__}")
    try:
        pieces = _encode(text, model=_model(model))["input_ids"][0].tolist()
    except ValueError as error:  # empty or too long (its advice to truncate is not for here)
        said = str(error).split(", or pass truncate")[0]
        return _Feedback(False, said if "empty" in said else f"{said}; a line or two is plenty")
    tokens = _model(model).tokenizer.convert_ids_to_tokens(pieces)
    words = sorted(set(_re.findall(r"[a-z]+", text.lower())))
    used = [f"{word} (it contains {ban!r})" if word != ban else word
            for word in words for ban in _FORBIDDEN if ban in word]
    if used and ("bank" in tokens or any("bank" in word for word in words)):  # riverbank
        return _Feedback(False, f"without any word that contains {', '.join(_FORBIDDEN)} (the "
                                "model reads 'riverbank' as river + ##bank, so the river word "
                                f"is still there): yours uses {', '.join(used)}")
    if "bank" not in tokens:
        return _Feedback(False, f"your sentence needs the word piece 'bank'; its pieces are "
                                f"{tokens}")
    if tokens.count("bank") > 1:
        return _Feedback(False, f"your sentence has {tokens.count('bank')} banks; the check "
                                "measures one bank, so keep a single 'bank' and let the other "
                                "words say which kind it is")
    return None


def check_bank_sentence(text, model=None) -> _Feedback:
    """Check a designed sentence: its *bank* after the last layer must be closer (cosine) to
    BANK_RIVER's than to _BANK_MONEY's (and, should BANK_NEUTRAL's already lean that way, further
    than it), without any word that contains a word of _FORBIDDEN."""
    if text is None:
        return _not_answered("write your sentence in `my_sentence`")
    problem = _sentence_problem(text, model)
    if problem is not None:
        return problem
    to_money, to_river = _bank_margin(text, model)
    lean, neutral = to_river - to_money, _river_lean(BANK_NEUTRAL, model)
    numbers = f"cos to the river bank {to_river:.3f}, to the money bank {to_money:.3f}"
    if lean > max(0.0, neutral):
        narrow = ": a narrow win; can you widen it?" if lean < _NARROW_MARGIN else ""
        return _Feedback(True, f"done: {numbers}, a margin of {lean:.3f} to the river side{narrow}")
    where, side = ("ahead" if lean > 0 else "behind"), ("river" if neutral > 0 else "money")
    over = "further to the river side than that" if neutral > 0 else "over, nearer the river bank"
    return _Feedback(False, f"not yet: {numbers}, so the river side is {where} by {abs(lean):.2g}; "
                            f"with no context ({BANK_NEUTRAL!r}) bank leans to the {side} side by "
                            f"{abs(neutral):.3f}: pull it {over}. Which words go with a bank you "
                            "can sit on?")
