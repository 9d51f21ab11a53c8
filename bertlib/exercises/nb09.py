"""Checkers for notebook 09 (pre-train a tiny BERT): predict how many runs put the subject head in
layer 0, predict the effect of removing attractors from training, design a tiny BERT with as many
heads as fit in a parameter budget. Each checker computes what it checks and answers any input
with a message.
"""

from __future__ import annotations

import numpy as np
from transformers import BertConfig, BertForMaskedLM

from bertlib import grammar
from bertlib.exercises import Feedback, as_answer_number, as_answer_whole, not_answered
from bertlib.mechanism import agreement_correct
from bertlib.pretrain import tiny_config
from bertlib.probes import build_tokenizer, make_probe, subset

__all__ = ["subject_head_layers", "check_runs_prediction", "check_attractor_prediction",
           "check_design", "design_parameters", "ATTRACTOR_TEST", "OWN_TEST", "OWN_LEARNED",
           "DESIGN_BUDGET", "DESIGN_LAYERS", "DESIGN_HEAD_WIDTH"]

#: Held-out "pp" sentences the attractor checker measures on.
ATTRACTOR_TEST = 400
#: Held-out sentences of the model's own training language (simple, comp, no phrases) and the
#: agreement accuracy it needs there before its attractor accuracy is judged.
OWN_TEST, OWN_LEARNED = 100, 0.8

#: The design task: a BERT for the grammar's vocabulary with this many layers, heads of this
#: width, and at most this many parameters.
DESIGN_LAYERS, DESIGN_HEAD_WIDTH, DESIGN_BUDGET = 3, 16, 150_000


def subject_head_layers(runs) -> list[int]:
    """For each run (anything with a ``history`` dict, e.g. bertlib.runs.Run), the layer of the
    head whose attention from a masked verb to its subject is largest at the end of training,
    measured on the rows whose subject is not the previous word ("heads/subject_far"; runs saved
    before that measure existed: on all rows, "heads/subject")."""
    layers = []
    for run in runs:
        key = "heads/subject_far" if "heads/subject_far" in run.history else "heads/subject"
        final = np.asarray(run.history[key][-1])  # (L, H)
        layers.append(int(np.unravel_index(final.argmax(), final.shape)[0]))
    return layers


def check_runs_prediction(guess, runs) -> Feedback:
    """Check a prediction of in how many of ``runs`` the strongest verb-to-subject head sits in
    layer 0; the count is computed here from the runs' histories, never taken from the learner."""
    try:
        layers = subject_head_layers(runs)
    except (TypeError, KeyError, AttributeError, IndexError, ValueError):
        return Feedback(False, "runs must be the list of runs that bertlib.runs.load_runs() "
                               "returns (each with its history)")
    n = len(layers)
    guess = as_answer_whole(guess, "guess_runs (a number of runs)", 0, n,
                            todo=f"set guess_runs to how many of the {n} runs you expect to put "
                                 f"that head in layer 0, then run this cell")
    if isinstance(guess, Feedback):
        return guess
    found = sum(layer == 0 for layer in layers)
    where = ", ".join(f"{getattr(run, 'name', f'run {k}')}: layer {layer}"
                      for k, (run, layer) in enumerate(zip(runs, layers, strict=True)))
    if guess == found:
        return Feedback(True, f"right: {found} of {n} ({where}). Same recipe, other seeds, "
                              f"and the heads need not end up in the same place")
    side = "more" if guess > found else "fewer"
    return Feedback(False, f"{found} of {n}, not {guess} ({where}): {side} than it turned "
                           f"out. A head in layer 0 sees words and positions only; what decides "
                           f"which layer the seed's run uses?")


def check_attractor_prediction(guess, model) -> Feedback:
    """Check a predicted accuracy (0..1) of ``model`` (trained without attractors) on main verbs
    after a prepositional phrase whose noun has the other number; the accuracy is measured here
    on ATTRACTOR_TEST held-out sentences, never taken from the learner."""
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
    tok = build_tokenizer()
    own = make_probe(tok, grammar.generate(OWN_TEST, ("simple", "comp"), seed=2, split="test",
                                           max_pp=0))
    learned = float(agreement_correct(model, own).mean())
    if learned < OWN_LEARNED:
        return Feedback(False, f"your model gets only {learned:.2f} of the verbs right on its own "
                               f"kind of sentences (simple, comp; {OWN_LEARNED} needed): it has "
                               f"not learned agreement yet, so its attractor accuracy would tell "
                               f"nothing. Train it longer (the recipe's steps) and check again")
    probe = make_probe(tok, grammar.generate(ATTRACTOR_TEST, ("pp",), seed=2, split="test"))
    hard = probe.differs
    measured = float(agreement_correct(model, subset(probe, hard)).mean())
    miss, n = abs(guess - measured), int(hard.sum())
    hint = ("what does a model that never saw a noun between subject and verb do when one "
            "appears?" if guess > measured else "it follows the noun next to the verb less "
            "often than you expected: something in its training also pointed to the subject")
    verdict = "within 0.1: good intuition" if miss <= 0.1 else (
        f"{'optimistic' if guess > measured else 'pessimistic'} by {miss:.2f} ({hint})")
    return Feedback(miss <= 0.1, f"measured {measured:.2f} on {n} verbs; your guess "
                                 f"{guess:.2f} was {verdict}")


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
    grammar's vocabulary (tokenizer of bertlib.probes). The most heads that fit is computed
    here by building the models."""
    if config is None:
        return not_answered("build a config with bertlib.pretrain.tiny_config and assign it")
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
