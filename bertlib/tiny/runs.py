"""Training runs of notebook 09's tiny BERT, saved and loaded as folders.

A run folder (written by :func:`save_run`, e.g. by ``tools/pretrain_tiny_bert.py --seed K OUT``)
holds ``model.safetensors`` + ``config.json`` (a ``BertForMaskedLM``), ``recipe.json`` (the
:class:`bertlib.tiny.pretrain.Recipe`) and ``history.npz`` (what :func:`bertlib.tiny.pretrain.train`
recorded). The committed runs live in ``bertlib/data/tiny_bert/seed*``; ``BERTLIB_TINY_BERT=DIR``
points notebook 09 at other runs: DIR is one run folder or a folder holding several.

Statements of notebook 09 about the committed runs go through :func:`bertlib.lab.claims.claim` with
the :class:`bertlib.lab.claims.Subject` that :func:`load_runs` returns: they assert on the committed
runs and report, without failing, on any other.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import NamedTuple

import numpy as np

from bertlib.checks import kind, one_of, text, whole
from bertlib.lab.claims import Subject
from bertlib.tiny import agreement, grammar
from bertlib.tiny.pretrain import History, Recipe

__all__ = ["ENV", "COMMITTED", "HISTORY_ONLY", "Run", "run_folders", "save_run", "load_run",
           "load_runs", "final_table", "load_histories", "worst_trained_row", "seeds_tried",
           "NUMBER_PROBE_SENTENCES", "NUMBER_PROBE_SEED", "number_probe_set", "conflict_rows"]

#: The environment variable that points notebook 09 at other runs.
ENV = "BERTLIB_TINY_BERT"
#: The folder of the committed runs (one sub-folder per seed).
COMMITTED = Path(__file__).resolve().parents[1] / "data" / "tiny_bert"
#: Histories (no model) of more seeds trained with the recipe, one sub-folder per seed.
HISTORY_ONLY = COMMITTED / "history_only"
#: Notebook 09's test sentences: this many per construction, drawn with this grammar seed.
TEST_PER_CONSTRUCTION, TEST_SEED = 60, 2
#: The number probe's held-out sentences, recorded while training: how many, grammar seed.
NUMBER_PROBE_SENTENCES, NUMBER_PROBE_SEED = 600, 3


class Run(NamedTuple):
    """One training run: its name (the folder's when it starts with "seed", else "seed" and the
    recipe's seed: a run in /tmp/run of seed 131 is "seed131"), recipe, trained model (eval
    mode, eager attention) and history (name -> array: "steps" (T,), "loss" (S,), "accuracy" (T,),
    "log_odds" (T,), "heads/<measure>" (T, L, H), "number_probe" (T, L, 4),
    "snapshot/<step>" (L, H, N, N), "final/rows" and "final/accuracy" (K,) (:func:`final_table`);
    see :class:`bertlib.tiny.pretrain.History`)."""

    name: str
    recipe: Recipe
    model: object
    history: dict


def _is_run(folder: Path) -> bool:
    return (folder / "model.safetensors").is_file() and (folder / "recipe.json").is_file()


def _by_name(folder: Path) -> tuple:
    """Sort key of a run folder: its name with each number read as a number (seed93 before
    seed517)."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part)
                 for part in re.split(r"(\d+)", folder.name))


def run_folders(path=None) -> list[Path]:
    """The run folders at ``path`` (default: ``$BERTLIB_TINY_BERT``, else the committed runs):
    ``path`` itself when it is a run, else its sub-folders that are runs, sorted by name (numbers
    as numbers). FileNotFoundError naming the folder when there is none."""
    path = Path(os.environ.get(ENV) or COMMITTED) if path is None else Path(
        text(str(path), "path (a run folder or a folder of runs)"))
    path = path.expanduser().resolve()
    if _is_run(path):
        return [path]
    found = sorted((p for p in path.iterdir() if _is_run(p)), key=_by_name) if path.is_dir() else []
    if not found:
        raise FileNotFoundError(f"no training run in {path}: expected model.safetensors and "
                                f"recipe.json there or in its sub-folders (write one with "
                                f"python tools/pretrain_tiny_bert.py --seed K {path})")
    return found


