"""bertlib.exercises.nb01 … nb03 offer no answer: Tab on ``nbNN.`` in a lesson shows the
checkers and the names the notebooks use, never a function or constant that computes or
bounds an exercise's answer (learner 30 found ``nb03.heads_both_ways()``, exercise 3's answer,
``nb03.bank_cosine``, exercise 2's, the band around it, and ``nb01.window_mask``; learner 31
found ``nb01.band`` and ``nb01.scaled_dot_product_attention``, imported names, which together
pass 01's exercise 3 that forbids ``mask=``)."""

import ast
import inspect
import json
import re
from pathlib import Path

import pytest

from bertlib.exercises import embedding_slips, nb01, nb02, nb03, toy_design

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
#: The helper modules whose functions hold parts of an exercise's answer (the toy's Q, K, V;
#: the right embeddings), besides the checker modules themselves.
ANSWER_HELPERS = (toy_design, embedding_slips)


def names_the_notebooks_use(module) -> set[str]:
    """Every ``nbNN.NAME`` in the cells of lesson NN and its solutions."""
    short = module.__name__.rsplit(".", 1)[1]
    paths = [*NOTEBOOKS.glob(f"{short[2:]}_*.ipynb"), *NOTEBOOKS.glob(f"solutions/{short[2:]}_*")]
    assert len(paths) == 2, paths
    text = "".join("".join(cell["source"]) for path in paths
                   for cell in json.loads(path.read_text())["cells"])
    return set(re.findall(rf"\b{short}\.([A-Za-z_]\w*)", text))


def public_assignments(module) -> set[str]:
    """The public names a module assigns at its top level (its constants)."""
    tree = ast.parse(inspect.getsource(module))
    targets = [t for node in tree.body if isinstance(node, ast.Assign | ast.AnnAssign)
               for t in (node.targets if isinstance(node, ast.Assign) else [node.target])]
    names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return {name for name in names if not name.startswith("_")}


@pytest.mark.parametrize("module", [nb01, nb02, nb03], ids=lambda m: m.__name__)
def test_all_holds_the_checkers_and_what_the_notebooks_use(module):
    checkers = {name for name, value in vars(module).items()
                if name.startswith("check_") and inspect.isfunction(value)
                and value.__module__ == module.__name__}  # not an imported check
    used = names_the_notebooks_use(module)
    assert checkers and checkers <= used  # each checker is called by its lesson
    assert set(module.__all__) == checkers | used, (
        f"{module.__name__}.__all__ should be its checkers and the names notebooks use: "
        f"remove {sorted(set(module.__all__) - checkers - used)}, "
        f"add {sorted(checkers | used - set(module.__all__))}")


@pytest.mark.parametrize("module", [nb01, nb02, nb03], ids=lambda m: m.__name__)
def test_no_public_function_but_the_checkers_computes_an_answer(module):
    homes = {module.__name__} | {helper.__name__ for helper in ANSWER_HELPERS}
    public = sorted(name for name, value in vars(module).items()
                    if not name.startswith("_") and inspect.isfunction(value)
                    and value.__module__ in homes and not name.startswith("check_"))
    assert not public, f"make these private (a leading _), or move them: {public}"


@pytest.mark.parametrize("module", [nb01, nb02, nb03], ids=lambda m: m.__name__)
def test_every_public_constant_is_one_the_notebooks_use(module):
    hidden = sorted(public_assignments(module) - set(module.__all__))
    assert not hidden, f"private (a leading _) unless a notebook uses it: {hidden}"


def offered_on_tab(module) -> set[str]:
    """What Tab on ``nbNN.`` lists (IPython completes from dir()): every public attribute,
    defined or imported, dunders aside (those start with _ and need a typed _ too)."""
    return {name for name in dir(module) if not name.startswith("_")}


@pytest.mark.parametrize("module", [nb01, nb02, nb03], ids=lambda m: m.__name__)
def test_tab_offers_only_what_all_names(module):
    extra = sorted(offered_on_tab(module) - set(module.__all__))
    assert not extra, (f"{module.__name__} offers {extra} on Tab: import them as private aliases "
                       "(from bertlib.paper import attention as _attention)")


@pytest.mark.parametrize("module", [nb01, nb02, nb03], ids=lambda m: m.__name__)
def test_the_notebooks_name_no_private_helper(module):
    private = sorted(name for name in names_the_notebooks_use(module) if name.startswith("_"))
    assert not private, f"a lesson or solution names {module.__name__}'s private {private}"


def test_tab_scanner_sees_an_imported_name(monkeypatch):
    from bertlib.paper.attention import band
    monkeypatch.setattr(nb01, "band", band, raising=False)
    assert "band" in offered_on_tab(nb01)
    with pytest.raises(AssertionError, match="band"):
        test_tab_offers_only_what_all_names(nb01)


def test_the_answers_learner_30_found_are_gone():
    for module, name in [(nb03, "heads_both_ways"), (nb03, "heads_where_top"),
                         (nb03, "bank_cosine"), (nb03, "GUESS_TOLERANCE"),
                         (nb03, "GUESS_ABOVE"), (nb03, "embedding_variants"),
                         (nb01, "window_mask"), (nb01, "toy_qkv"), (nb01, "band"),
                         (nb01, "scaled_dot_product_attention"), (nb02, "split_heads")]:
        assert not hasattr(module, name), f"{module.__name__}.{name}"


def test_the_scanners_see_a_public_helper_and_a_public_constant(monkeypatch):
    monkeypatch.setattr(nb03, "heads_both_ways", nb03._heads_both_ways, raising=False)
    with pytest.raises(AssertionError, match="heads_both_ways"):
        test_no_public_function_but_the_checkers_computes_an_answer(nb03)
    assigned = public_assignments(nb03)
    assert "EMBED_PAIR" in assigned and "_GUESS_ABOVE" not in assigned


@pytest.mark.parametrize("module", [nb01, nb02, nb03], ids=lambda m: m.__name__)
def test_a_value_the_prose_types_beside_a_name_is_the_modules(module):
    # learner 31 (the 03 estimate typed in prose, 6-8x off): where a lesson writes
    # "`nbNN.NAME` = value", the value must be the module's own
    short = module.__name__.rsplit(".", 1)[1]
    path, = NOTEBOOKS.glob(f"{short[2:]}_*.ipynb")
    text = "".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"]
                   if c["cell_type"] == "markdown")
    typed = re.findall(rf"`{short}\.(\w+)` = ([0-9.e+-]+\d)", text)
    for name, value in typed:
        assert float(value) == getattr(module, name), (name, value, getattr(module, name))
    assert short != "nb01" or ("PENCIL_ATOL", "0.001") in typed  # the scan sees 01's tolerance
