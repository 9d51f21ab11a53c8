"""bertlib.hf.loading: the bundled real BERT loads offline; a wrong name, a missing folder or a
folder that is not a BERT gives a clear error naming the default; loading leaves process-wide
settings alone; bert_module is the one unwrap of a model."""

import json
import socket

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM, BertModel, GPT2Config, GPT2Model
from transformers.utils import logging as hf_logging

from bertlib.hf import loading
from bertlib.hf.loading import DEFAULT_MODEL, bert_module, load_bert, max_positions
from bertlib.hf.models import attention_maps

SENTENCE = "The cat sat on the mat"


@pytest.mark.model
def test_load_bert_offline_gives_the_bundled_six_layer_model(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("this test has no network")

    monkeypatch.setattr(socket.socket, "connect", refuse)  # any connection attempt fails
    model, tokenizer, name = loading._load.__wrapped__(None)  # a fresh load, not the cached one
    assert name == "all-MiniLM-L6-v2"
    cfg = model.config
    assert (cfg.num_hidden_layers, cfg.num_attention_heads, cfg.hidden_size) == (6, 12, 384)
    assert not model.training
    assert tokenizer.tokenize("playing") == ["playing"]


def test_load_bert_is_cached(bert):
    assert load_bert() is bert


def test_bertlib_model_env_pointing_at_missing_folder_names_the_default(monkeypatch, tmp_path):
    missing = str(tmp_path / "no_such_model")
    monkeypatch.setenv("BERTLIB_MODEL", missing)
    with pytest.raises(FileNotFoundError) as info:
        load_bert()
    message = str(info.value)
    assert missing in message and "BERTLIB_MODEL" in message and DEFAULT_MODEL in message


def test_missing_folder_by_name_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_bert(str(tmp_path / "nothing_here"))


def test_unknown_hub_name_without_network_fails_fast_naming_the_default(monkeypatch):
    calls = []

    def unreachable(timeout=3.0):
        calls.append(timeout)
        return False

    monkeypatch.setattr(loading, "_hub_reachable", unreachable)
    with pytest.raises(OSError, match="no network") as info:
        load_bert("surely-not-a-real-model-name-1234")
    assert DEFAULT_MODEL in str(info.value)
    assert calls, "the hub must be probed (with a timeout) instead of waiting on a download"


def test_hub_probe_returns_false_quickly_when_offline(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("network unreachable")

    monkeypatch.setattr(loading.socket, "create_connection", refuse)
    assert loading._hub_reachable() is False


@pytest.mark.parametrize("name, error", [("", ValueError), ("   ", ValueError), (3, TypeError)])
def test_bad_model_name_types(name, error):
    with pytest.raises(error, match="name must be"):
        load_bert(name)



# ---------------------------------------------------------------- process-wide settings


@pytest.fixture(scope="module")
def tiny_bert_folder(tmp_path_factory, bert):
    """A random 2-layer BERT (hidden 32) saved with the bundled tokenizer: loads offline."""
    folder = tmp_path_factory.mktemp("tiny_bert")
    config = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, vocab_size=len(bert.tokenizer))
    with torch.random.fork_rng():  # seeded weights, and the other tests' random state untouched
        torch.manual_seed(0)
        BertModel(config).save_pretrained(folder)
    bert.tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.parametrize("bars_on", [True, False])
def test_loading_leaves_progress_bars_and_log_level_as_they_were(tiny_bert_folder, bars_on):
    was_on, level = hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()
    (hf_logging.enable_progress_bar if bars_on else hf_logging.disable_progress_bar)()
    try:
        loaded = loading._load.__wrapped__(str(tiny_bert_folder))  # a fresh load, no cache
        assert loaded.model.config.num_hidden_layers == 2
        assert hf_logging.is_progress_bar_enabled() is bars_on
        assert hf_logging.get_verbosity() == level
    finally:
        (hf_logging.enable_progress_bar if was_on else hf_logging.disable_progress_bar)()



# ---------------------------------------------------------------- a folder that is not a BERT


def test_a_gpt2_folder_is_refused_naming_what_a_bert_folder_holds(tmp_path, monkeypatch):
    GPT2Config().save_pretrained(tmp_path)
    monkeypatch.setenv("BERTLIB_MODEL", str(tmp_path))
    with pytest.raises(ValueError) as info:
        load_bert()
    message = str(info.value)
    assert "'gpt2', not \"bert\"" in message
    assert 'config.json with "model_type": "bert"' in message and "vocab.txt" in message
    assert "model.safetensors" in message and DEFAULT_MODEL in message
    assert "BERTLIB_MODEL" in message


def test_a_bert_folder_without_tokenizer_is_refused(tiny_bert_folder, tmp_path):
    for name in ("config.json", "model.safetensors"):
        (tmp_path / name).write_bytes((tiny_bert_folder / name).read_bytes())
    with pytest.raises(ValueError, match=r"it has no tokenizer files \(vocab\.txt or "
                                         r"tokenizer\.json\)") as info:
        load_bert(str(tmp_path))
    assert "config.json" not in str(info.value).split("BERT checkpoint:")[1].split(".")[0]
    assert DEFAULT_MODEL in str(info.value)


def test_an_empty_folder_is_refused_listing_everything_missing(tmp_path):
    with pytest.raises(ValueError) as info:
        load_bert(str(tmp_path))
    message = str(info.value)
    for missing in ("no config.json", "no weights", "no tokenizer files"):
        assert missing in message
    assert DEFAULT_MODEL in message


def test_a_config_that_is_not_json_is_refused(tmp_path):
    (tmp_path / "config.json").write_text("model_type = bert")
    with pytest.raises(ValueError, match="config.json cannot be read as a JSON object"):
        load_bert(str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps(["bert"]))
    with pytest.raises(ValueError, match="config.json cannot be read as a JSON object"):
        load_bert(str(tmp_path))


def test_a_downloaded_model_that_is_not_a_bert_is_refused(monkeypatch):
    tiny = GPT2Config(n_layer=1, n_head=2, n_embd=8, vocab_size=16)
    monkeypatch.setattr(loading, "load_pretrained", lambda auto_class, name, **kw: GPT2Model(tiny))
    with pytest.raises(ValueError, match=r"'some-org/gpt2-like' is a 'gpt2' model, not a BERT"):
        loading._load.__wrapped__("some-org/gpt2-like")


def test_the_tiny_bert_folder_loads(tiny_bert_folder):
    loaded = load_bert(str(tiny_bert_folder))
    tokens, maps = attention_maps(SENTENCE, model=loaded)
    assert maps.shape == (2, 2, len(tokens), len(tokens))



# ---------------------------------------------------------------- the one unwrap of a model


def test_bert_module_unwraps_once_and_names_what_it_accepts(bert):
    assert bert_module(bert) is bert.model
    assert bert_module(bert.model) is bert.model
    assert max_positions(bert) == bert.model.config.max_position_embeddings
    with pytest.raises(TypeError, match="LoadedBert .* or a transformers BertModel, got str"):
        bert_module("bert")


def test_bert_module_unwraps_a_bert_with_a_head():
    config = BertConfig(vocab_size=16, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=16)
    mlm = BertForMaskedLM(config)
    assert bert_module(mlm) is mlm.bert

