"""Checkers for notebook 09 (pre-train a tiny BERT): predict in how many runs one head gives at
least half of a masked verb's attention to a subject that is not the previous word (and in which
layer or layers), predict the effect of removing attractors from training, design a tiny BERT
with as many heads as fit in a parameter budget. Each checker computes what it checks and
answers any input with a message.
"""

from __future__ import annotations

import copy

import numpy as np
from transformers import BertConfig, BertForMaskedLM

from bertlib.exercises import (
    Feedback,
    as_answer_number,
    as_answer_whole,
    explained_tries,
    form_error,
    how_far_apart,
    not_answered,
)
from bertlib.lab.claims import chance_interval
from bertlib.tiny import grammar
from bertlib.tiny.agreement import build_tokenizer, make_sentence_set, plural_of, subset
from bertlib.tiny.mechanism import agreement_correct
from bertlib.tiny.pretrain import Recipe, tiny_config

__all__ = ["HEAD_SHARE", "subject_heads", "check_runs_prediction", "check_attractor_prediction",
           "check_design", "design_parameters", "attractor_accuracy", "ATTRACTOR_TEST",
           "ATTRACTOR_TRAINED", "OWN_TEST", "OWN_LEARNED",
           "DESIGN_BUDGET", "DESIGN_LAYERS", "DESIGN_HEAD_WIDTH"]

#: Held-out "pp" sentences the attractor checker measures on.
ATTRACTOR_TEST = 400
#: For a model whose config does not record its recipe (``config.bertlib_recipe``): at or above
#: this on those sentences' attractor verbs, it is taken as trained with attractors (the committed
#: runs, trained with them, score 0.85 or more). A model that records its recipe is judged by it.
ATTRACTOR_TRAINED = 0.75
#: A "subject head": one head gives at least this share of a masked verb's attention to its
#: subject, on the rows where the subject is not the previous word.
HEAD_SHARE = 0.5
#: Held-out sentences of the model's own training language (simple, comp, no phrases) and the
#: agreement accuracy it needs there before its attractor accuracy is judged.
OWN_TEST, OWN_LEARNED = 100, 0.8

#: The design task: a BERT for the grammar's vocabulary with this many layers, heads of this
#: width, and at most this many parameters.
DESIGN_LAYERS, DESIGN_HEAD_WIDTH, DESIGN_BUDGET = 3, 16, 150_000


def subject_heads(runs, share: float = HEAD_SHARE) -> list[tuple[int, int, float] | None]:
    """For each run (anything with a ``history`` dict, e.g. bertlib.tiny.runs.Run): (layer, head,
    share) of its strongest verb-to-subject head at the end of training, measured on the rows
    whose subject is not the previous word ("heads/subject_far" (T, L, H)), or None when that
    share is below ``share`` (no head does it)."""
    found = []
    for run in runs:
        final = np.asarray(run.history["heads/subject_far"][-1])  # (L, H)
        layer, head = (int(i) for i in np.unravel_index(final.argmax(), final.shape))
        found.append((layer, head, float(final[layer, head])) if final.max() >= share else None)
    return found


