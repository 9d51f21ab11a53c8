"""The committed runs (bertlib/data/tiny_bert/seedK) are what tools/pretrain_tiny_bert.py makes."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from bertlib.tiny import agreement, grammar, runs
from bertlib.tiny import pretrain as pt

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import pretrain_tiny_bert  # noqa: E402

SAVED = ROOT / "bertlib" / "data" / "tiny_bert"


def test_every_committed_seed_is_there_with_the_recipe_and_small():
    folders = runs.run_folders(SAVED)
    assert [f.name for f in folders] == [f"seed{k}" for k in pretrain_tiny_bert.COMMITTED_SEEDS]
    assert len(folders) >= 5
    for k, folder in zip(pretrain_tiny_bert.COMMITTED_SEEDS, folders, strict=True):
        # a run saved before a setting existed (weight_decay) was trained with its default
        saved = json.loads((folder / "recipe.json").read_text())
        assert set(saved) <= set(pt.Recipe().to_json())
        assert pt.Recipe(**{**saved, "constructions": tuple(saved["constructions"])}) == \
            pt.Recipe(seed=k)
        assert (folder / "model.safetensors").stat().st_size < 1e6
        assert len(np.load(folder / "history.npz")["loss"]) == pt.Recipe().steps


def test_the_script_reproduces_the_start_of_a_committed_run():
    """The first 40 steps of seed 1, run again, follow the saved losses. Same CPU and one thread:
    equal to float32 rounding; another CPU's kernels drift by far less than 0.05."""
    recipe = pt.Recipe(seed=1)
    torch.set_num_threads(1)
    tok = agreement.build_tokenizer()
    model = pt.new_model(recipe.config(tok.get_vocab_size()), recipe.seed)
    check_set = agreement.make_sentence_set(tok, grammar.generate(4, seed=recipe.check_seed, split="test"))
    run = pt.train(model, tok, recipe, check_set, steps=40, progress=False)
    saved = np.load(SAVED / "seed1" / "history.npz")["loss"][:40]
    assert np.abs(run.loss - saved).max() < 0.05


def test_the_script_refuses_a_call_without_a_target(capsys):
    with pytest.raises(SystemExit):
        pretrain_tiny_bert.main([])
    assert "give either OUT" in capsys.readouterr().err


def test_the_late_seeds_are_kept_as_histories_with_their_final_tables():
    tried = runs.load_histories(runs.HISTORY_ONLY)
    assert [name for name, _, _ in tried] == [f"seed{k}" for k in pretrain_tiny_bert.HISTORY_SEEDS]
    for (name, recipe, history), k in zip(tried, pretrain_tiny_bert.HISTORY_SEEDS, strict=True):
        assert recipe == pt.Recipe(seed=k) and not (runs.HISTORY_ONLY / name / "model.safetensors").exists()
        assert len(history["loss"]) == recipe.steps and history["number_probe"].shape[-1] == 4
        assert 0 <= runs.worst_trained_row(history, recipe) <= 1
    for _, _, history in runs.load_histories(SAVED):  # the committed runs' records too
        assert history["final/accuracy"].shape == (13,) and history["number_probe"].shape[-1] == 4