def save_run(out, model, recipe: Recipe, history: History, extra: dict | None = None,
             with_model: bool = True) -> Path:
    """Write a run folder: the model, ``recipe.json`` and ``history.npz``. Returns the folder.
    extra: more arrays for history.npz (e.g. :func:`final_table`'s). with_model=False writes the
    recipe and history only (a record of the seed, not a run :func:`load_runs` loads)."""
    kind(recipe, "recipe", Recipe, "a bertlib.tiny.pretrain.Recipe")
    kind(history, "history", History, "the History that pretrain.train returns")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if with_model:
        model.save_pretrained(out)
    (out / "recipe.json").write_text(json.dumps(recipe.to_json(), indent=1) + "\n")
    np.savez_compressed(out / "history.npz", steps=np.array(history.steps), loss=history.loss,
                        accuracy=history.accuracy, log_odds=history.log_odds,
                        **({} if history.number_probe is None
                           else {"number_probe": history.number_probe}),
                        **{f"heads/{k}": v for k, v in history.heads.items()},
                        **{f"snapshot/{k}": v for k, v in history.snapshots.items()},
                        **(extra or {}))
    return out


def load_run(folder) -> Run:
    """One run folder as a :class:`Run` (the model in eval mode, eager attention)."""
    from transformers import BertForMaskedLM  # noqa: PLC0415  (not a bertlib import)

    folder = Path(folder)
    recipe = _recipe(folder)
    model = BertForMaskedLM.from_pretrained(folder, attn_implementation="eager").eval()
    model.config.bertlib_recipe = recipe.to_json()  # what it was trained on
    with np.load(folder / "history.npz") as saved:
        history = dict(saved)
    return Run(_name(folder, recipe), recipe, model, history)


def load_runs(path=None) -> tuple[list[Run], Subject]:
    """Every run at ``path`` (see :func:`run_folders`) and the :class:`Subject` of claims about
    them: the prose's numbers are the committed runs', so claims assert only on those."""
    folders = run_folders(path)
    runs = [load_run(f) for f in folders]
    committed = {p for p in COMMITTED.glob("*") if _is_run(p)}
    is_reference = set(folders) == committed
    where = folders[0] if len(folders) == 1 else folders[0].parent
    names = ", ".join(r.name for r in runs)
    copies = [r.name for r, f in zip(runs, folders, strict=True) if _copy_of_committed(f, r)]
    # The committed runs are named without their folder, so saved outputs read the same anywhere.
    name = (f"the {len(runs)} committed runs ({names})" if is_reference
            else f"the {len(runs)} run{'s' * (len(runs) != 1)} in {where} ({names}" + (
                f"; {', '.join(copies)}: the committed run{'s' * (len(copies) != 1)}, the others "
                f"not" if copies else "") + ")")
    return runs, Subject(name, is_reference, f"{len(committed)} committed runs")


def _copy_of_committed(folder: Path, run: Run) -> bool:
    """Is the run in ``folder`` a copy of the committed run of its name (same training log)?"""
    twin = COMMITTED / folder.name
    if folder.resolve() == twin.resolve() or not _is_run(twin):
        return folder.resolve() == twin.resolve()
    with np.load(twin / "history.npz") as saved:
        return np.array_equal(saved["loss"], run.history["loss"])


def final_table(model, tokenizer) -> dict[str, np.ndarray]:
    """The trained model's agreement table on notebook 09's test sentences (TEST_PER_CONSTRUCTION
    of every construction, seed TEST_SEED) as history arrays: "final/rows" (K,) row names
    ("construction · role") and "final/accuracy" (K,)."""
    test = grammar.generate(TEST_PER_CONSTRUCTION * len(grammar.CONSTRUCTIONS),
                            grammar.CONSTRUCTIONS, seed=TEST_SEED, split="test")
    sentence_set = agreement.make_sentence_set(tokenizer, test)
    correct = agreement.measure_on(model, sentence_set)["correct"]
    table = agreement.agreement_table(sentence_set, correct)
    return {"final/rows": np.array(list(table)),
            "final/accuracy": np.array([row["model"] for row in table.values()])}


