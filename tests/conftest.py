"""Fixtures shared by the unit tests, and the markers that split them.

Markers (registered in pyproject.toml):
- ``model``: the test loads the real pretrained BERT (a second or two the first time in a
  process). Marked automatically: a test that takes the ``bert`` fixture, or whose code or
  fixtures call one of the functions in ``_LOADS_MODEL``; any other with ``@pytest.mark.model``.
  Check the split with ``BERTLIB_MODEL=/nonexistent make test-unit``: nothing may fail.
- ``slow``: the test alone takes about a second or more on a 2-core machine.

``make test-unit`` runs the rest, the numpy tests, in seconds: ``pytest -m "not model and not
slow"``; ``make test`` runs everything.
"""

import inspect
import re
import sys

import numpy as np
import pytest
import scope_order

from bertlib.hf.loading import load_bert

# torch, and transformers through bertlib.tiny, are imported inside the fixtures that use them:
# under xdist the controller process loads this file too and runs no test, and importing them
# here cost it about 8 s of CPU before the workers started (the test modules import what they use).


@pytest.fixture(scope="session")
def bert():
    """The bundled pretrained BERT as a LoadedBert (model, tokenizer, name), loaded once."""
    return load_bert()


@pytest.fixture
def attentions():
    """Random attention weights of shape (layers 2, heads 3, n 5, n 5); each row sums to 1."""
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(2, 3, 5, 5))
    e = np.exp(scores)
    return e / e.sum(-1, keepdims=True)


@pytest.fixture(autouse=True)
def close_figures():
    """After every test, close the matplotlib figures it left open (none are shared)."""
    yield
    plt = sys.modules.get("matplotlib.pyplot")  # not imported: no figure can be open
    if plt is not None:
        plt.close("all")


#: Calls that load or run the real model: a test whose own code makes one is a ``model`` test.
_LOADS_MODEL = re.compile(
    r"\b(load_bert|run_bert|attention_maps|encode|sentence_vectors|head_importance|"
    r"ablated_head|bert_forward|forward_text|bert_params|bert_qkv|bert_layer|mask_sentence|"
    r"[A-Za-z]*Explorer|all_explorers|"
    # corpus statistics and exercise checkers that run the real model inside
    r"run_corpus|sep_shares|reference_position_prior|_heads_where_top|_heads_both_ways|right_heads|"
    r"check_(det_noun_head|position_guess|heads|"
    r"bank_sentence|sep_prediction|plugged_in|position_prior))\("
)


def _calls_model(func) -> bool:
    try:
        return bool(_LOADS_MODEL.search(inspect.getsource(func)))
    except (OSError, TypeError):
        return False


def _loads_model(item) -> bool:
    """The test takes ``bert``, or its code or one of its fixtures' code loads the model."""
    if "bert" in getattr(item, "fixturenames", ()):
        return True
    if _calls_model(getattr(item, "function", None)):
        return True
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info else ()):
        if any(_calls_model(d.func) for d in defs if d.baseid):  # the project's own fixtures
            return True
    return False


def pytest_configure(config):
    """Under ``--dist loadscope``, xdist hands the scopes out in collection order (which the hook
    below makes heaviest first) instead of its default, most tests first (tests/scope_order.py)."""
    if getattr(config.option, "dist", None) == "loadscope":
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items):
    for item in items:  # before -m selects: this hook runs ahead of pytest's own
        if _loads_model(item):
            item.add_marker(pytest.mark.model)


@pytest.hookimpl(trylast=True, specname="pytest_collection_modifyitems")
def pytest_collection_modifyitems_heaviest_first(config, items):
    """On an xdist worker, after selection and pytest's own reordering: the scopes in the order
    the run hands them out, dearest first (tests/scope_order.py). A second implementation of
    the hook in this file: pytest reads hooks only from names starting with ``pytest_``, and
    ``specname`` says which hook this one is."""
    if hasattr(config, "workerinput"):
        order = scope_order.heaviest_first([item.nodeid for item in items],
                                           scope_order.load_costs())
        items[:] = [items[i] for i in order]


# --------------------------------------------------------------------------- seeded Q, K, V
# Shared by several test modules as fixtures (no test module imports another): each returns a
# function, so a test makes as many inputs, of as many shapes, as it needs.


@pytest.fixture
def torch_qkv():
    """make(shape, seed=0, dtype=torch.float32) -> (Q, K, V): three unit-normal torch tensors of
    ``shape``, from one seeded generator (the kernels' and the cost sweeps' inputs)."""
    import torch

    def make(shape, seed=0, dtype=torch.float32):
        gen = torch.Generator().manual_seed(seed)
        return tuple(torch.randn(shape, generator=gen, dtype=dtype) for _ in range(3))
    return make


@pytest.fixture
def numpy_qkv():
    """make(n=24, d=8, seed=0, scale=1.0) -> (Q, K, V): three (n, d) float64 arrays of seeded
    normal numbers times ``scale`` (one head, for the variants and the approximations)."""
    def make(n=24, d=8, seed=0, scale=1.0):
        rng = np.random.default_rng(seed)
        return tuple(rng.standard_normal((n, d)) * scale for _ in range(3))
    return make


@pytest.fixture
def torch_masked():
    """attend(Q, K, V, mask) -> torch's own softmax attention of numpy arrays over a bool mask
    (True = may attend), as a numpy array: the independent reference of the sparse patterns."""
    import torch
    import torch.nn.functional as F

    def attend(Q, K, V, mask):
        t = [torch.from_numpy(np.ascontiguousarray(a)) for a in (Q, K, V)]
        return F.scaled_dot_product_attention(*t, attn_mask=torch.from_numpy(mask)).numpy()
    return attend


@pytest.fixture(scope="module")
def tok():
    """The word-level tokenizer of notebook 09's generated language (bertlib.tiny.agreement)."""
    from bertlib.tiny import agreement

    return agreement.build_tokenizer()


@pytest.fixture(scope="module")
def tiny(tok):
    """A fresh, untrained tiny BERT for that language (2 layers, 2 heads, 16 wide, seed 0); one per
    test module, so a module that trains it never changes another's."""
    from bertlib.tiny import pretrain as pt

    return pt.new_model(pt.tiny_config(tok.get_vocab_size(), layers=2, heads=2, hidden=16), 0)
