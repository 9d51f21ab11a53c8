"""Run every notebook under another BERT: ``make test-any-bert``.

Builds, offline, a seeded random ``BertModel`` of another shape than the bundled one (4 layers,
8 heads, hidden 256) with the bundled tokenizer, then executes every notebook (lessons and
solutions) top to bottom in a fresh kernel with ``BERTLIB_MODEL`` pointing at it. Execution must
succeed; outputs are not compared (the numbers are another model's). Claims about the bundled
model's own numbers go through ``bertlib.lab.claims.claim``, which prints instead of asserting here.

    python tools/any_bert.py [notebooks/03_inside_bert.ipynb ...]
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHAPE = {"num_hidden_layers": 4, "num_attention_heads": 8, "hidden_size": 256,
         "intermediate_size": 512}


def build_random_bert(folder: Path, seed: int = 0) -> Path:
    """Save a seeded random BertModel of shape SHAPE and the bundled tokenizer into ``folder``."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from bertlib.hf.loading import bundled_model_path

    bundled = bundled_model_path()
    tokenizer = AutoTokenizer.from_pretrained(bundled, local_files_only=True)
    config = BertConfig(vocab_size=tokenizer.vocab_size, max_position_embeddings=512, **SHAPE)
    torch.manual_seed(seed)
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def run_notebook(path: Path, timeout: int = 900) -> str | None:
    """Execute a notebook in a fresh kernel (not saved); None on success, else the error."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, iopub_timeout=60, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    try:
        client.execute()
    except CellExecutionError as exc:
        return str(exc)[-3000:]
    return None


def main(argv: list[str]) -> int:
    wanted = [Path(a).resolve() for a in argv] or sorted(
        p for p in (ROOT / "notebooks").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    with tempfile.TemporaryDirectory(prefix="any-bert-") as tmp:
        model_dir = build_random_bert(Path(tmp) / "random-bert")
        copy = Path(tmp) / "notebooks"
        shutil.copytree(ROOT / "notebooks", copy)  # never touch the committed notebooks
        os.environ["BERTLIB_MODEL"] = str(model_dir)
        print(f"BERTLIB_MODEL={model_dir} ({SHAPE})", flush=True)
        failed = []
        for nb in wanted:
            rel = nb.relative_to(ROOT / "notebooks")
            start = time.perf_counter()
            error = run_notebook(copy / rel)
            took = time.perf_counter() - start
            print(f"{'FAILED' if error else 'ok':6} {rel} ({took:.0f} s)", flush=True)
            if error:
                failed.append((rel, error))
        for rel, error in failed:
            print(f"\n==== {rel} ====\n{error}")
        print(f"any-bert: {len(wanted) - len(failed)} passed, {len(failed)} failed")
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
