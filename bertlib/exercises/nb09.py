"""Checkers for notebook 09 (pre-train a tiny BERT): predict in how many runs one head gives at
least half of a masked verb's attention to a subject that is not the previous word (and in which
layer or layers), predict the effect of removing attractors from training, design a tiny BERT
with as many heads as fit in a parameter budget. Each checker computes what it checks and
answers any input with a message.
"""

from __future__ import annotations

import numpy as np
from transformers import BertConfig, BertForMaskedLM

from bertlib.exercises import (
    Feedback,
    as_answer_number,
    as_answer_whole,
    form_error,
    not_answered,
)
from bertlib.lab.claims import chance_interval
from bertlib.tiny import grammar
from bertlib.tiny.agreement import build_tokenizer, make_sentence_set, plural_of, subset
from bertlib.tiny.mechanism import agreement_correct
from bertlib.tiny.pretrain import tiny_config

__all__ = ["HEAD_SHARE", "subject_heads", "check_runs_prediction", "check_attractor_prediction",
           "check_design", "design_parameters", "ATTRACTOR_TEST", "ATTRACTOR_TRAINED", "OWN_TEST",
           "OWN_LEARNED",
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


def check_runs_prediction(guess, runs, guess_layer=None) -> Feedback:
    """Check a prediction of in how many of ``runs`` one head gives at least HEAD_SHARE of a
    masked verb's attention to a subject that is not the previous word (guess, a whole number),
    and optionally in which layer those heads sit (guess_layer: one layer, or a list of layers
    when they sit in several). Computed here from the runs' histories (:func:`subject_heads`),
    never taken from the learner. Both answers' forms are checked first; a message reveals only
    what was predicted (a count gives no layer away), and its hints hold whatever the runs."""
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
    found = {getattr(run, "name", f"run {k}"): h for k, (run, h) in enumerate(zip(
        runs, heads, strict=True)) if h is not None}
    k = len(found)
    if guess == k:
        count = f"{k} of {n}, right" + (f" ({', '.join(found)})." if k else ".")
    else:
        count = f"{k} of {n}, not {guess}: " + (
            "fewer runs than you expected have one head doing it. Same recipe, other seeds: "
            "what else could carry the subject's number to the verb?" if guess > k else
            "more runs than you expected found one head that looks at the subject: with the "
            "same recipe, training finds such a head more often than you thought.")
    if said is None:
        more = " Now predict their layer too (guess_layer)" if guess == k and k else ""
        return Feedback(guess == k, (count + more).rstrip("."))
    if not k:
        return Feedback(guess == k, f"{count} With no such head there is no layer to judge")
    truth = {h[0] for h in found.values()}
    where = ", ".join(f"{name}: L{h[0]}H{h[1]} {h[2]:.2f}" for name, h in found.items())
    layer = (f"In {_layers(truth)}, as you said" if said == truth else
             f"The head{'s sit' if k > 1 else ' sits'} in {_layers(truth)}, not {_layers(said)} "
             f"(a layer-0 head can find the subject from the words and their positions alone, "
             f"a layer-1 head can also use what layer 0 gathered; which one a run's training "
             f"found is measured, run by run)")
    return Feedback(guess == k and said == truth, f"{count} {layer} ({where})")


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


def check_attractor_prediction(guess, model) -> Feedback:
    """Check a predicted accuracy (0..1) of ``model`` (trained without attractors) on main verbs
    right after a prepositional phrase whose noun has the other number (the noun just before the
    verb has the other number than the subject, so copying it is always wrong there); the
    accuracy is measured here on those verbs of ATTRACTOR_TEST held-out "pp" sentences, never
    taken from the learner. A model whose recorded
    recipe (``config.bertlib_recipe``, written by pretrain.train) has attractors is refused; one
    without a recorded recipe is refused when it scores ATTRACTOR_TRAINED or more. The guess is
    judged first by its side of a coin, then by its distance (:func:`_attractor_verdict`)."""
    guess = as_answer_number(guess, "guess_accuracy", 0, 1,
                             todo="write your predicted accuracy (a number between 0 and 1) in "
                                  "guess_accuracy before training")
    if isinstance(guess, Feedback):
        return guess
    if model is None:
        return not_answered("train the attractor-free model and assign it to trained")
    if not isinstance(model, BertForMaskedLM) or model.config.vocab_size != _vocab_size():
        return Feedback(False, f"trained must be the BertForMaskedLM you trained (made by "
                               f"pt.new_model for this vocabulary), got {type(model).__name__}")
    recipe = getattr(model.config, "bertlib_recipe", None) or {}
    if recipe and (recipe.get("max_pp", 0) > 0
                   or set(recipe.get("constructions", ())) - {"simple", "comp"}):
        return Feedback(False, f"this model was trained on {recipe.get('constructions')} with "
                               f"max_pp={recipe.get('max_pp')}: with attractors. Train one on "
                               f"('simple', 'comp') with max_pp=0 and give that one")
    tok = build_tokenizer()
    own = make_sentence_set(tok, grammar.generate(OWN_TEST, ("simple", "comp"), seed=2,
                                                  split="test", max_pp=0))
    learned = float(agreement_correct(model, own).mean())
    if learned < OWN_LEARNED:
        return Feedback(False, f"your model gets only {learned:.2f} of the verbs right on its own "
                               f"kind of sentences (simple, comp; {OWN_LEARNED} needed): it has "
                               f"not learned agreement yet, so its attractor accuracy would tell "
                               f"nothing. Train it longer (the recipe's steps) and check again")
    attractor_set = make_sentence_set(tok, grammar.generate(ATTRACTOR_TEST, ("pp",), seed=2,
                                                            split="test"))
    subject_plural, nearest_plural, _ = plural_of(attractor_set)
    hard = subject_plural != nearest_plural  # after a phrase whose noun has the other number
    measured = float(agreement_correct(model, subset(attractor_set, hard)).mean())
    if not recipe and measured >= ATTRACTOR_TRAINED:  # no recipe recorded: judged by its score
        return Feedback(False, f"this model gets {measured:.2f} of the attractor verbs right: it "
                               f"looks trained with attractors. Give the model you trained on "
                               f"('simple', 'comp') with max_pp=0")
    return _attractor_verdict(guess, measured, int(hard.sum()))


def _attractor_verdict(guess: float, measured: float, n: int) -> Feedback:
    """Judge a guessed accuracy against the one ``measured`` on ``n`` attractor verbs as the
    exercise teaches it: first the side of a coin (below, within or above the range of a coin's
    accuracy on n verbs, claims.chance_interval; a guess of 0.5 says "a coin"), then how far
    (within 0.1). A guess on another side fails however near, so 0.5 does not pass a model
    measured below a coin's range."""
    lo, hi = chance_interval(n)
    side = "below" if measured < lo else "above" if measured > hi else "within"
    said = "below" if guess < 0.5 else "above" if guess > 0.5 else "within"
    head = (f"measured {measured:.2f} on {n} verbs, {side} the range of a coin's accuracy on "
            f"{n} verbs ({lo:.2f}-{hi:.2f} in 95 % of draws); your guess {guess:.2f}")
    if side != "within" and said != side:
        why = ("which noun stands right before these verbs, and what did agreeing with the noun "
               "just before earn the model in its training?" if side == "below" else "what in "
               "its training could have pointed to the subject rather than to the noun just "
               "before?")
        return Feedback(False, f"{head} puts it {'at' if said == 'within' else said} a coin's "
                               f"0.5, the model is {side} that range: {why}")
    miss = abs(guess - round(measured, 2))
    where = "a coin's range" if side == "within" else f"{side} a coin, as the model"
    if miss <= 0.1 + 1e-9:  # judged on the numbers as printed: 0.30 against 0.40 is within
        return Feedback(True, f"{head} is within 0.1 of it ({where}): good intuition")
    hint = ("what does a model that never saw a noun between subject and verb do when one "
            "appears?" if guess > measured else "it follows the noun next to the verb less "
            "often than you expected: something in its training also pointed to the subject")
    return Feedback(False, f"{head} is {'optimistic' if guess > measured else 'pessimistic'} "
                           f"by {miss:.2f} ({hint})")


def _vocab_size() -> int:
    return build_tokenizer().get_vocab_size()


def design_parameters(vocab_size: int, heads: int) -> int:
    """Parameters of BertForMaskedLM with DESIGN_LAYERS layers and ``heads`` heads of width
    DESIGN_HEAD_WIDTH for a vocabulary of ``vocab_size`` tokens (counted on a built model)."""
    config = tiny_config(vocab_size, DESIGN_LAYERS, heads, heads * DESIGN_HEAD_WIDTH)
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
    width = config.hidden_size / config.num_attention_heads
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
    heads = config.num_attention_heads
    more = design_parameters(vocab, heads + 1)
    if more <= DESIGN_BUDGET:
        return Feedback(False, f"{n:,} parameters fit, but so would one more head ({more:,}): "
                               f"the task asks for as many heads as the budget allows")
    return Feedback(True, f"{n:,} parameters, {DESIGN_BUDGET - n:,} under the budget; one more "
                          f"head would need {more:,}. {heads} heads of width "
                          f"{DESIGN_HEAD_WIDTH} is the most that fits")
