"""tests/scope_order.py: make test's scopes go to the xdist workers heaviest first."""

from pathlib import Path

import pytest
from scope_order import heaviest_first, load_costs, scope_of

ROOT = Path(__file__).resolve().parents[1]

IDS = ["tests/test_a.py::test_1", "tests/test_a.py::test_2",
       "notebooks/01_x.ipynb::Cell 0", "notebooks/01_x.ipynb::Cell 1",
       "tests/test_b.py::test_1[p]", "tests/test_b.py::test_1[q]",
       "notebooks/solutions/01_x.ipynb::Cell 0", "tests/test_c.py::test_1"]


def test_dearest_scope_first_then_unlisted_in_collection_order():
    costs = {"notebooks/solutions/01_x.ipynb": 30.0, "notebooks/01_x.ipynb": 12.0,
             "tests/test_b.py": 12.0}
    order = [IDS[i] for i in heaviest_first(IDS, costs)]
    assert order == [
        "notebooks/solutions/01_x.ipynb::Cell 0",
        "notebooks/01_x.ipynb::Cell 0", "notebooks/01_x.ipynb::Cell 1",  # tie: collected first
        "tests/test_b.py::test_1[p]", "tests/test_b.py::test_1[q]",
        "tests/test_a.py::test_1", "tests/test_a.py::test_2", "tests/test_c.py::test_1",
    ]


def test_without_costs_the_collection_order_stays():
    assert heaviest_first(IDS, {}) == list(range(len(IDS)))
    assert heaviest_first([], {"tests/test_a.py": 1.0}) == []


@pytest.mark.parametrize("nodeid, scope", [
    ("notebooks/04_what_heads_look_at.ipynb::Cell 12", "notebooks/04_what_heads_look_at.ipynb"),
    ("tests/test_models.py::test_x[a::b]", "tests/test_models.py"),
    ("tests/test_models.py", "tests/test_models.py"),
])
def test_scope_is_the_module_or_notebook(nodeid, scope):
    assert scope_of(nodeid) == scope


def test_the_committed_costs_name_every_notebook_and_only_files_that_exist():
    costs = load_costs()
    notebooks = {p.relative_to(ROOT).as_posix() for p in
                 [*ROOT.glob("notebooks/*.ipynb"), *ROOT.glob("notebooks/solutions/*.ipynb")]}
    assert notebooks - set(costs) == set(), "measure the new notebooks (tests/scope_costs.json)"
    assert [s for s in costs if not (ROOT / s).is_file()] == [], "a listed scope is gone"
    assert all(isinstance(c, (int, float)) and c > 0 for c in costs.values())


def test_conftest_orders_last_and_marks_before_selection(request):
    # pytest silently ignores a hook whose name does not start with pytest_, and -m selects in
    # its own pytest_collection_modifyitems: the model marker must come before it, the order after
    impls = request.config.pluginmanager.hook.pytest_collection_modifyitems.get_hookimpls()
    where = [(impl.function.__module__, impl.function.__name__) for impl in impls]
    ours = {name: impl for impl, (module, name) in zip(impls, where, strict=True)
            if module == "conftest"}
    assert ours["pytest_collection_modifyitems_heaviest_first"].trylast
    assert not ours["pytest_collection_modifyitems"].trylast
    # pluggy calls the implementations from the end of this list to its start
    assert where.index(("conftest", "pytest_collection_modifyitems")) > where.index(
        ("_pytest.mark", "pytest_collection_modifyitems"))
