"""Pre-train notebook 09's tiny BERT with the recipe (bertlib.tiny.pretrain.Recipe) and save the
run.

    python tools/pretrain_tiny_bert.py --seed K OUT     one run, seed K, into the folder OUT
    python tools/pretrain_tiny_bert.py --committed      the committed runs (make pretrain):
                                       seeds 0..4 into bertlib/data/tiny_bert/seedK, and the
                                       HISTORY_SEEDS below as histories only into its
                                       history_only/seedK
    python tools/pretrain_tiny_bert.py --history-only --seed K OUT   recipe and history, no model

Each run folder holds model.safetensors + config.json (a BertForMaskedLM), recipe.json and
history.npz (evaluation steps, loss per step, agreement accuracy and log-odds on the check set,
per-head shares, the number probe at the masked verb with its controls on a larger set of held-out
sentences, attention snapshots, the final agreement table on notebook 09's test sentences);
notebook 09 reads it
through bertlib.tiny.runs (BERTLIB_TINY_BERT=OUT). Deterministic: seeds fixed and one torch thread,
so a rerun on the same kind of CPU gives the same numbers (tests/test_pretrain_tool.py checks it).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: The seeds of the committed runs.
COMMITTED_SEEDS = (0, 1, 2, 3, 4)
#: Seeds whose histories only are committed: seeds readers trained with the recipe (31 and 44,
#: kept after their readers reported them learning late; 93, 517, 623, 808, 1357 and 2026, the
#: seeds of the readers after them, kept whatever they did), so that notebook 09 counts how many
#: of the seeds tried learn within the recipe's steps.
HISTORY_SEEDS = (31, 44, 93, 517, 623, 808, 1357, 2026)
#: Steps at which the attention maps of the check set's first sentence are saved.
SNAPSHOT_STEPS = (0, 100, 300, 600, 1000)


def build(out: Path, seed: int, progress: bool = False, with_model: bool = True) -> Path:
    """Train the recipe with ``seed`` and save the run into ``out`` (with_model=False: the recipe
    and history only)."""
    import torch

    from bertlib.tiny import agreement, grammar, linear_probe, runs
    from bertlib.tiny import pretrain as pt

    torch.set_num_threads(1)
    recipe = pt.Recipe(seed=seed)
    tok = agreement.build_tokenizer()
    model = pt.new_model(recipe.config(tok.get_vocab_size()), recipe.seed)
    check_set = agreement.make_sentence_set(tok, grammar.generate(
        recipe.check_sentences, grammar.CONSTRUCTIONS, seed=recipe.check_seed, split="test"))
    number = runs.number_probe_set(tok)  # the held-out sentences of the history's number probe
    control = linear_probe.control_labels(tok, number)
    history = pt.train(model, tok, recipe, check_set, progress=progress,
                       snapshot_steps=[s for s in SNAPSHOT_STEPS if s <= recipe.steps],
                       number_probe=lambda m, _: linear_probe.verb_number_probe(m, number, control))
    return runs.save_run(out, model, recipe, history, runs.final_table(model, tok), with_model)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, help="the run folder to write")
    parser.add_argument("--seed", type=int, default=0, help="the run's seed (default 0)")
    parser.add_argument("--committed", action="store_true",
                        help=f"train seeds {COMMITTED_SEEDS} into bertlib/data/tiny_bert/ and "
                             f"{HISTORY_SEEDS} (histories only) into its history_only/")
    parser.add_argument("--history-only", action="store_true",
                        help="save the recipe and history, not the model")
    args = parser.parse_args(argv)
    if args.committed == (args.out is not None):
        parser.error("give either OUT (with --seed K) or --committed")
    data = ROOT / "bertlib" / "data" / "tiny_bert"
    jobs = ([(data / f"seed{k}", k, True) for k in COMMITTED_SEEDS]
            + [(data / "history_only" / f"seed{k}", k, False) for k in HISTORY_SEEDS]
            if args.committed else [(args.out, args.seed, not args.history_only)])
    for out, seed, with_model in jobs:
        start = time.process_time()
        build(out, seed, progress=sys.stderr.isatty(), with_model=with_model)
        print(f"{out} (seed {seed}): {time.process_time() - start:.0f} s CPU")


if __name__ == "__main__":
    main()
