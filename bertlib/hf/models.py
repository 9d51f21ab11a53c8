"""BERT run on text: checked tokenising, the cached forward pass and its attention maps.

``run_bert`` runs a model from :mod:`bertlib.hf.loading` once per input and keeps the result
(a :class:`BertRun`: tokens, hidden states, attention weights) in a cache bounded by bytes; the
cache is keyed by what decides the pass (:func:`forward_state`), so a trained or edited model is
never served a stale pass. ``check_layer_head`` checks a (layer, head) pair against a model.
"""

from __future__ import annotations

import itertools
import os
import warnings
import weakref
from collections import OrderedDict
from typing import NamedTuple

import numpy as np
import torch

from bertlib import checks
from bertlib.hf.loading import (
    LoadedBert,
    bundled_model_path,
    load_bert,
    load_pretrained,
    max_positions,
)

__all__ = [
    "BertRun",
    "encode",
    "run_bert",
    "attention_maps",
    "check_layer_head",
    "clear_run_cache",
    "parameters_state",
    "forward_state",
    "batch_runs",
    "has_mlm_head",
    "fill_mask",
]

class BertRun(NamedTuple):
    """One forward pass of one input.

    tokens: list of n word pieces, [CLS] ... [SEP] (... [SEP]).
    input_ids, token_type_ids: (n,) int arrays.
    hidden_states: (layers + 1, n, d) float32; index 0 is the embedding output.
    attentions: (layers, heads, n, n) float32; each row sums to 1.
    """

    tokens: list[str]
    input_ids: np.ndarray
    token_type_ids: np.ndarray
    hidden_states: np.ndarray
    attentions: np.ndarray


def _tokenize(text, text_pair, model: LoadedBert, truncate: bool) -> tuple[dict, int, int]:
    """Checked tokenisation: (encoding of shape (1, n), pieces dropped, pieces before cutting)."""
    for label, t in (("text", text), ("text_pair", text_pair)):
        if t is None and label == "text_pair":
            continue
        checks.text(t, label)
        if not model.tokenizer(t, add_special_tokens=False, verbose=False)["input_ids"]:
            raise ValueError(f"{label} {t!r} gives no word pieces (only invisible characters?)")
    limit = max_positions(model)
    enc = model.tokenizer(text, text_pair, return_tensors="pt", truncation=False, verbose=False)
    n = int(enc["input_ids"].shape[1])
    dropped = 0
    if not truncate:
        checks.within_positions(n, limit, "shorten it, or pass truncate=True to keep the "
                                f"first {limit}")
    if n > limit:
        enc = model.tokenizer(text, text_pair, return_tensors="pt", truncation=True,
                              max_length=limit)
        dropped = n - int(enc["input_ids"].shape[1])
    if "token_type_ids" not in enc:
        enc["token_type_ids"] = torch.zeros_like(enc["input_ids"])
    return enc, dropped, n


def _warn_truncated(dropped: int, n: int, limit: int) -> None:
    warnings.warn(
        f"input truncated: {dropped} of {n} word pieces dropped to fit {limit} positions",
        UserWarning, stacklevel=3,
    )


def encode(text: str, text_pair: str | None = None, model: LoadedBert | None = None,
           truncate: bool = False) -> dict:
    """Tokenize one input (or a sentence pair) the way BERT sees it, after checking it.

    Returns a dict of torch tensors of shape (1, n): input_ids, token_type_ids, attention_mask.
    Raises TypeError for a non-string, ValueError for empty or whitespace-only text, and for
    input longer than the model's positions (512 for BERT) unless ``truncate=True``, which cuts
    it and warns how many pieces were dropped. Characters outside the vocabulary (most emoji,
    rare symbols) become the piece ``[UNK]``; accents are stripped (uncased vocabulary).
    """
    model = model or load_bert()
    enc, dropped, n = _tokenize(text, text_pair, model, truncate)
    if dropped:
        _warn_truncated(dropped, n, max_positions(model))
    return enc


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


#: Forward passes kept in memory, least recently used dropped first. Bounded by bytes because
#: one 512-piece input already holds 6 x 12 x 512 x 512 float32 attention weights (75 MB).
#: Keyed by the model's identity token (never reused, see :func:`_identity`) and its
#: :func:`forward_state`, so a changed weight or attention implementation is never served stale.
_RUN_CACHE: OrderedDict = OrderedDict()
_RUN_CACHE_MAX_BYTES = 256 * 2**20
_RUN_CACHE_MAX_ITEMS = 64
_TOKENS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_NEXT_TOKEN = itertools.count()


def clear_run_cache() -> None:
    """Forget every cached forward pass of :func:`run_bert` (frees their memory)."""
    _RUN_CACHE.clear()


def _forget(token: int) -> None:
    """Drop the cached passes of a model that no longer exists."""
    for key in [k for k in _RUN_CACHE if token in k[0]]:
        del _RUN_CACHE[key]


