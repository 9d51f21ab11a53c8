"""The saved tiny BERT (bertlib/data/tiny_bert) is what tools/pretrain_tiny_bert.py makes."""

import json
import sys
from pathlib import Path

import numpy as np
import torch

from bertlib import grammar, probes
from bertlib import pretrain as pt

ROOT = Path(__file__).resolve().parent.parent
SAVED = ROOT / "bertlib" / "data" / "tiny_bert"
sys.path.insert(0, str(ROOT / "tools"))
import pretrain_tiny_bert  # noqa: E402


def test_saved_recipe_is_the_scripts_and_the_files_are_small():
    assert json.loads((SAVED / "recipe.json").read_text()) == pretrain_tiny_bert.RECIPE
    assert (SAVED / "model.safetensors").stat().st_size < 5e6
    history = np.load(SAVED / "history.npz")
    assert len(history["loss"]) == pretrain_tiny_bert.RECIPE["steps"]


def test_the_script_reproduces_the_start_of_the_saved_run():
    """The first 100 steps of the recipe, run again, follow the saved losses. Same CPU and one
    thread: equal to float32 rounding; another CPU's kernels drift by far less than 0.05."""
    r = pretrain_tiny_bert.RECIPE
    torch.set_num_threads(1)
    tok = probes.build_tokenizer()
    model = pt.new_model(pt.tiny_config(tok.get_vocab_size(), r["layers"], r["heads"],
                                        r["hidden"]), r["seed"])
    probe = probes.make_probe(tok, grammar.generate(r["probe_sentences"], seed=r["probe_seed"],
                                                split="test"))
    run = pt.train(model, tok, 100, probe, r["batch_size"], r["lr"], r["warmup"], r["seed"],
                   r["every"], schedule_steps=r["steps"], progress=False)
    saved = np.load(SAVED / "history.npz")["loss"][:100]
    assert np.abs(run.loss - saved).max() < 0.05