@explained_tries("section 4 (what a subject head must do, and what else could carry the number)")
def check_runs_prediction(guess, runs, guess_layer=None) -> Feedback:
    """Check a prediction of in how many of ``runs`` one head gives at least HEAD_SHARE of a
    masked verb's attention to a subject that is not the previous word (guess, a whole number),
    and optionally in which layer those heads sit (guess_layer: one layer, or a list of layers
    when they sit in several). Computed here from the runs' histories (:func:`subject_heads`),
    never taken from the learner. Both answers' forms are checked first, and a layer named with
    a guess of 0 runs is refused as self-contradictory. A wrong answer is told only which way the
    count is off and whether the layer guess is right: never the count, the runs or their heads
    (those come with a right answer); only its first tries are explained (explained_tries)."""
    try:
        heads, layers = subject_heads(runs), np.shape(runs[0].history["heads/subject_far"])[1]
    except (TypeError, KeyError, AttributeError, IndexError, ValueError):
        return form_error("runs must be the list of runs that bertlib.tiny.runs.load_runs() "
                          "returns (at least one, each with its history)")
    n = len(heads)
    guess = as_answer_whole(guess, "guess_runs (a number of runs)", 0, n,
                            todo=f"set guess_runs to the number of runs (of {n}) you expect to "
                                 f"have such a head, then run this cell")
    if isinstance(guess, Feedback):
        return guess
    said = _as_layers(guess_layer, layers)
    if isinstance(said, Feedback):
        return said
    if guess == 0 and said is not None:
        return form_error(f"guess_runs = 0 says no run has such a head, yet guess_layer names "
                          f"{_layers(said)}: with no head there is no layer. Set guess_layer = "
                          f"None, or raise guess_runs")
    found = {getattr(run, "name", f"run {k}"): h for k, (run, h) in enumerate(zip(
        runs, heads, strict=True)) if h is not None}
    k = len(found)
    truth = {h[0] for h in found.values()}
    right_layer = said is None or said == truth
    if guess == k and right_layer:
        where = ", ".join(f"{name}: L{h[0]}H{h[1]} {h[2]:.2f}" for name, h in found.items())
        if not k:
            return Feedback(True, f"0 of {n}, right: no run has one head doing it")
        if said is None:  # the layer is still to predict: the runs, not their heads
            return Feedback(True, f"{k} of {n}, right ({', '.join(found)}). Now predict their "
                                  f"layer too (guess_layer)")
        return Feedback(True, f"{k} of {n}, right, in {_layers(truth)}, as you said ({where})")
    count = (f"{guess} of {n}, right." if guess == k else f"not {guess} of {n}: " + (
        "fewer runs than you expected have one head doing it. " + (
            "Same recipe, other seeds: w" if n > 1 else "W") + "hat else could carry the "
        "subject's number to the verb?" if guess > k else
        "more runs than you expected have one head that looks at the subject: with the same "
        "recipe, training finds such a head more often than you thought."))
    if said is None:
        return Feedback(False, count.rstrip("."))
    layer = ("Your layer guess is right" if said == truth else  # with no head, never said
             f"Your layer guess ({_layers(said)}) is not where the heads sit (a layer-0 head can "
             f"find the subject from the words and their positions alone, a layer-1 head can "
             f"also use what layer 0 gathered; which one a run's training found is measured, "
             f"run by run)")
    return Feedback(False, f"{count} {layer}")


def _as_layers(answer, layers: int) -> frozenset[int] | Feedback | None:
    """guess_layer as a set of layers (None stays None: not predicted): one whole number in
    0..layers-1, or a list (tuple, set, 1-d array) of distinct ones; else the form's Feedback."""
    if answer is None:
        return None
    listed = isinstance(answer, list | tuple | set | frozenset) or (
        isinstance(answer, np.ndarray) and answer.ndim == 1)
    items = [as_answer_whole(x, "a layer", 0, layers - 1) for x in (
        answer if listed else [answer])]
    if not items or any(isinstance(x, Feedback) for x in items):
        return form_error(f"guess_layer must be a layer, a whole number in 0..{layers - 1}, or "
                          f"a list of them for heads in several layers (e.g. [0, 1]); got "
                          f"{answer!r}")
    if len(set(items)) < len(items):
        return form_error(f"guess_layer names a layer twice ({answer!r}): name each once")
    return frozenset(items)


def _layers(layers) -> str:
    """"layer 1" or "layers 0 and 1"."""
    names = [str(x) for x in sorted(layers)]
    return f"layer {names[0]}" if len(names) == 1 else (
        f"layers {', '.join(names[:-1])} and {names[-1]}")


