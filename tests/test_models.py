"""bertlib.models: the bundled real BERT loads offline; bad input gives clear errors."""

import warnings

import numpy as np
import pytest
import torch

from bertlib import models
from bertlib.models import (
    DEFAULT_MODEL,
    attention_maps,
    check_layer_head,
    encode,
    load_bert,
    run_bert,
)

SENTENCE = "The cat sat on the mat"


@pytest.fixture(scope="module")
def bert():
    return load_bert()


def test_load_bert_offline_gives_the_bundled_six_layer_model(bert, monkeypatch):
    monkeypatch.setattr(models, "_hub_reachable", lambda timeout=3.0: False)
    model, tokenizer, name = bert
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

    monkeypatch.setattr(models, "_hub_reachable", unreachable)
    with pytest.raises(OSError, match="no network") as info:
        load_bert("surely-not-a-real-model-name-1234")
    assert DEFAULT_MODEL in str(info.value)
    assert calls, "the hub must be probed (with a timeout) instead of waiting on a download"


def test_hub_probe_returns_false_quickly_when_offline(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("network unreachable")

    monkeypatch.setattr(models.socket, "create_connection", refuse)
    assert models._hub_reachable() is False


@pytest.mark.parametrize("name, error", [("", ValueError), ("   ", ValueError), (3, TypeError)])
def test_bad_model_name_types(name, error):
    with pytest.raises(error, match="name must be"):
        load_bert(name)


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_empty_or_whitespace_text_is_refused(bert, text):
    with pytest.raises(ValueError, match="empty or only whitespace"):
        encode(text, model=bert)
    with pytest.raises(ValueError, match="empty or only whitespace"):
        attention_maps(text, model=bert)


def test_empty_second_sentence_is_refused(bert):
    with pytest.raises(ValueError, match="text_pair is empty"):
        encode(SENTENCE, " ", model=bert)


def test_invisible_only_text_is_refused(bert):
    with pytest.raises(ValueError, match="no word pieces"):
        encode("\u200b", model=bert)


def test_non_string_text_is_a_type_error(bert):
    with pytest.raises(TypeError, match="text must be a string, got int"):
        encode(42, model=bert)


def test_600_words_is_an_error_naming_the_length_and_limit(bert):
    text = " ".join(["word"] * 600)
    with pytest.raises(ValueError, match=r"602 word pieces long .* 512 positions"):
        encode(text, model=bert)


def test_600_words_with_truncate_warns_with_the_count(bert):
    text = " ".join(["word"] * 600)
    with pytest.warns(UserWarning, match="90 of 602 word pieces dropped"):
        enc = encode(text, model=bert, truncate=True)
    assert enc["input_ids"].shape == (1, 512)
    with pytest.warns(UserWarning, match="90 of 602"):
        run_bert(text, model=bert, truncate=True)
    with pytest.warns(UserWarning, match="90 of 602"):  # cached call warns again
        tokens, att = attention_maps(text, model=bert, truncate=True)
    assert len(tokens) == 512 and tokens[-1] == "[SEP]" and att.shape == (6, 12, 512, 512)
    models.clear_run_cache()


def test_emoji_cjk_and_accents_tokenize_without_crashing(bert):
    tokens, att = attention_maps("Café naïve 😀 日本 Ångström", model=bert)
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
    assert "cafe" in tokens and "naive" in tokens  # accents stripped (uncased vocabulary)
    assert "[UNK]" in tokens  # the emoji is not in the vocabulary
    assert "日" in tokens and "本" in tokens  # CJK characters are split one per piece
    assert np.allclose(att.sum(-1), 1, atol=1e-5)


def test_attention_rows_sum_to_one_and_shapes(bert):
    tokens, att = attention_maps(SENTENCE, model=bert)
    assert tokens == ["[CLS]", "the", "cat", "sat", "on", "the", "mat", "[SEP]"]
    assert att.shape == (6, 12, 8, 8)
    assert np.allclose(att.sum(-1), 1, atol=1e-5)
    assert (att >= 0).all()


def test_sentence_pair_has_token_types(bert):
    run = run_bert("The cat sat.", "It was tired.", model=bert)
    first_sep = run.tokens.index("[SEP]")
    assert run.token_type_ids[: first_sep + 1].tolist() == [0] * (first_sep + 1)
    assert set(run.token_type_ids[first_sep + 1:].tolist()) == {1}
    assert run.hidden_states.shape == (7, len(run.tokens), 384)


def test_run_bert_matches_transformers_and_is_read_only(bert):
    run = run_bert(SENTENCE, model=bert)
    enc = encode(SENTENCE, model=bert)
    with torch.no_grad():
        out = bert.model(**enc, output_attentions=True)
    assert np.allclose(run.attentions[2], out.attentions[2][0].numpy(), atol=1e-6)
    assert run_bert(SENTENCE, model=bert) is run  # cached
    with pytest.raises(ValueError, match="read-only"):
        run.attentions[0, 0, 0, 0] = 1.0


def test_run_cache_is_bounded_by_bytes(bert, monkeypatch):
    models.clear_run_cache()
    monkeypatch.setattr(models, "_RUN_CACHE_MAX_BYTES", 1)
    run_bert("one sentence", model=bert)
    run_bert("another sentence", model=bert)
    assert len(models._RUN_CACHE) == 1  # the newest entry is always kept
    models.clear_run_cache()


@pytest.mark.parametrize("source", ["model", "loaded", "array", "run"])
def test_check_layer_head_accepts_models_runs_and_arrays(bert, source):
    att = np.zeros((6, 12, 3, 3))
    obj = {"model": bert.model, "loaded": bert, "array": att,
           "run": run_bert(SENTENCE, model=bert)}[source]
    assert check_layer_head(obj, 5, 11) == (5, 11)
    assert check_layer_head(obj, np.int64(0), None) == (0, None)


def test_check_layer_head_messages_name_the_range(bert):
    with pytest.raises(ValueError, match=r"layer must be in 0\.\.5 for this model \(6 layers\), got 7"):
        check_layer_head(bert, 7, 0)
    with pytest.raises(ValueError, match=r"head must be in 0\.\.11 for this model \(12 heads\), got 12"):
        check_layer_head(bert, 0, 12)
    with pytest.raises(ValueError, match="got -1"):
        check_layer_head(bert, -1, 0)
    with pytest.raises(TypeError, match="layer must be a whole number"):
        check_layer_head(bert, 1.5, 0)
    with pytest.raises(TypeError, match="head must be a whole number"):
        check_layer_head(bert, 1, True)
    with pytest.raises(TypeError, match="head must be a whole number"):
        check_layer_head(bert, 1, None, allow_mean=False)
    with pytest.raises(TypeError, match="needs a model"):
        check_layer_head([1, 2], 0, 0)


def test_no_warning_for_ordinary_input(bert):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run_bert("A short and ordinary sentence.", model=bert)


def test_register_attention_pairs_the_function_with_the_additive_mask():
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import eager_mask

    from bertlib.models import register_attention

    def fn(module, query, key, value, attention_mask, **kwargs):  # pragma: no cover - not run
        raise AssertionError

    register_attention("bertlib_test_registration", fn)
    assert AttentionInterface()["bertlib_test_registration"] is fn
    assert AttentionMaskInterface()["bertlib_test_registration"] is eager_mask
