"""Claims about the bundled model's own numbers, checked only where they are about that model.

The prose of a notebook states facts measured on the bundled all-MiniLM-L6-v2 ("head 3 of layer 2
puts 0.61 of its attention on the previous token"). Under another BERT (``BERTLIB_MODEL``) such a
fact is not expected to hold, so a notebook states it through :func:`claim`:

- with the bundled model, ``claim`` is an ``assert``: the notebook fails the day the fact stops
  being true;
- with any other model it prints what was measured beside what the prose says, and that the
  prose's number is for the bundled model. Never a silent skip.

Facts that hold for every BERT (rows sum to 1, the numpy BERT equals transformers) are plain
``assert`` statements in the notebooks, not claims.
"""

from __future__ import annotations

import os

from bertlib.checks import kind, text
from bertlib.loading import BUNDLED_NAME, LoadedBert, bundled_model_path

__all__ = ["is_bundled", "claim"]


def is_bundled(bert: LoadedBert) -> bool:
    """True when ``bert`` is the bundled all-MiniLM-L6-v2 (by name, or loaded from its folder)."""
    kind(bert, "bert", LoadedBert, "the LoadedBert that load_bert() returns")
    if bert.name == BUNDLED_NAME:
        return True
    folder = os.path.realpath(os.path.expanduser(bert.name))
    return os.path.isdir(folder) and folder == os.path.realpath(bundled_model_path())


def claim(bert: LoadedBert, statement: str, holds: bool, measured=None) -> bool:
    """Check a fact the prose states about the bundled model's own numbers.

    bert: the LoadedBert the notebook uses. statement: the fact in words, as the prose says it.
    holds: whether it is true of the numbers just measured. measured: what was measured (shown
    in the message). With the bundled model, raises AssertionError when ``holds`` is false; with
    any other model, prints the measured value and that the prose's number is for the bundled
    model. Returns ``holds``.
    """
    text(statement, "statement (the claim in words)")
    holds = bool(holds)
    shown = "" if measured is None else f" (measured: {measured})"
    if is_bundled(bert):
        assert holds, f"claim no longer true for the bundled model: {statement}{shown}"
        return holds
    verdict = "also holds" if holds else "does not hold"
    print(f"[other model] '{statement}' is the bundled {BUNDLED_NAME}'s result; with "
          f"{bert.name} it {verdict}{shown}.")
    return holds