def worst_trained_row(history: dict, recipe: Recipe) -> float:
    """The lowest final agreement accuracy (history "final/accuracy") over the rows of the
    constructions ``recipe`` trained on. ValueError naming the fields there are when it was not
    recorded (histories written by tools/pretrain_tiny_bert.py have it)."""
    one_of("final/accuracy", "the history field (tools/pretrain_tiny_bert.py records it)",
           list(history))
    trained = [str(r).split(" · ")[0] in recipe.constructions for r in history["final/rows"]]
    return float(np.min(history["final/accuracy"][np.array(trained)]))


def load_histories(path=HISTORY_ONLY) -> list[tuple[str, Recipe, dict]]:
    """(name, recipe, history) of every sub-folder of ``path`` (or ``path`` itself) holding a
    ``history.npz`` and ``recipe.json``, runs and history-only records alike, sorted by name
    (numbers as numbers)."""
    path = Path(path)
    found = [path] if (path / "history.npz").is_file() else sorted(
        (p for p in path.iterdir() if (p / "history.npz").is_file()),
        key=_by_name) if path.is_dir() else []
    out = []
    for folder in found:
        with np.load(folder / "history.npz") as saved:
            recipe = _recipe(folder)
            out.append((_name(folder, recipe), recipe, dict(saved)))
    return out


#: Recipe fields renamed since runs were first saved (the check set was once called the probe):
#: a folder written before the rename loads the same.
_RENAMED = {"probe_sentences": "check_sentences", "probe_seed": "check_seed"}


def _recipe(folder: Path) -> Recipe:
    recipe = {_RENAMED.get(k, k): v for k, v in json.loads((folder / "recipe.json").read_text())
              .items()}
    return Recipe(**{**recipe, "constructions": tuple(recipe["constructions"])})


def _name(folder: Path, recipe: Recipe) -> str:
    """A run's name: its folder's when that names a seed ("seed3"), else its recipe's seed."""
    return folder.name if folder.name.startswith("seed") else f"seed{recipe.seed}"


def seeds_tried(runs, kept=(COMMITTED, HISTORY_ONLY)) -> list[tuple[str, Recipe, dict]]:
    """Every seed trained with the recipe of ``runs[0]`` whose history is known here: the
    histories the repository keeps (``kept``: folders as :func:`load_histories` reads them), then
    each of ``runs`` (:class:`Run`, e.g. a reader's own from ``BERTLIB_TINY_BERT``) whose seed is
    not among those and whose recipe differs from the first one's in its seed only. Returns
    (name, recipe, history) tuples; a repository history of another recipe is left out too."""
    runs = list(runs)
    whole(len(runs), "the number of runs", 1)
    base = {**runs[0].recipe.to_json(), "seed": 0}
    same = [h for folder in kept for h in load_histories(folder)
            if {**h[1].to_json(), "seed": 0} == base]
    seeds = {recipe.seed for _, recipe, _ in same}
    return same + [(run.name, run.recipe, run.history) for run in runs
                   if run.recipe.seed not in seeds and {**run.recipe.to_json(), "seed": 0} == base]


def number_probe_set(tokenizer) -> agreement.SentenceSet:
    """The held-out sentences (R verb rows) on which a run's history "number_probe" is measured
    while training (tools/pretrain_tiny_bert.py)."""
    return agreement.make_sentence_set(tokenizer, grammar.generate(
        NUMBER_PROBE_SENTENCES, grammar.CONSTRUCTIONS, seed=NUMBER_PROBE_SEED, split="test"))


def conflict_rows(sentence_set: agreement.SentenceSet, train_share: float = 0.5) -> int:
    """How many rows the number probe's "subject, conflict rows" column scores on
    ``sentence_set``: its test rows (after the first round(train_share · R)) whose nearest noun
    before the verb has the other number than the subject (as
    bertlib.tiny.linear_probe.number_probe_controls)."""
    plural, nearest, _ = agreement.plural_of(sentence_set)
    return int((plural != nearest)[int(round(train_share * len(plural))):].sum())
