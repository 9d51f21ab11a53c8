"""bertlib.models: the bundled real BERT loads offline; bad input gives clear errors; no cache
serves a pass of weights the model no longer has; loading leaves process-wide settings alone."""

import copy
import gc
import json
import socket
import warnings
import weakref

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForMaskedLM, BertModel, GPT2Config, GPT2Model
from transformers.utils import logging as hf_logging

from bertlib import finetune, models
from bertlib.bert import bert_params, forward_text
from bertlib.models import (
    DEFAULT_MODEL,
    LoadedBert,
    attention_maps,
    batch_runs,
    bert_module,
    check_layer_head,
    eager_attention,
    encode,
    load_bert,
    max_positions,
    register_attention,
    run_bert,
    softmax_weights,
)

SENTENCE = "The cat sat on the mat"
# transformers computes in float32 (eps 1.2e-7); the numpy BERT in float64. Rounding errors of
# d-term sums grow like sqrt(d) and add up over the L layers: 1.2e-7 * sqrt(384 * 6) = 5.7e-6
# relative, on attention weights <= 1 -> 1e-5 (as in test_bert.py).
ATOL_NUMPY_ATTENTION = 1e-5
# Each edit below moves some attention weight by far more than that (measured: 1e-3 .. 0.9).
CHANGED = 1e-4