def _identity(obj) -> int:
    """A number for ``obj`` that no other object ever gets, even one at the same address.

    ``id()`` is reused once an object is freed; these tokens count up and are never reused,
    and the cached passes of an object are dropped when it is freed.
    """
    token = _TOKENS.get(obj)
    if token is None:
        token = _TOKENS[obj] = next(_NEXT_TOKEN)
        weakref.finalize(obj, _forget, token).atexit = False
    return token


def parameters_state(module) -> tuple:
    """A value that changes whenever any parameter or buffer of a torch ``module`` changes.

    One (version, address) pair per tensor: torch counts every in-place change of a tensor
    (an optimizer step, ``mul_``/``copy_`` under ``no_grad``, ``load_state_dict``) in its
    ``_version``, and a replaced tensor (``p.data = ...``, another dtype or device) has a new
    address. Not seen: writes through ``p.data.mul_(...)`` or a numpy view of the memory, which
    bypass the counter; call :func:`clear_run_cache` after those.
    """
    tensors = itertools.chain(module.parameters(), module.buffers())
    return tuple((t._version, t.data_ptr()) for t in tensors)


def forward_state(module) -> tuple:
    """:func:`parameters_state` plus what else decides a transformers model's forward pass.

    The attention implementation's name and the functions registered under it (attention and
    mask; a name can be registered again with another function) and train/eval mode.
    """
    # imported here, not at the top: a model exists, so transformers is loaded by now, and
    # importing bertlib.hf.models stays cheap (transformers takes seconds)
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    impl = getattr(module.config, "_attn_implementation", None)
    return (impl, ALL_ATTENTION_FUNCTIONS.get(impl), ALL_MASK_ATTENTION_FUNCTIONS.get(impl),
            module.training, parameters_state(module))


def batch_runs(enc: dict, model: LoadedBert) -> list[BertRun]:
    """One forward pass of a tokenized batch, as one :class:`BertRun` per input.

    enc: the tokenizer's torch tensors (B, N) input_ids, token_type_ids, attention_mask (padded
    batches allowed). Each run is cut back to its own real tokens (padding keys get weight 0, so
    nothing is lost): tokens (n,), input_ids (n,), token_type_ids (n,), hidden_states
    (layers + 1, n, d), attentions (layers, heads, n, n), all read-only. The one place a BertRun
    is built.
    """
    with torch.no_grad():
        out = model.model(**enc, output_attentions=True, output_hidden_states=True)
    attentions = torch.stack(out.attentions, 1).numpy()  # (B, L, H, N, N)
    hidden = torch.stack(out.hidden_states, 1).numpy()  # (B, L + 1, N, d)
    runs = []
    for b, real in enumerate(enc["attention_mask"].numpy().astype(bool)):
        ids = enc["input_ids"][b].numpy()[real]  # the real tokens, wherever the padding sits
        runs.append(BertRun(
            tokens=model.tokenizer.convert_ids_to_tokens(ids.tolist()),
            input_ids=_readonly(ids),
            token_type_ids=_readonly(enc["token_type_ids"][b].numpy()[real]),
            hidden_states=_readonly(hidden[b][:, real]),
            attentions=_readonly(attentions[b][:, :, real][..., real]),
        ))
    return runs


def _forward(model: LoadedBert, text: str, text_pair: str | None,
             truncate: bool) -> tuple[BertRun, int, int]:
    enc, dropped, n = _tokenize(text, text_pair, model, truncate)
    return batch_runs(enc, model)[0], dropped, n


def _run_nbytes(run: BertRun) -> int:
    return run.hidden_states.nbytes + run.attentions.nbytes


def run_bert(text: str, text_pair: str | None = None, model: LoadedBert | None = None,
             truncate: bool = False) -> BertRun:
    """Run BERT once on ``text`` (and ``text_pair``); cached, so repeating a sentence is free.

    Returns BertRun(tokens, input_ids (n,), token_type_ids (n,), hidden_states (L+1, n, d),
    attentions (L, H, n, n)). The arrays are read-only (they are shared by the cache): copy
    before changing them. The cache is keyed by the model's :func:`forward_state`, so after
    training, an edited weight or another attention implementation the pass runs again.
    Errors as in :func:`encode`; the truncation warning is repeated on every call, cached or not.
    """
    model = model or load_bert()
    who = (_identity(model.model), _identity(model.tokenizer))
    state = forward_state(model.model)
    key = (who, state, model.name, text, text_pair, bool(truncate))
    if model.model.training:  # dropout is on: every pass differs, so none is kept
        run, dropped, n = _forward(model, text, text_pair, bool(truncate))
    elif key in _RUN_CACHE:
        _RUN_CACHE.move_to_end(key)
        run, dropped, n = _RUN_CACHE[key]
    else:
        for old in [k for k in _RUN_CACHE if k[0] == who and k[1] != state]:
            del _RUN_CACHE[old]  # passes of this model's earlier parameters can never be hit again
        run, dropped, n = _forward(model, text, text_pair, bool(truncate))
        _RUN_CACHE[key] = (run, dropped, n)
        total = sum(_run_nbytes(r) for r, _, _ in _RUN_CACHE.values())
        while len(_RUN_CACHE) > 1 and (total > _RUN_CACHE_MAX_BYTES
                                       or len(_RUN_CACHE) > _RUN_CACHE_MAX_ITEMS):
            old, _, _ = _RUN_CACHE.popitem(last=False)[1]
            total -= _run_nbytes(old)
    if dropped:
        _warn_truncated(dropped, n, max_positions(model))
    return run


