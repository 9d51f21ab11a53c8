"""Checkers for notebook 09 (pre-train a tiny BERT): predict how many runs put the subject head in
layer 0, predict the effect of removing attractors from training, design a tiny BERT within a
parameter budget. Each checker computes what it checks and answers any input with a message.
"""

from __future__ import annotations

import numpy as np
from transformers import BertConfig, BertForMaskedLM

from bertlib import grammar
from bertlib.exercises import Feedback, as_answer_number, as_answer_whole, not_answered
from bertlib.probes import build_tokenizer, make_probe, measure, subset

__all__ = ["subject_head_layers", "check_runs_prediction", "check_attractor_prediction",
           "check_design", "ATTRACTOR_TEST", "DESIGN_BUDGET", "DESIGN_LAYERS",
           "DESIGN_HEAD_WIDTH"]

#: Held-out "pp" sentences the attractor checker measures on.
ATTRACTOR_TEST = 400

#: The design task: a BERT for the grammar's vocabulary with this many layers, heads of this
#: width, and at most this many parameters.
DESIGN_LAYERS, DESIGN_HEAD_WIDTH, DESIGN_BUDGET = 3, 16, 150_000


def subject_head_layers(runs) -> list[int]:
    """For each run (anything with a ``history`` dict, e.g. bertlib.runs.Run), the layer of the
    head whose attention from a masked verb to its subject is largest at the end of training."""
    layers = []
    for run in runs:
        final = np.asarray(run.history["heads/subject"][-1])  # (L, H)
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
    probe = make_probe(tok, grammar.generate(ATTRACTOR_TEST, ("pp",), seed=2, split="test"))
    hard = probe.differs
    measured = float(measure(model, subset(probe, hard))["correct"].mean())
    miss, n = abs(guess - measured), int(hard.sum())
    side = "optimistic" if guess > measured else "pessimistic"
    verdict = ("within 0.1: good intuition" if miss <= 0.1 else
               f"{side} by {miss:.2f} (what does a model that never saw a noun between subject "
               f"and verb do when one appears?)")
    return Feedback(miss <= 0.1, f"measured {measured:.2f} on {n} verbs; your guess "
                                 f"{guess:.2f} was {verdict}")


def _vocab_size() -> int:
    return build_tokenizer().get_vocab_size()


def check_design(config) -> Feedback:
    """Check a BertConfig for the design task: DESIGN_LAYERS layers, heads of width
    DESIGN_HEAD_WIDTH, at most DESIGN_BUDGET parameters in BertForMaskedLM, the grammar's
    vocabulary (tokenizer of bertlib.pretrain)."""
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
    return Feedback(True, f"{n:,} parameters, {DESIGN_BUDGET - n:,} under the budget, "
                          f"{config.num_attention_heads} heads of width {DESIGN_HEAD_WIDTH}")