@pytest.mark.model
def test_load_bert_offline_gives_the_bundled_six_layer_model(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("this test has no network")

    monkeypatch.setattr(socket.socket, "connect", refuse)  # any connection attempt fails
    model, tokenizer, name = models._load.__wrapped__(None)  # a fresh load, not the cached one
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
    # a float32 row of n <= 16 weights, each rounded once (eps 1.2e-7), sums to 1 within
    # n * eps = 2e-6 -> 1e-5
    np.testing.assert_allclose(att.sum(-1), 1, rtol=0, atol=1e-5)


def test_attention_rows_sum_to_one_and_shapes(bert):
    tokens, att = attention_maps(SENTENCE, model=bert)
    assert tokens == ["[CLS]", "the", "cat", "sat", "on", "the", "mat", "[SEP]"]
    assert att.shape == (6, 12, 8, 8)
    np.testing.assert_allclose(att.sum(-1), 1, rtol=0, atol=1e-5)  # n * eps32 = 1e-6 -> 1e-5
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
    # the very same forward pass (same inputs, same kernels, same order): exactly equal
    np.testing.assert_array_equal(run.attentions[2], out.attentions[2][0].numpy())
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
    with pytest.raises(ValueError, match=r"layer must be a whole number in 0\.\.5 \(6 layers\), got 7"):
        check_layer_head(bert, 7, 0)
    with pytest.raises(ValueError, match=r"head must be a whole number in 0\.\.11 \(12 heads\), got 12"):
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

    def fn(module, query, key, value, attention_mask, **kwargs):  # pragma: no cover - not run
        raise AssertionError

    register_attention("bertlib_test_registration", fn)
    assert AttentionInterface()["bertlib_test_registration"] is fn
    assert AttentionMaskInterface()["bertlib_test_registration"] is eager_mask


# ---------------------------------------------------------------- no stale state


@pytest.fixture
def own_bert(bert):
    """A private copy of the bundled BERT that a test may change freely (same tokenizer)."""
    return LoadedBert(copy.deepcopy(bert.model), bert.tokenizer, bert.name)


def transformers_pass(loaded, text=SENTENCE):
    """(attentions (L, h, n, n), hidden states (L+1, n, d)) straight from the model, no cache."""
    with torch.no_grad():
        out = loaded.model(**encode(text, model=loaded), output_attentions=True,
                           output_hidden_states=True)
    return torch.stack(out.attentions)[:, 0].numpy(), torch.stack(out.hidden_states)[:, 0].numpy()


def assert_every_path_sees_the_model_as_it_is(loaded, maps_before):
    """attention_maps, run_bert and the numpy bert_forward agree with a fresh pass of ``loaded``,
    which differs from ``maps_before`` (what they returned before the change)."""
    attentions, hidden = transformers_pass(loaded)
    assert np.abs(attentions - maps_before).max() > CHANGED, "the edit changed nothing"
    stale = []
    # the very same forward pass as transformers_pass: exactly equal
    if not np.array_equal(attention_maps(SENTENCE, model=loaded)[1], attentions):
        stale.append("attention_maps")
    if not np.array_equal(run_bert(SENTENCE, model=loaded).hidden_states, hidden):
        stale.append("run_bert")
    ours = forward_text(SENTENCE, model=loaded).attentions  # numpy's bert_forward
    if np.abs(ours - attentions).max() > ATOL_NUMPY_ATTENTION:
        stale.append("bert_forward")
    assert not stale, f"results of the model as it was, from {stale}"


def cache_everything(loaded):
    """Fill every cache (run_bert's and bert_params') for ``loaded``; return its maps."""
    forward_text(SENTENCE, model=loaded)
    return attention_maps(SENTENCE, model=loaded)[1].copy()


def test_a_query_weight_scaled_in_place_is_seen(own_bert):
    before = cache_everything(own_bert)
    with torch.no_grad():
        own_bert.model.encoder.layer[0].attention.self.query.weight.mul_(3)
    assert_every_path_sees_the_model_as_it_is(own_bert, before)


def test_a_replaced_weight_tensor_is_seen(own_bert):
    before = cache_everything(own_bert)
    query = own_bert.model.encoder.layer[0].attention.self.query
    query.weight.data = query.weight.data * 3  # a new tensor; the in-place counter never moved
    assert_every_path_sees_the_model_as_it_is(own_bert, before)


@pytest.mark.slow
def test_one_fine_tuning_step_is_seen(own_bert):
    before = cache_everything(own_bert)
    losses = finetune.fine_tune(own_bert, finetune.load_pairs("train")[:2], epochs=1,
                                batch_size=2, lr=1e-3)
    assert len(losses) == 1  # exactly one optimizer step
    assert_every_path_sees_the_model_as_it_is(own_bert, before)


def test_a_switched_attention_implementation_is_seen(own_bert):
    def uniform(weight):
        def attention(module, query, key, value, attention_mask, **kwargs):
            n = key.shape[2]
            weights = torch.full((*query.shape[:3], n), weight / n)
            return torch.matmul(weights, value).transpose(1, 2).contiguous(), weights
        return attention

    tokens, before = attention_maps(SENTENCE, model=own_bert)
    n = len(tokens)
    register_attention("bertlib_test_uniform", uniform(1.0))
    own_bert.model.set_attn_implementation("bertlib_test_uniform")
    assert np.all(attention_maps(SENTENCE, model=own_bert)[1] == np.float32(1 / n))
    # the same name registered again with another function (as ablated_head does per head)
    register_attention("bertlib_test_uniform", uniform(0.5))
    assert np.all(attention_maps(SENTENCE, model=own_bert)[1] == np.float32(0.5 / n))
    own_bert.model.set_attn_implementation("eager")
    np.testing.assert_array_equal(attention_maps(SENTENCE, model=own_bert)[1], before)


def test_unchanged_model_is_served_from_the_caches(own_bert):
    run = run_bert(SENTENCE, model=own_bert)
    params = bert_params(own_bert)
    assert run_bert(SENTENCE, model=own_bert) is run
    assert bert_params(own_bert) is params


def test_a_freed_model_leaves_nothing_behind(bert):
    # a later model may get the freed one's id(); nothing may be found under it
    models.clear_run_cache()
    copied = LoadedBert(copy.deepcopy(bert.model), bert.tokenizer, bert.name)
    run_bert(SENTENCE, model=copied)
    bert_params(copied)
    assert len(models._RUN_CACHE) == 1
    alive = weakref.ref(copied.model)
    del copied
    gc.collect()
    assert alive() is None, "a cache keeps the model alive"
    assert len(models._RUN_CACHE) == 0


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
        loaded = models._load.__wrapped__(str(tiny_bert_folder))  # a fresh load, no cache
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
    monkeypatch.setattr(models, "load_pretrained", lambda auto_class, name, **kw: GPT2Model(tiny))
    with pytest.raises(ValueError, match=r"'some-org/gpt2-like' is a 'gpt2' model, not a BERT"):
        models._load.__wrapped__("some-org/gpt2-like")


def test_the_tiny_bert_folder_loads(tiny_bert_folder):
    loaded = load_bert(str(tiny_bert_folder))
    tokens, maps = attention_maps(SENTENCE, model=loaded)
    assert maps.shape == (2, 2, len(tokens), len(tokens))


def test_bert_module_unwraps_once_and_names_what_it_accepts(bert):
    assert bert_module(bert) is bert.model
    assert bert_module(bert.model) is bert.model
    assert max_positions(bert) == bert.model.config.max_position_embeddings
    with pytest.raises(TypeError, match="LoadedBert .* or a transformers BertModel, got str"):
        bert_module("bert")


def test_eager_attention_equals_transformers_eager_and_its_hook_sees_the_scores():
    from transformers.models.bert.modeling_bert import eager_attention_forward

    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 4) for _ in range(3))
    mask = torch.zeros(2, 1, 5, 5)
    mask[1, ..., 3:] = torch.finfo(torch.float32).min  # the second input has 3 real tokens
    module = torch.nn.Module().eval()
    ours = eager_attention(module, q, k, v, mask, scaling=0.5)
    theirs = eager_attention_forward(module, q, k, v, mask, scaling=0.5)
    assert ours[0].shape == (2, 5, 3, 4) and ours[1].shape == (2, 3, 5, 5)
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True))
    seen = {}

    def weights_of(module, scores, attention_mask):
        seen["scores"] = scores
        return softmax_weights(module, scores, attention_mask)

    eager_attention(module, q, k, v, None, weights_of=weights_of)  # scaling 1/√d_k by default
    assert torch.allclose(seen["scores"], q @ k.transpose(2, 3) / 2.0)


def test_batch_runs_cut_each_run_to_its_own_tokens(bert):
    enc = bert.tokenizer(["The cat slept.", "A dog barked at the postman."], padding=True,
                         return_tensors="pt")
    runs = batch_runs(enc, bert)
    for run, text in zip(runs, ["The cat slept.", "A dog barked at the postman."], strict=True):
        ref = run_bert(text)
        assert run.tokens == ref.tokens and not run.attentions.flags.writeable
        np.testing.assert_allclose(run.attentions, ref.attentions, atol=1e-5)  # float32 batching


def test_bert_module_unwraps_a_bert_with_a_head():
    config = BertConfig(vocab_size=16, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=16)
    mlm = BertForMaskedLM(config)
    assert bert_module(mlm) is mlm.bert
