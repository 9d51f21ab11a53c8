"""The order ``make test`` hands its scopes to the two pytest-xdist workers: heaviest first.

With ``--dist loadscope`` each notebook (its cells share one kernel) and each test module is one
scope, run whole by one worker; a worker takes the next scope when it runs out. xdist's own order
is "most tests first": a solution notebook has six or seven cells, so it comes after nearly every
test module, though 09's trains a model (about 38 CPU s), and the run could end with one worker
idle while the other finished it (about 25 s of idling, simulated with the costs below). Handing
out the scopes by their measured cost, most expensive first (the longest-processing-time rule),
lets the small scopes fill the end.

The costs are ``scope_costs.json``: the CPU seconds of each scope run alone, measured as it says.
A scope it does not list counts as free and goes after the listed ones in collection order, so a
stale table only makes the schedule a little worse, never the tests different. Refresh it
after a notebook gets much cheaper or dearer (tests/test_scope_order.py checks that every
notebook is listed and every listed file exists).
"""

import json
from pathlib import Path

COSTS_FILE = Path(__file__).with_name("scope_costs.json")


def scope_of(nodeid: str) -> str:
    """The scope of a test id: its module or notebook path (xdist puts a test class in a scope of
    its own; here it stays with its module, which is where its cost is counted)."""
    return nodeid.split("::", 1)[0]


def load_costs(path: Path = COSTS_FILE) -> dict[str, float]:
    """scope path -> measured CPU seconds, from the committed table."""
    return json.loads(path.read_text(encoding="utf-8"))["cpu_seconds"]


def heaviest_first(nodeids: list[str], costs: dict[str, float]) -> list[int]:
    """Positions of ``nodeids`` (n test ids) in run order: scopes by cost, dearest first, unlisted
    scopes (cost 0) last; ties and the tests inside a scope keep their collection order.
    Returns a permutation of range(n)."""
    first_seen: dict[str, int] = {}
    for i, nodeid in enumerate(nodeids):
        first_seen.setdefault(scope_of(nodeid), i)

    def key(i: int) -> tuple:
        scope = scope_of(nodeids[i])
        return (-costs.get(scope, 0.0), first_seen[scope], i)

    return sorted(range(len(nodeids)), key=key)
