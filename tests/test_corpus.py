"""Tests for bertlib.hf.corpus: the shipped sentences, batched runs equal to run_bert, sentence vectors."""

import numpy as np
import pytest
import torch

from bertlib.hf import corpus as cp
from bertlib.hf.models import encode, run_bert
from bertlib.hf.params import bert_params
from bertlib.lab import analysis as an
from bertlib.paper.bert import bert_forward


def test_load_corpus_gives_hundreds_of_distinct_sentences_and_pairs():
    c = cp.load_corpus()
    assert len(c.sentences) >= 200 and len(set(c.sentences)) == len(c.sentences)
    assert len(c.pairs) >= 40 and all(len(p) == 2 and all(p) for p in c.pairs)


def test_run_corpus_matches_run_bert_and_keeps_order():
    texts = ["The cat slept.", "A much longer sentence about the old lighthouse keeper.",
             ("It rained.", "We stayed in.")]
    result = cp.run_corpus(texts, batch_size=2)
    assert result.skipped == 0 and len(result.runs) == 3
    for text, run in zip(texts, result.runs, strict=True):
        ref = run_bert(*((text,) if isinstance(text, str) else text))
        assert run.tokens == ref.tokens
        assert np.array_equal(run.token_type_ids, ref.token_type_ids)
        np.testing.assert_allclose(run.attentions, ref.attentions, atol=1e-5)
        np.testing.assert_allclose(run.hidden_states, ref.hidden_states, atol=1e-4)
        an.check_maps(run.attentions)


def test_run_corpus_skips_too_long_sentences_with_a_count():
    too_long = " ".join(["word"] * 600)  # > 512 positions
    result = cp.run_corpus(["A short one.", too_long, "Another short one."])
    assert result.skipped == 1 and len(result.runs) == 2
    result = cp.run_corpus(["A short one.", "This one has too many pieces for the limit."],
                           max_pieces=6)
    assert result.skipped == 1 and result.runs[0].tokens[1] == "a"
    with pytest.raises(ValueError, match="all 1 texts are longer than 512"):
        cp.run_corpus([too_long])


def test_too_long_for_the_model_is_one_check_with_one_message():
    """tokenize_batch, encode and the numpy BERT all call checks.within_positions: a check
    written again beside it would say it its own way, and fail here."""
    rule = (r"input is 602 word pieces long but this model has 512 positions \(at most 512 "
            r"pieces including \[CLS\] and \[SEP\]\); ")
    too_long = " ".join(["word"] * 600)
    with pytest.raises(ValueError, match=f"^an {rule}leave it out \\(run_corpus skips such inputs\\)$"):
        cp.tokenize_batch([too_long, "A short one."])
    with pytest.raises(ValueError, match=f"^the {rule}shorten it, or pass truncate=True to keep "
                                         "the first 512$"):
        encode(too_long)
    with pytest.raises(ValueError, match=f"^the {rule}shorten it$"):
        bert_forward(bert_params(), np.full((1, 602), 1000))  # the numpy BERT's ids, its positions' limit


def test_run_corpus_rejects_zero_sentences_and_bad_texts():
    with pytest.raises(ValueError, match="texts must be a non-empty list of sentences"):
        cp.run_corpus([])
    with pytest.raises(ValueError, match="empty"):
        cp.run_corpus(["fine", "   "])
    with pytest.raises(TypeError, match="list"):
        cp.run_corpus("just a string")
    with pytest.raises(TypeError, match="pair"):
        cp.run_corpus([("a", "b", "c")])


def test_sentence_vectors_mean_pool_the_last_layer():
    run = run_bert("The river rose.")
    v = cp.sentence_vectors(["The river rose."])
    np.testing.assert_allclose(v[0], run.hidden_states[-1].mean(0), atol=1e-5)
    with pytest.raises(ValueError, match="only sentences or only pairs"):
        cp.sentence_vectors(["a", ("b", "c")])
    with pytest.raises(ValueError, match="non-empty"):
        cp.sentence_vectors([])


def test_load_paraphrases_gives_at_least_twenty_distinct_pairs_of_different_wordings():
    pairs = cp.load_paraphrases()
    assert len(pairs) >= 20
    assert all(len(p) == 2 and p[0] and p[1] and p[0] != p[1] for p in pairs)
    assert len({p[0] for p in pairs}) == len(pairs)


def test_masked_mean_averages_the_flagged_pieces_and_keeps_the_gradient():
    """The one masked mean pooling: fine-tuning trains through it, mean_pool reads it out."""
    H = torch.randn(2, 4, 3, requires_grad=True)
    flags = torch.tensor([[1.0, 1.0, 0.0, 0.0], [0.0, 1.0, 1.0, 1.0]])
    pooled = cp.masked_mean(H, flags)
    torch.testing.assert_close(pooled, torch.stack([H[0, :2].mean(0), H[1, 1:].mean(0)]))
    pooled.sum().backward()  # each flagged piece gets 1/(its row's count), a left-out one 0
    torch.testing.assert_close(H.grad[..., 0], flags / flags.sum(1, keepdim=True))
    np.testing.assert_array_equal(cp.mean_pool(H.detach(), flags.long()),
                                  pooled.detach().double().numpy())