def attention_maps(text: str, text_pair: str | None = None, model: LoadedBert | None = None,
                   truncate: bool = False) -> tuple[list[str], np.ndarray]:
    """(tokens, attentions): the n word pieces and every head's weights, (layers, heads, n, n).

    attentions[l, h, i, j] is how much token i attends to token j in head h of layer l
    (0-based); each row sums to 1. Read-only array (cached); errors as in :func:`encode`.
    """
    run = run_bert(text, text_pair, model, truncate)
    return run.tokens, run.attentions


def _check_sizes_source(source) -> tuple[int, int]:
    """``source`` checked as something with layers and heads (a model, a run, or attention
    maps (layers, heads, n, n)); returns its (number of layers, heads per layer), or a
    TypeError. check_layer_head's input check: only this module knows a BertRun and a
    LoadedBert."""
    if isinstance(source, BertRun):
        source = source.attentions
    if isinstance(source, LoadedBert):
        source = source.model
    config = getattr(source, "config", None)
    if config is not None:
        return int(config.num_hidden_layers), int(config.num_attention_heads)
    shape = np.shape(source)
    if len(shape) < 2:
        raise TypeError(
            "check_layer_head needs a model, a BertRun or attentions of shape "
            f"(layers, heads, n, n); got {type(source).__name__} of shape {shape}"
        )
    return int(shape[0]), int(shape[1])


def check_layer_head(model_or_attentions, layer, head=None,
                     allow_mean: bool = True) -> tuple[int, int | None]:
    """Validate 0-based ``layer`` and ``head`` indices; return them as ``(layer, head)`` ints.

    model_or_attentions: a LoadedBert, a transformers model (its config gives the sizes), a
    BertRun, or an attention array of shape (layers, heads, n, n).
    head: an index, or None for "the mean of all heads" when ``allow_mean`` is True.
    Raises TypeError for a non-integer and ValueError naming the valid range, e.g.
    ``layer must be a whole number in 0..5 (6 layers), got 7``.
    """
    n_layers, n_heads = _check_sizes_source(model_or_attentions)
    layer = checks.whole(layer, "layer", 0, n_layers - 1, why=f"({n_layers} layers)")
    if head is None and allow_mean:
        return layer, None
    return layer, checks.whole(head, "head", 0, n_heads - 1, why=f"({n_heads} heads)")


# ---------------------------------------------------------------- fill-mask with a hub model

def has_mlm_head(folder: str | None = None) -> bool:
    """Whether a model folder's parameters include BERT's masked-LM head (``cls.predictions.*``).

    folder: None for the bundled model. Reads only the names in ``model.safetensors``.
    """
    from safetensors import safe_open  # third-party, loaded only when needed

    path = os.path.join(folder or bundled_model_path(), "model.safetensors")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no model.safetensors in {folder!r}")
    with safe_open(path, "np") as f:
        return any(key.startswith("cls.predictions") for key in f.keys())


def fill_mask(text: str, name: str = "bert-base-uncased", k: int = 5) -> list[tuple[str, float]]:
    """The k most likely words for the single [MASK] in ``text`` by a model with an MLM head.

    name: a hub id or folder of a model trained with masked-LM (the bundled model has no MLM
    head). Returns [(word piece, probability), ...], most likely first. Raises OSError naming
    the problem when the model cannot be loaded (e.g. no network), ValueError unless ``text``
    holds exactly one [MASK].
    """
    checks.one_mask_token(text)
    from transformers import AutoModelForMaskedLM, AutoTokenizer  # loaded when a model is asked for

    model = load_pretrained(AutoModelForMaskedLM, name).eval()
    tok = load_pretrained(AutoTokenizer, name)
    enc = tok(text, return_tensors="pt")
    where = int((enc["input_ids"][0] == tok.mask_token_id).nonzero()[0, 0])
    with torch.no_grad():
        probs = model(**enc).logits[0, where].softmax(-1)
    top = probs.topk(k)
    return [(tok.convert_ids_to_tokens(int(i)), float(p))
            for p, i in zip(top.values, top.indices, strict=True)]
