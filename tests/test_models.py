"""bertlib.hf.models: bad text gives clear errors; the cached forward pass equals transformers';
no cache serves a pass of weights the model no longer has; (layer, head) checked against a model."""

import copy
import gc
import warnings
import weakref

import numpy as np
import pytest
import torch

from bertlib.hf import finetune, models
from bertlib.hf.attention_interface import register_attention
from bertlib.hf.loading import LoadedBert
from bertlib.hf.models import attention_maps, batch_runs, check_layer_head, encode, run_bert
from bertlib.hf.params import bert_params, forward_text

SENTENCE = "The cat sat on the mat"
# transformers computes in float32 (eps 1.2e-7); the numpy BERT in float64. Rounding errors of
# d-term sums grow like sqrt(d) and add up over the L layers: 1.2e-7 * sqrt(384 * 6) = 5.7e-6
# relative, on attention weights <= 1 -> 1e-5 (as in test_bert.py).
ATOL_NUMPY_ATTENTION = 1e-5
# Each edit below moves some attention weight by far more than that (measured: 1e-3 .. 0.9).
CHANGED = 1e-4


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


def test_batch_runs_cut_each_run_to_its_own_tokens(bert):
    enc = bert.tokenizer(["The cat slept.", "A dog barked at the postman."], padding=True,
                         return_tensors="pt")
    runs = batch_runs(enc, bert)
    for run, text in zip(runs, ["The cat slept.", "A dog barked at the postman."], strict=True):
        ref = run_bert(text)
        assert run.tokens == ref.tokens and not run.attentions.flags.writeable
        np.testing.assert_allclose(run.attentions, ref.attentions, atol=1e-5)  # float32 batching

