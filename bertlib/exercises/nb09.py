"""Checkers for notebook 09 (pre-train a tiny BERT): predict the agreement head's layer, predict
the effect of removing attractors from training, design a tiny BERT within a parameter budget.
"""

from __future__ import annotations

from transformers import BertConfig, BertForMaskedLM

from bertlib.exercises import Feedback, as_answer_number, as_answer_whole, not_answered
from bertlib.probes import build_tokenizer

__all__ = ["check_layer_guess", "check_attractor_prediction", "check_design",
           "DESIGN_BUDGET", "DESIGN_LAYERS", "DESIGN_HEAD_WIDTH"]

#: The design task: a BERT for the grammar's vocabulary with this many layers, heads of this
#: width, and at most this many parameters.
DESIGN_LAYERS, DESIGN_HEAD_WIDTH, DESIGN_BUDGET = 3, 16, 150_000


def check_layer_guess(guess, found_layer: int, n_layers: int) -> Feedback:
    """Check a prediction of the layer (0-based) that holds the agreement head."""
    guess = as_answer_whole(guess, "guess_layer (counted from 0)", 0, n_layers - 1,
                            todo=f"set guess_layer to a layer number in 0..{n_layers - 1}, then "
                                 f"run the next cells")
    if isinstance(guess, Feedback):
        return guess
    if guess == found_layer:
        return Feedback(True, f"right: the head that links a masked verb to its subject is in "
                              f"layer {found_layer}")
    if guess < found_layer:
        return Feedback(False, f"it is in layer {found_layer}, not {guess}: in layer 0 a head "
                               f"can only look at word and position embeddings, so it cannot "
                               f"yet know which noun is the subject")
    return Feedback(False, f"it is in layer {found_layer}, not {guess}: already a head that "
                           f"sees only words and their positions learns to find the subject "
                           f"(for most verbs), earlier than you thought")


def check_attractor_prediction(guess, measured) -> Feedback:
    """Check a predicted accuracy (0..1) against the one measured after training without
    attractors, on verbs whose attractor has the other number."""
    guess = as_answer_number(guess, "guess_accuracy", 0, 1,
                             todo="write your predicted accuracy (a number between 0 and 1) in "
                                  "guess_accuracy before training")
    if isinstance(guess, Feedback):
        return guess
    if measured is None:
        return not_answered("train the attractor-free model and put its accuracy in measured")
    miss = abs(guess - measured)
    if miss <= 0.1:
        return Feedback(True, f"within {miss:.2f} of the measured {measured:.2f}: good intuition")
    side = "optimistic" if guess > measured else "pessimistic"
    return Feedback(False, f"measured {measured:.2f}; your guess {guess:.2f} was {side} by "
                           f"{miss:.2f} (what does a model that never saw a noun between "
                           f"subject and verb do when one appears?)")


def check_design(config) -> Feedback:
    """Check a BertConfig for the design task: DESIGN_LAYERS layers, heads of width
    DESIGN_HEAD_WIDTH, at most DESIGN_BUDGET parameters in BertForMaskedLM, the grammar's
    vocabulary (tokenizer of bertlib.pretrain)."""
    if config is None:
        return not_answered("build a config with bertlib.pretrain.tiny_config and assign it")
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
