"""Latency of notebook 03's BERT attention explorer (``BertAttentionExplorer``): a head or
layer change, and a new sentence of 128 and 512 pieces, against the targets the widget was built
for (a change of head or layer within 0.1 s, a new 128-piece sentence within 0.3 s).

    python benchmarks/explorer_latency.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import numpy as np

from bertlib.hf import models
from bertlib.pictures.widgets.explorer import BertAttentionExplorer


def run(repeats: int = 5) -> None:
    """Print the explorer's latencies: head/layer change, new sentences of 128 and 512 pieces.

    A step is timed until the view's HTML is built and serialised as the widget message the
    front end receives (the browser then draws it). A new sentence is timed without the cache
    (never seen); its forward pass alone (``bertlib.hf.models.run_bert``) is timed again
    separately. Wall-clock and CPU time of this process are both printed (a busy machine slows
    the first, not the second).
    """
    def timed(step: Callable[[], object]) -> tuple[float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        step()
        json.dumps({"method": "update", "state": {"value": explorer.view.value}})
        return time.perf_counter() - wall, time.process_time() - cpu

    explorer = BertAttentionExplorer("The quick brown fox jumps over the lazy dog.")
    words = ("the model reads every word of this long text and attends to all of them at once "
             "in each layer and head").split()
    results = {
        "head change (11 tokens)": [timed(lambda h=h: explorer.set_head(h))
                                    for h in range(repeats)],
        "layer change (11 tokens)": [timed(lambda i=i: explorer.set_layer(i % explorer.n_layers))
                                     for i in range(repeats)],
    }
    for n in (128, 512):
        times, forward = [], []
        for r in range(max(2, repeats // 2)):
            text = " ".join(words[(i + r) % len(words)] for i in range(n - 2))
            models.clear_run_cache()
            times.append(timed(lambda t=text: explorer.set_text(t)))
            assert len(explorer.tokens) == n, (len(explorer.tokens), explorer.message)
            models.clear_run_cache()  # the same sentence again, forward pass only
            forward.append(timed(lambda t=text: models.run_bert(t, None, explorer.model)))
        results[f"new sentence ({n} tokens)"] = times
        results[f"  of which forward pass ({n})"] = forward
        results[f"head change ({n} tokens)"] = [timed(lambda h=h: explorer.set_head(h))
                                                for h in range(repeats)]
        results[f"view size ({n} tokens)"] = len(explorer.view.value)
    targets = {"head change": 0.1, "layer change": 0.1, "new sentence (128": 0.3,
               "new sentence (512": 1.0}
    print(f"{'step':28s} {'wall median':>11s} {'wall max':>9s} {'CPU median':>10s}  target")
    for name, times in results.items():
        if isinstance(times, int):
            print(f"{name:28s} {times / 1000:8.0f} kB of HTML")
            continue
        wall, cpu = np.array(times).T * 1000
        target = next((f"≤ {t * 1000:.0f} ms" for k, t in targets.items() if name.startswith(k)),
                      "")
        print(f"{name:28s} {np.median(wall):8.1f} ms {wall.max():6.1f} ms "
              f"{np.median(cpu):7.1f} ms  {target}")



if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per step")
    run(parser.parse_args().repeats)
