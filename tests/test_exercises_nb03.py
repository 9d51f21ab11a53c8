"""bertlib.exercises.nb03: the checkers accept right answers and name typical mistakes."""

import numpy as np
import pytest
import torch

from bertlib.bert import bert_weights, layer_norm
from bertlib.exercises import Feedback
from bertlib.exercises.nb03 import (
    EMBED_TEXT,
    check_embeddings,
    check_heads,
    heads_where_top,
)
from bertlib.models import encode, run_bert


@pytest.fixture(scope="module")
def parts():
    w = bert_weights()
    ids = encode(EMBED_TEXT)["input_ids"][0].numpy()
    word = w.word[ids].astype(float)
    return w, word, w.position[:len(ids)], w.token_type[0]


def ln(w, x):
    return layer_norm(x, w.emb_gamma, w.emb_beta, w.eps)


def test_right_embeddings_pass_also_from_transformers_float32():
    E = run_bert(EMBED_TEXT).hidden_states[0]  # transformers' own output, float32
    fb = check_embeddings(torch.tensor(E))
    assert isinstance(fb, Feedback) and fb.ok, fb.message


@pytest.mark.parametrize("mistake, words", [
    ("no LayerNorm", "did not apply the LayerNorm"),
    ("no position", "position embeddings are missing"),
    ("no token type", "token-type (segment) embedding is missing"),
    ("word only", "only the word embeddings"),
])
def test_embedding_mistakes_are_named(parts, mistake, words):
    w, word, pos, typ = parts
    E = {"no LayerNorm": word + pos + typ, "no position": ln(w, word + typ),
         "no token type": ln(w, word + pos), "word only": ln(w, word)}[mistake]
    fb = check_embeddings(E)
    assert not fb.ok and words in fb.message


def test_embedding_shape_none_and_nan(parts):
    w, word, pos, typ = parts
    assert "wrong shape" in check_embeddings(word[1:]).message
    assert "None" in check_embeddings(None).message
    assert "NaN" in check_embeddings(np.full(word.shape, np.nan)).message
    assert "array of numbers" in check_embeddings(object()).message
    assert "differs" in check_embeddings(np.zeros(word.shape)).message


def test_heads_reference_passes_and_matches_a_direct_computation():
    run = run_bert("The quick brown fox jumps over the lazy dog")
    row = np.array(run.attentions[:, :, run.tokens.index("jumps")])
    row[..., [0, len(run.tokens) - 1]] = -1
    direct = [tuple(x) for x in np.argwhere(row.argmax(-1) == run.tokens.index("fox")).tolist()]
    assert heads_where_top() == direct and len(direct) > 1
    assert check_heads(direct).ok


def test_heads_mistakes_are_named():
    right = heads_where_top()
    one_based = [(layer + 1, head + 1) for layer, head in right]
    assert "1-based" in check_heads(one_based).message
    with_special = heads_where_top(skip_special=False)
    assert "[CLS] and [SEP]" in check_heads(with_special).message
    assert "missing" in check_heads(right[:-1]).message
    fb = check_heads(right + [(5, 6)] if (5, 6) not in right else right + [(5, 5)])
    assert "do not qualify" in fb.message
    assert "pairs of whole numbers" in check_heads([("a", "b")]).message
    assert "pairs of whole numbers" in check_heads(3).message


def test_unknown_word_is_an_error():
    with pytest.raises(ValueError, match="not a word piece"):
        heads_where_top("cat", "fox")
