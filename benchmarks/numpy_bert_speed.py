"""The numpy BERT (``bertlib.paper.bert.bert_forward``, float64, from the equations) against
transformers' eager forward (float32) on the same input, one thread, in one run (``make bench``).

Both return every layer's hidden states and attention weights. The two are timed in turns (numpy,
transformers, numpy, ...) so that a busy machine slows both alike; each time is the CPU time of
this process (``time.process_time``) of one forward, and the fastest of ``--repeats`` is kept.
Prints the two times and their ratio; writes ``benchmarks/results/numpy_bert.json``.

    python benchmarks/numpy_bert_speed.py [--pieces 122] [--repeats 7]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from bertlib.hf.corpus import load_corpus
from bertlib.hf.loading import load_bert
from bertlib.hf.params import bert_params
from bertlib.paper.bert import bert_forward

RESULTS = Path(__file__).resolve().parent / "results"


def corpus_input(bert, pieces: int) -> dict:
    """The shipped corpus's first sentences as one input of exactly ``pieces`` word pieces."""
    text = " ".join(load_corpus().sentences[:40])
    enc = bert.tokenizer(text, truncation=True, max_length=pieces, return_tensors="pt")
    if enc["input_ids"].shape[1] != pieces:
        raise SystemExit(f"the first 40 corpus sentences give only {enc['input_ids'].shape[1]} "
                         f"pieces; ask for fewer than {pieces}")
    return dict(enc)


def cpu_seconds(step) -> float:
    start = time.process_time()
    step()
    return time.process_time() - start


def run(pieces: int, repeats: int) -> dict:
    """Time both forwards on the same ``pieces`` tokens; returns a JSON-ready dict."""
    torch.set_num_threads(1)
    bert = load_bert()
    enc = corpus_input(bert, pieces)
    ids = enc["input_ids"][0].numpy()
    types = enc["token_type_ids"][0].numpy()
    params = bert_params(bert)  # read once, as the notebooks' cache does

    def ours():
        return bert_forward(params, ids, types)

    def theirs():
        with torch.no_grad():
            return bert.model(**enc, output_attentions=True, output_hidden_states=True)

    mine, ref = ours(), theirs()  # warm-up, and the two must agree
    gap = float(np.abs(mine.hidden_states - torch.stack(ref.hidden_states)[:, 0].numpy()).max())
    times = {"numpy": [], "transformers": []}
    with threadpool_limits(1):
        for _ in range(repeats):
            times["numpy"].append(cpu_seconds(ours))
            times["transformers"].append(cpu_seconds(theirs))
    best = {name: min(ts) for name, ts in times.items()}
    return {"pieces": pieces, "repeats": repeats, "threads": 1,
            "seconds": best, "ratio": best["numpy"] / best["transformers"],
            "max_hidden_difference": gap, "torch": torch.__version__, "numpy": np.__version__,
            "machine": platform.processor() or platform.machine()}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pieces", type=int, default=122)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    result = run(args.pieces, args.repeats)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "numpy_bert.json").write_text(json.dumps(result, indent=1) + "\n")
    s = result["seconds"]
    print(f"{args.pieces} pieces, one thread, fastest of {args.repeats} (CPU time):\n"
          f"  numpy bert_forward (float64)     {s['numpy'] * 1e3:8.1f} ms\n"
          f"  transformers eager (float32)     {s['transformers'] * 1e3:8.1f} ms\n"
          f"  ratio numpy / transformers       {result['ratio']:8.2f}x\n"
          f"  largest hidden-state difference  {result['max_hidden_difference']:.1e}")


if __name__ == "__main__":
    main()
