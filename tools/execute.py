"""Re-execute notebooks in place, top to bottom in a fresh kernel, so strict nbval passes.

    python tools/execute.py notebooks/01_attention_by_hand.ipynb [more.ipynb ...]

Use it (or ``make execute``) after editing a notebook; commit the notebook with its outputs.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path


def execute(path: str | Path, timeout: int = 600) -> float:
    """Run every cell of the notebook at ``path`` in a new kernel, save it; return seconds taken."""
    import nbformat
    from nbclient import NotebookClient

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    # iopub_timeout: on a busy machine a cell's last outputs can arrive seconds after the kernel
    # replies; nbclient's default (4 s) would drop them silently.
    NotebookClient(nb, timeout=timeout, iopub_timeout=60, raise_on_iopub_timeout=True,
                   kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    nbformat.write(nb, path)
    return time.perf_counter() - start


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    for name in argv:
        print(f"{name}: executed in {execute(name):.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
