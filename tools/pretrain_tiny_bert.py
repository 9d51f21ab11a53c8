"""Pre-train the tiny BERT of notebook 09 and save it with its training history.

    python tools/pretrain_tiny_bert.py [OUT_DIR]     (default: bertlib/data/tiny_bert)

Writes OUT_DIR/model.safetensors + config.json (a ``BertForMaskedLM``) and OUT_DIR/history.npz
(evaluation steps, loss per step, agreement accuracy on the probe, per-head shares, attention
snapshots). Deterministic: seeds fixed and one torch thread, so a rerun on the same kind of CPU
gives the same numbers (tests/test_pretrain_tool.py checks it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: The recipe: every number of the run.
RECIPE = {"layers": 2, "heads": 4, "hidden": 64, "steps": 2500, "batch_size": 128,
          "lr": 3e-3, "warmup": 100, "seed": 0, "every": 50, "probe_sentences": 60,
          "probe_seed": 1}
SNAPSHOT_STEPS = (0, 100, 300, 1000, 2500)


def build(out: Path, recipe: dict = RECIPE, progress: bool = False) -> Path:
    """Train with ``recipe`` and save the model and its history into ``out``."""
    import torch

    from bertlib import grammar, probes
    from bertlib import pretrain as pt

    torch.set_num_threads(1)
    tok = probes.build_tokenizer()
    config = pt.tiny_config(tok.get_vocab_size(), recipe["layers"], recipe["heads"],
                            recipe["hidden"])
    model = pt.new_model(config, recipe["seed"])
    probe = probes.make_probe(tok, grammar.generate(recipe["probe_sentences"],
                                                seed=recipe["probe_seed"], split="test"))
    h = pt.train(model, tok, recipe["steps"], probe, recipe["batch_size"], recipe["lr"],
                 recipe["warmup"], recipe["seed"], recipe["every"],
                 snapshot_steps=[s for s in SNAPSHOT_STEPS if s <= recipe["steps"]],
                 progress=progress)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    (out / "recipe.json").write_text(json.dumps(recipe, indent=1) + "\n")
    np.savez_compressed(out / "history.npz", steps=np.array(h.steps), loss=h.loss,
                        accuracy=h.accuracy, seconds=h.seconds,
                        **{f"heads/{k}": v for k, v in h.heads.items()},
                        **{f"snapshot/{k}": v for k, v in h.snapshots.items()})
    return out


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "bertlib" / "data" / "tiny_bert"
    print(build(target, progress=True))
