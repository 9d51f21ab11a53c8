"""bertlib.paper.mlm: BERT's 15 % / 80-10-10 masking, reproducible; fill-mask fails clearly offline."""

import numpy as np
import pytest

from bertlib.checks import IGNORE_INDEX
from bertlib.hf import loading
from bertlib.hf.models import encode, fill_mask, has_mlm_head
from bertlib.hf.params import mask_sentence
from bertlib.paper.mlm import mask_tokens

CLS, SEP, MASK, VOCAB = 101, 102, 103, 30522


def sentence(n_words, seed=1):
    rng = np.random.default_rng(seed)
    return np.concatenate([[CLS], rng.integers(1000, 30000, n_words), [SEP]])


def test_exactly_15_percent_of_ordinary_tokens_are_chosen():
    ids = sentence(200)
    out = mask_tokens(ids, MASK, VOCAB, special_ids=(0, CLS, SEP, MASK), seed=0)
    assert out.chosen.sum() == 30
    assert not out.chosen[0] and not out.chosen[-1]  # [CLS] and [SEP] never chosen


def test_80_10_10_split_over_many_tokens():
    ids = sentence(20000)
    out = mask_tokens(ids, MASK, VOCAB, special_ids=(0, CLS, SEP, MASK), seed=3)
    chosen = out.chosen.sum()
    shares = {a: (out.action == a).sum() / chosen for a in ("mask", "random", "keep")}
    # 3000 chosen: standard deviations sqrt(.8 * .2 / 3000) = 0.007 and sqrt(.09 / 3000) =
    # 0.0055, so the bounds are 4 and 3.6 of them (and the seed fixes the draw on every machine)
    assert abs(shares["mask"] - 0.8) < 0.03
    assert abs(shares["random"] - 0.1) < 0.02
    assert abs(shares["keep"] - 0.1) < 0.02
    assert (out.action[~out.chosen] == "").all()


def test_actions_do_what_they_say_and_labels_hold_the_originals():
    ids = sentence(500)
    out = mask_tokens(ids, MASK, VOCAB, special_ids=(0, CLS, SEP, MASK), seed=7)
    assert (out.input_ids[out.action == "mask"] == MASK).all()
    assert (out.input_ids[out.action == "keep"] == ids[out.action == "keep"]).all()
    random = out.input_ids[out.action == "random"]
    assert not np.isin(random, [0, CLS, SEP, MASK]).any()
    assert (out.input_ids[~out.chosen] == ids[~out.chosen]).all()
    assert (out.labels[out.chosen] == ids[out.chosen]).all()
    assert (out.labels[~out.chosen] == IGNORE_INDEX).all()


def test_same_seed_same_corruption_other_seed_differs():
    ids = sentence(100)
    a, b, c = (mask_tokens(ids, MASK, VOCAB, (CLS, SEP), seed=s) for s in (5, 5, 6))
    assert (a.input_ids == b.input_ids).all() and (a.chosen == b.chosen).all()
    assert not (a.chosen == c.chosen).all()


def test_short_input_still_gets_one_prediction():
    out = mask_tokens(np.array([CLS, 2000, 2001, SEP]), MASK, VOCAB, (CLS, SEP), seed=0)
    assert out.chosen.sum() == 1


@pytest.mark.parametrize("kwargs, match", [
    ({"input_ids": np.array([[1, 2]])}, "1-D array of whole numbers"),
    ({"input_ids": np.array([1, 40000])}, r"in 0\.\.30521"),
    ({"mask_prob": 1.5}, r"mask_prob must be a number in \[0, 1\]"),
    ({"mask_frac": 0.9, "random_frac": 0.2}, "at most 1"),
    ({"input_ids": np.array([CLS, SEP])}, "only special tokens"),
])
def test_bad_arguments(kwargs, match):
    args = {"input_ids": sentence(10), "mask_id": MASK, "vocab_size": VOCAB,
            "special_ids": (CLS, SEP)} | kwargs
    with pytest.raises(ValueError, match=match):
        mask_tokens(**args)


def test_ids_that_are_not_whole_numbers_are_a_type_error():
    with pytest.raises(TypeError, match="1-D array of whole numbers"):
        mask_tokens(np.array([1.0, 2.0]), MASK, VOCAB, (CLS, SEP))


@pytest.mark.model
def test_mask_sentence_uses_the_real_tokenizer():
    before, after, out = mask_sentence("The quick brown fox jumps over the lazy dog", seed=0)
    assert before[0] == "[CLS]" and after[0] == "[CLS]" and after[-1] == "[SEP]"
    assert out.chosen.sum() == 1  # round(0.15 * 9) = 1
    changed = [a for b, a, c in zip(before, after, out.chosen, strict=True) if c]
    assert len(changed) == 1


@pytest.mark.model
def test_mask_sentence_is_mask_tokens_on_the_sentences_ids():
    """mask_sentence hands its one row to mask_batch, as mask_tokens does: the same draw."""
    tok = loading.load_bert().tokenizer
    text, pair = "The river bank was muddy after the storm", "We walked along it."
    for seed in (0, 5, 23):
        _, _, got = mask_sentence(text, pair, seed=seed)
        ids = encode(text, pair)["input_ids"][0].numpy()
        want = mask_tokens(ids, tok.mask_token_id, len(tok), tok.all_special_ids, seed)
        for a, b in zip(got, want, strict=True):
            np.testing.assert_array_equal(a, b)


def test_bundled_model_has_no_mlm_head():
    assert has_mlm_head() is False
    with pytest.raises(FileNotFoundError):
        has_mlm_head("/no/such/folder")


def test_fill_mask_needs_one_mask():
    with pytest.raises(ValueError, match="exactly one"):
        fill_mask("no mask here")


def test_fill_mask_offline_says_why_and_names_the_default(monkeypatch):
    monkeypatch.setattr(loading, "_hub_reachable", lambda timeout=3.0: False)
    with pytest.raises(OSError, match="no network") as info:
        fill_mask("The cat sat on the [MASK].", name="surely-not-downloaded-model-xyz")
    assert loading.DEFAULT_MODEL in str(info.value)


def test_mlm_loss_is_transformers_own_masked_lm_loss():
    import torch
    from transformers import BertConfig, BertForMaskedLM

    from bertlib.paper.mlm import mask_batch, mlm_loss

    torch.manual_seed(0)
    config = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16)
    model = BertForMaskedLM(config).eval()
    ids = np.random.default_rng(0).integers(5, 40, (3, 12))
    batch = mask_batch(ids, 4, 40, special_ids=(0, 1, 2, 3, 4), rng=np.random.default_rng(1))
    inputs, labels = torch.as_tensor(batch.input_ids), torch.as_tensor(batch.labels)
    out = model(input_ids=inputs, labels=labels)
    ours = mlm_loss(out.logits, labels)
    assert torch.allclose(ours, out.loss, atol=1e-6, rtol=0), (ours, out.loss)
    one = labels != IGNORE_INDEX  # by hand at one chosen position: −log p(original)
    b, t = (int(i) for i in one.nonzero()[0])
    alone = torch.where(torch.arange(12) == t, labels[b], IGNORE_INDEX)[None]
    p = torch.softmax(out.logits[b, t], -1)[labels[b, t]]
    assert torch.allclose(mlm_loss(out.logits[b:b + 1], alone), -torch.log(p), atol=1e-6)
    with pytest.raises(ValueError, match=r"labels must have shape \(B, N\) = \(3, 12\)"):
        mlm_loss(out.logits, labels[:, :5])