@explained_tries("section 6 (what agreeing with the noun just before earned the model)")
def check_attractor_prediction(guess, model) -> Feedback:
    """Check a predicted accuracy (0..1) of ``model`` (trained without attractors) on main verbs
    right after a prepositional phrase whose noun has the other number (the noun just before the
    verb has the other number than the subject, so copying it is always wrong there); the
    accuracy is measured here on those verbs of ATTRACTOR_TEST held-out "pp" sentences, never
    taken from the learner. A model whose recorded
    recipe (``config.bertlib_recipe``, written by pretrain.train) has attractors is refused; one
    without a recorded recipe is refused when it scores ATTRACTOR_TRAINED or more. The guess is
    judged first by its side of a coin, then by its distance (:func:`_attractor_verdict`); a
    wrong guess is never told the measured value, and only its first tries are explained."""
    guess = as_answer_number(guess, "guess_accuracy", 0, 1,
                             todo="write your predicted accuracy (a number between 0 and 1) in "
                                  "guess_accuracy before training")
    if isinstance(guess, Feedback):
        return guess
    if model is None:
        return not_answered("train the attractor-free model and assign it to trained")
    if not isinstance(model, BertForMaskedLM) or model.config.vocab_size != _vocab_size():
        return form_error(f"trained must be the BertForMaskedLM you trained (made by "
                               f"pt.new_model for this vocabulary), got {type(model).__name__}")
    recipe = getattr(model.config, "bertlib_recipe", None) or {}
    if recipe and (recipe.get("max_pp", 0) > 0
                   or set(recipe.get("constructions", ())) - {"simple", "comp"}):
        return form_error(f"this model was trained on {recipe.get('constructions')} with "
                               f"max_pp={recipe.get('max_pp')}: with attractors. Train one on "
                               f"('simple', 'comp') with max_pp=0 and give that one")
    tok = build_tokenizer()
    own = make_sentence_set(tok, grammar.generate(OWN_TEST, ("simple", "comp"), seed=2,
                                                  split="test", max_pp=0))
    learned = float(agreement_correct(model, own).mean())
    if learned < OWN_LEARNED:
        return form_error(f"your model gets only {learned:.2f} of the verbs right on its own "
                               f"kind of sentences (simple, comp; {OWN_LEARNED} needed): it has "
                               f"not learned agreement yet, so its attractor accuracy would tell "
                               f"nothing. Train it for more steps (notebook 09's recipe uses "
                               f"{Recipe().steps}) and check again")
    measured, n = attractor_accuracy(model)
    if not recipe and measured >= ATTRACTOR_TRAINED:  # no recipe recorded: judged by its score
        return form_error(f"this model gets {measured:.2f} of the attractor verbs right: it "
                               f"looks trained with attractors. Give the model you trained on "
                               f"('simple', 'comp') with max_pp=0")
    return _attractor_verdict(guess, measured, n)


def attractor_accuracy(model) -> tuple[float, int]:
    """``model``'s agreement accuracy on the main verbs of ATTRACTOR_TEST held-out "pp" sentences
    whose phrase's noun has the other number than the subject, and how many verbs that is."""
    attractor_set = make_sentence_set(build_tokenizer(), grammar.generate(
        ATTRACTOR_TEST, ("pp",), seed=2, split="test"))
    subject_plural, nearest_plural, _ = plural_of(attractor_set)
    hard = subject_plural != nearest_plural  # after a phrase whose noun has the other number
    return float(agreement_correct(model, subset(attractor_set, hard)).mean()), int(hard.sum())


def _attractor_verdict(guess: float, measured: float, n: int) -> Feedback:
    """Judge a guessed accuracy against the one ``measured`` on ``n`` attractor verbs as the
    exercise teaches it: first the side of a coin (below, within or above the range of a coin's
    accuracy on n verbs, claims.chance_interval; a guess of 0.5 says "a coin"), then how far
    (within 0.1). A guess on another side fails however near, so 0.5 does not pass a model
    measured below a coin's range. Only a right guess is told the measured value; a wrong one
    hears the side of a coin the model is on and which way its guess is off, in bands (by 0.1 to
    0.3, by more than 0.3), never the coin range's bounds (a guess just beyond a bound would be
    within 0.1 of many values), so that retyping cannot find the value."""
    lo, hi = chance_interval(n)
    side = "below" if measured < lo else "above" if measured > hi else "within"
    said = "below" if guess < 0.5 else "above" if guess > 0.5 else "within"
    coin = f"the range of a coin's accuracy on {n} verbs"  # its bounds only once guessed right
    if side != "within" and said != side:
        why = ("which noun stands right before these verbs, and what did agreeing with the noun "
               "just before earn the model in its training?" if side == "below" else "what in "
               "its training could have pointed to the subject rather than to the noun just "
               "before?")
        return Feedback(False, f"your guess {guess:.2f} puts the model "
                               f"{'at' if said == 'within' else said} a coin's 0.5, but it "
                               f"scores {side} {coin}: {why}")
    miss = abs(guess - round(measured, 2))
    where = "a coin's range" if side == "within" else f"{side} a coin's 0.5, as the model"
    if miss <= 0.1 + 1e-9:  # judged on the numbers as printed: 0.30 against 0.40 is within
        return Feedback(True, f"measured {measured:.2f} on {n} verbs, {side} {coin} "
                              f"({lo:.2f}-{hi:.2f} in 95 % of draws); your guess "
                              f"{guess:.2f} is within 0.1 of it ({where}): good intuition")
    hint = ("what does a model that never saw a noun between subject and verb do when one "
            "appears?" if guess > measured else "it follows the noun next to the verb less "
            "often than you expected: what in its training could also point to the subject?")
    return Feedback(False, f"your guess {guess:.2f} is "
                           f"{how_far_apart(guess, round(measured, 2), (0.1, 0.3))} "
                           f"({'optimistic' if guess > measured else 'pessimistic'}; the model "
                           f"scores {side} {coin}): {hint}")


def _vocab_size() -> int:
    return build_tokenizer().get_vocab_size()


def design_parameters(vocab_size: int, heads: int, like: BertConfig | None = None) -> int:
    """Parameters of BertForMaskedLM with DESIGN_LAYERS layers and ``heads`` heads of width
    DESIGN_HEAD_WIDTH for a vocabulary of ``vocab_size`` tokens (counted on a built model):
    tiny_config's model, or ``like`` (a BertConfig) with its heads, hidden and feed-forward
    widths set to those, everything else (positions, tied embeddings) kept."""
    if like is None:
        config = tiny_config(vocab_size, DESIGN_LAYERS, heads, heads * DESIGN_HEAD_WIDTH)
    else:
        config = copy.deepcopy(like)
        config.num_attention_heads, config.hidden_size = heads, heads * DESIGN_HEAD_WIDTH
        config.intermediate_size = 4 * config.hidden_size
    return sum(p.numel() for p in BertForMaskedLM(config).parameters())


def check_design(config) -> Feedback:
    """Check a BertConfig for the design task: DESIGN_LAYERS layers, heads of width
    DESIGN_HEAD_WIDTH, as many heads as fit in DESIGN_BUDGET parameters of BertForMaskedLM, the
    grammar's vocabulary (tokenizer of bertlib.tiny.agreement), tiny_config's feed-forward width
    (4 · hidden). The most heads that fit is computed here by building the models."""
    if config is None:
        return not_answered("build a config with bertlib.tiny.pretrain.tiny_config and assign it")
    if isinstance(config, BertForMaskedLM):
        config = config.config
    if not isinstance(config, BertConfig):
        return Feedback(False, f"config must be a transformers BertConfig (tiny_config returns "
                               f"one), got {type(config).__name__}")
    vocab = build_tokenizer().get_vocab_size()
    if config.vocab_size != vocab:
        return Feedback(False, f"vocab_size must be the tokenizer's {vocab}, got "
                               f"{config.vocab_size}")
    if config.num_hidden_layers != DESIGN_LAYERS:
        return Feedback(False, f"the task asks for {DESIGN_LAYERS} layers, got "
                               f"{config.num_hidden_layers}")
    heads = config.num_attention_heads
    if not isinstance(heads, int) or heads < 1:
        return Feedback(False, f"num_attention_heads is {heads!r}: a layer needs at least one "
                               f"head (heads = hidden / {DESIGN_HEAD_WIDTH})")
    width = config.hidden_size / heads
    if width != DESIGN_HEAD_WIDTH:
        return Feedback(False, f"each head has hidden / heads = {config.hidden_size} / "
                               f"{config.num_attention_heads} = {width:g} dimensions; the task "
                               f"asks for {DESIGN_HEAD_WIDTH}")
    if config.intermediate_size != 4 * config.hidden_size:  # tiny_config's feed-forward width
        return Feedback(False, f"feed-forward width {config.intermediate_size}: the task's models "
                               f"are tiny_config's, 4 · hidden = {4 * config.hidden_size} (a "
                               f"narrower block would buy heads the recipe does not train)")
    n = sum(p.numel() for p in BertForMaskedLM(config).parameters())
    if n > DESIGN_BUDGET:
        return Feedback(False, f"{n:,} parameters: {n - DESIGN_BUDGET:,} over the budget of "
                               f"{DESIGN_BUDGET:,} (which part grows fastest with hidden?)")
    more = design_parameters(vocab, heads + 1, like=config)  # the learner's own model, one more
    if more <= DESIGN_BUDGET:
        return Feedback(False, f"{n:,} parameters fit, but so would one more head ({more:,}): "
                               f"the task asks for as many heads as the budget allows")
    return Feedback(True, f"{n:,} parameters, {DESIGN_BUDGET - n:,} under the budget; one more "
                          f"head would need {more:,}. {heads} heads of width "
                          f"{DESIGN_HEAD_WIDTH} is the most that fits")
