"""Tests for bertlib.hf.custom: the similarity prior and prior-guided attention in the real BERT."""

import ast
import copy
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from bertlib.hf import custom as C
from bertlib.hf import finetune as F
from bertlib.hf.models import encode

A, B = "The cat sat on the mat", "A feline rested on the rug"
TOKENS = ["[CLS]", "the", "cat", "sat", "on", "the", "mat", "[SEP]",
          "a", "fe", "##line", "rested", "on", "the", "rug", "[SEP]"]
PAIRS = [(A, B), ("A dog ran.", "The small brown puppy is running across the big green field.")]
EPS32 = float(torch.finfo(torch.float32).eps)  # 1.2e-7: one float32 rounding
# Two float32 passes through the 6 layers that round differently (another order of the same
# sums) drift apart like float32 rounding of d-term sums, which grows as sqrt(d) and adds up
# over the layers: eps * sqrt(d * L) = 1.2e-7 * sqrt(384 * 6) = 5.7e-6 relative. Attention
# weights are <= 1 -> ATOL_ATTENTION; hidden states reach |h| ~ 11 -> 6e-5 -> ATOL_HIDDEN.
ATOL_ATTENTION = 1e-5
ATOL_HIDDEN = 1e-4
# Values of R are stored in float32 (rounding 6e-8 relative): pytest.approx's default
# relative 1e-6 covers them.


def run(model, batch, prior=None):
    with torch.no_grad():
        extra = {} if prior is None else {"prior": prior}
        return model(**batch.inputs, **extra, output_attentions=True)


# ---------------------------------------------------------------- the prior matrix


def test_prior_on_hand_checked_pair(bert):
    R = C.similarity_prior(A, B, model=bert)
    tokens = bert.tokenizer.convert_ids_to_tokens(encode(A, B, bert)["input_ids"][0])
    assert tokens == TOKENS and R.shape == (16, 16) and R.dtype == np.float32
    i = {t: k for k, t in enumerate(tokens[:8])}
    j = {t: k for k, t in enumerate(tokens[8:], start=8)}
    assert (R[:7, :7] == 1).all() and (R[8:, 8:] == 1).all()  # within each sentence
    assert (R[7] == 0).all() and (R[:, 7] == 0).all()  # the first [SEP]: 0 with every piece
    # hypernym; R is float32, so 0.8 is off by its rounding (3e-8), inside approx's 1e-6
    assert R[i["cat"], j["fe"]] == R[i["cat"], j["##line"]] == pytest.approx(0.8)
    assert R[i["sat"], j["rested"]] == 1.0 and R[i["mat"], j["rug"]] == 1.0  # synonyms
    assert R[i["on"], j["on"]] == 0.0 and R[i["the"], j["the"]] == 0.0  # stop words
    assert (R[0, 8:] == 0).all() and (R[7, 8:] == 0).all() and (R[:8, 15] == 0).all()  # specials
    assert R[i["cat"], j["rested"]] == 0.0  # unrelated content words
    np.testing.assert_array_equal(R, R.T)
    assert np.count_nonzero(R[:8, 8:]) == 4  # cat-fe, cat-##line, sat-rested, mat-rug


def test_prior_accepts_word_lists_and_a_custom_lexicon(bert):
    R = C.similarity_prior(A.split(), B.split(), model=bert, lexicon={("cat", "rug"): 0.3,
                                                                       ("rug", "cat"): 0.3})
    assert R[2, 14] == pytest.approx(0.3) and R[2, 9] == 0.0 and R[3, 11] == 0.0


def test_identical_words_get_one_and_plural_s_is_looked_up(bert):
    a, b = "Cats sleep.", "The cat sleeps on a rug."
    R = C.similarity_prior(a, b, model=bert, punctuation="keep", first_sep="sentence_a")
    t = bert.tokenizer.convert_ids_to_tokens(encode(a, b, bert)["input_ids"][0])
    assert R[t.index("cats"), t.index("cat")] == 1.0  # "cats" found as "cat"
    assert R[t.index("."), len(t) - 2] == 0.0  # punctuation is 0 across
    assert (R[:t.index("[SEP]") + 1, :t.index("[SEP]") + 1] == 1).all()  # [SEP] with sentence a


def test_punctuation_is_removed_before_bert_reads_the_pair_as_in_the_authors_code(bert):
    a, b = "Cats sleep, mostly.", "The cat's sleeping!"
    assert C.strip_punctuation(a) == "Cats sleep mostly" and C.strip_punctuation(b) == "The cats sleeping"
    R = C.similarity_prior(a, b, model=bert)
    t = bert.tokenizer.convert_ids_to_tokens(encode(C.strip_punctuation(a), C.strip_punctuation(b),
                                                     bert)["input_ids"][0])
    assert R.shape == (len(t), len(t)) and "." not in t and "," not in t
    assert R[t.index("cats"), len(t) - 3] == 1.0  # the apostrophe is gone: "cats" meets "cats"
    batch = F.pair_batch([(a, b)], model=bert)
    assert batch.inputs["input_ids"].shape[1] == len(t)  # BERT reads the stripped pair too
    kept = F.pair_batch([(a, b)], model=bert, punctuation="keep")
    assert kept.inputs["input_ids"].shape[1] > len(t)


def test_stop_words_are_the_authors_34_and_can_be_replaced(bert):
    assert len(C.STOP_WORDS) == 34 and {"the", "on", "a", "am", "such"} <= C.STOP_WORDS
    assert "he" not in C.STOP_WORDS and "he" in C.SERIES_STOP_WORDS
    a, b = "He ran home", "He walked home"  # [CLS] he ran home [SEP] he walked home [SEP]
    assert C.similarity_prior(a, b, model=bert)[1, 5] == 1.0  # "he" is no stop word: same word
    assert C.similarity_prior(a, b, model=bert, stop_words=C.SERIES_STOP_WORDS)[1, 5] == 0.0
    assert C.similarity_prior(a, b, model=bert, stop_words=["HOME"])[3, 7] == 0.0  # lowercased
    with pytest.raises(TypeError, match="stop_words must be a set of words"):
        C.similarity_prior(a, b, model=bert, stop_words="the")
    with pytest.raises(ValueError, match="first_sep"):
        C.similarity_prior(a, b, model=bert, first_sep="b")
    with pytest.raises(ValueError, match="punctuation"):
        C.similarity_prior(a, b, model=bert, punctuation="drop")


def test_embedding_prior_is_clipped_cosine_of_input_embeddings(bert):
    R = C.similarity_prior(A, B, source="embedding", model=bert)
    E = bert.model.get_input_embeddings().weight.detach()
    ids = bert.tokenizer.convert_tokens_to_ids
    cat, feline = E[ids("cat")], E[[ids("fe"), ids("##line")]].mean(0)
    expected = max(0.0, torch.nn.functional.cosine_similarity(cat, feline, dim=0).item())
    # two float32 formulas of the cosine over d = 384: rounding ~ eps * sqrt(d) = 2.4e-6
    assert R[2, 9] == R[2, 10] == pytest.approx(expected, abs=1e-5)
    assert (R >= 0).all() and (R <= 1).all() and R[4, 12] == 0.0  # "on" is a stop word
    same = C.similarity_prior("The cat sat.", "A cat ran.", source="embedding", model=bert)
    assert same[2, 6] == 1.0  # [CLS] the cat sat [SEP] a cat ran [SEP] ("." removed)


def test_wordnet_without_nltk_says_how_to_enable_it(bert, monkeypatch):
    monkeypatch.setitem(sys.modules, "nltk", None)
    with pytest.raises(ValueError, match=r"pip install nltk.*nltk.downloader wordnet"):
        C.similarity_prior(A, B, source="wordnet", model=bert)


def test_wordnet_source_uses_synonyms_antonyms_and_wu_palmer(bert, monkeypatch):
    class Synset:
        def __init__(self, depth, antonyms=()):
            self.depth, self.antonyms = depth, antonyms

        def lemmas(self):  # one lemma whose antonyms are lemmas of other synsets
            lemma = types.SimpleNamespace(antonyms=lambda: [
                types.SimpleNamespace(synset=lambda s=s: s) for s in self.antonyms])
            return [lemma]

        def wup_similarity(self, other):
            return 2 * min(self.depth, other.depth) / (self.depth + other.depth) / 2

    stand = Synset(3)
    cat, feline, sit = Synset(8), Synset(6), Synset(3, (stand,))
    table = {"cat": [cat], "feline": [feline], "sat": [sit], "stood": [stand], "mat": [],
             "rested": [sit]}
    wordnet = types.SimpleNamespace(synsets=lambda w: table.get(w, []))
    corpus = types.ModuleType("nltk.corpus")
    corpus.wordnet = wordnet
    monkeypatch.setitem(sys.modules, "nltk", types.ModuleType("nltk"))
    monkeypatch.setitem(sys.modules, "nltk.corpus", corpus)
    R = C.similarity_prior("cat sat mat", "feline rested mat stood", source="wordnet", model=bert)
    # [CLS] cat sat mat [SEP] fe ##line rested mat stood [SEP]
    assert R[1, 5] == R[1, 6] == pytest.approx(6 / 14)  # Wu-Palmer of the fake synsets
    assert R[2, 7] == 1.0  # shared synset
    assert R[3, 8] == 1.0  # same word without synsets
    assert R[3, 7] == 0.0  # no synsets: 0 unless identical
    assert R[2, 9] == 1.0  # antonym


# ---------------------------------------------------------------- plugging it into BERT


def test_all_ones_prior_equals_standard_attention_exactly_in_all_layers_with_padding(bert):
    batch = F.pair_batch(PAIRS, model=bert)
    assert batch.inputs["attention_mask"].min() == 0  # the batch really has padding
    ref = run(bert.model, batch)
    with C.use_prior_attention(bert, layers=range(6)):
        out = run(bert.model, batch, torch.ones_like(batch.prior))
    # multiply mode with R = 1 does the very same float operations: max diff exactly 0.0
    assert torch.equal(out.last_hidden_state, ref.last_hidden_state)
    for a, b in zip(out.attentions, ref.attentions, strict=True):
        assert torch.equal(a, b)
    with C.use_prior_attention(bert, layers=list(range(6)), mode="parallel", gate=0.3):
        par = run(bert.model, batch, torch.ones_like(batch.prior))
    # parallel: 0.7 A + 0.3 A rounds differently from A (by ~eps in layer 0), and the layers
    # above carry that on: the two passes agree to float32 rounding over 6 layers (see top)
    assert (par.last_hidden_state - ref.last_hidden_state).abs().max() <= ATOL_HIDDEN
    for a, b in zip(par.attentions, ref.attentions, strict=True):
        assert (a - b).abs().max() <= ATOL_ATTENTION


def test_prior_weights_are_softmax_of_scores_times_prior_written_once_in_hf():
    g = torch.Generator().manual_seed(1)
    scores, R = torch.randn(3, 4, 5, generator=g), torch.rand(4, 5, generator=g)
    mask = torch.zeros(1, 1, 5).masked_fill(torch.tensor([False] * 4 + [True]), -1e9)
    assert torch.equal(C.prior_weights(scores, R, mask), torch.softmax(scores * R + mask, -1))
    assert torch.equal(C.prior_weights(scores, 1.0), torch.softmax(scores, -1))  # R = 1: standard
    hf = Path(C.__file__).parent  # the product inside a softmax, softmax(scores ⊙ R), once
    products = [f"{path.name}: {ast.unparse(node)}" for path in sorted(hf.glob("*.py"))
                for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("softmax_weights")
                and len(node.args) > 1 and isinstance(node.args[1], ast.BinOp)]
    assert products == ["custom.py: softmax_weights(None, scores * R, attention_mask)"], products


def test_prior_is_applied_only_in_the_chosen_layers(bert):
    batch = F.pair_batch([(A, B)], model=bert)
    ref = run(bert.model, batch)
    with C.use_prior_attention(bert, layers=[2]) as handle:
        assert handle.layers == (2,)
        out = run(bert.model, batch, batch.prior)
    for layer in (0, 1):
        assert torch.equal(out.attentions[layer], ref.attentions[layer])
    for layer in range(2, 6):
        assert (out.attentions[layer] - ref.attentions[layer]).abs().max() > 1e-3


def test_guided_layer_computes_softmax_of_scores_times_prior_plus_mask(bert):
    batch = F.pair_batch(PAIRS, model=bert)
    with C.use_prior_attention(bert, layers=[0]):
        with torch.no_grad():
            out = bert.model(**batch.inputs, prior=batch.prior, output_attentions=True,
                             output_hidden_states=True)
    attn = bert.model.encoder.layer[0].attention.self
    X = out.hidden_states[0]  # (batch, n, d), the embeddings
    b, n, d = X.shape
    h = bert.model.config.num_attention_heads
    d_k = d // h

    def heads(linear):
        return linear(X).view(b, n, h, d_k).transpose(1, 2)  # (batch, h, n, d_k)

    with torch.no_grad():
        scores = heads(attn.query) @ heads(attn.key).transpose(-1, -2) / np.sqrt(d_k)
    mask = torch.where(batch.inputs["attention_mask"].bool(), 0.0, -torch.inf)[:, None, None]
    expected = torch.softmax(scores * batch.prior[:, None] + mask, dim=-1)
    # "/ sqrt(d_k)" here, "* d_k ** -0.5" in the model: the scores (|s| <= ~40) differ by an
    # ulp, 40 * eps = 5e-6; a softmax weight moves by at most half the largest score change
    # -> 2.4e-6 -> 1e-5
    assert (out.attentions[0] - expected).abs().max() <= 1e-5


def test_mask_is_additive_float_so_padding_gets_no_weight(bert):
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, eager_mask

    batch = F.pair_batch(PAIRS, model=bert)
    short = F.pair_batch(PAIRS[:1], model=bert)
    m = int(short.inputs["input_ids"].shape[1])
    with C.use_prior_attention(bert, layers=[0, 3], mode="parallel"):
        assert ALL_MASK_ATTENTION_FUNCTIONS[C.PRIOR_ATTENTION] is eager_mask
        out = run(bert.model, batch, batch.prior)
        alone = run(bert.model, short, short.prior)
    padded = ~batch.inputs["attention_mask"][0].bool()
    assert padded.sum() > 0
    for layer in range(6):
        # exp(score + float32 min - max) underflows to exactly 0 on every CPU
        assert (out.attentions[layer][0][..., padded] == 0).all()
    # the padded batch sums over more (zero) terms, in another blocking: float32 rounding over
    # 6 layers, as at the top
    torch.testing.assert_close(out.last_hidden_state[0, :m], alone.last_hidden_state[0],
                               atol=ATOL_HIDDEN, rtol=0)


def test_undo_restores_the_original_model_exactly(bert):
    batch = F.pair_batch([(A, B)], model=bert)
    before = {k: v.clone() for k, v in bert.model.state_dict().items()}
    ref = run(bert.model, batch)
    n_params = len(list(bert.model.parameters()))
    handle = C.use_prior_attention(bert, layers=[0, 5], mode="parallel", learn_gate=True)
    assert bert.model.config._attn_implementation == C.PRIOR_ATTENTION
    assert len(list(bert.model.parameters())) == n_params + 2  # one learned gate per layer
    handle.undo()
    handle.undo()  # a second undo does nothing
    assert bert.model.config._attn_implementation == "eager"
    after = bert.model.state_dict()
    assert after.keys() == before.keys()
    assert all(torch.equal(after[k], before[k]) for k in before)
    assert not any(hasattr(layer.attention.self, "prior_gate")
                   for layer in bert.model.encoder.layer)
    out = run(bert.model, batch)
    assert torch.equal(out.last_hidden_state, ref.last_hidden_state)
    with C.use_prior_attention(bert):
        pass
    assert bert.model.config._attn_implementation == "eager"


def test_plugging_in_leaves_the_state_dict_unchanged(bert):
    before = bert.model.state_dict()
    for kwargs in ({"mode": "multiply"}, {"mode": "parallel", "gate": 0.3}):
        with C.use_prior_attention(bert, layers=[0, 3], **kwargs):
            during = bert.model.state_dict()
            assert during.keys() == before.keys()
            assert all(torch.equal(during[k], before[k]) for k in before)
    with C.use_prior_attention(bert, layers=[0, 3], mode="parallel", learn_gate=True):
        extra = bert.model.state_dict().keys() - before.keys()
    assert extra == {f"encoder.layer.{i}.attention.self.prior_gate.gate_logit" for i in (0, 3)}


def test_parallel_gate_mixes_the_two_attentions(bert):
    batch = F.pair_batch([(A, B)], model=bert)
    runs = {}
    for name, kwargs in {"multiply": {}, "g0": {"mode": "parallel", "gate": 0.0},
                         "g1": {"mode": "parallel", "gate": 1.0},
                         "g25": {"mode": "parallel", "gate": 0.25}}.items():
        with C.use_prior_attention(bert, layers=[0], **kwargs):
            runs[name] = run(bert.model, batch, batch.prior).attentions[0]
    standard = run(bert.model, batch).attentions[0]
    # (1 - g) A + g B with g = 0 or 1 is 1 * A + 0 * B = A (or B) exactly, and with g = 0.25 the
    # model does the very same products and sum as `expected`: equal to the last bit
    assert torch.equal(runs["g0"], standard)
    assert torch.equal(runs["g1"], runs["multiply"])
    expected = 0.75 * standard + 0.25 * runs["multiply"]
    assert torch.equal(runs["g25"], expected)


def test_learned_gate_is_a_trainable_parameter_and_fixed_gate_is_not(bert):
    model = copy.deepcopy(bert.model)
    n_before = sum(p.numel() for p in model.parameters())
    with C.use_prior_attention(model, layers=[0], mode="parallel", gate=0.5) as h:
        assert sum(p.numel() for p in model.parameters()) == n_before
        assert h.gates()[0].gate() == 0.5
    with C.use_prior_attention(model, layers=[0, 1], mode="parallel", gate=0.2,
                               learn_gate=True) as h:
        assert sum(p.numel() for p in model.parameters()) == n_before + 2
        gate = h.gates()[0]
        # sigmoid(log(0.2 / 0.8)) in float32: off by a few eps, inside approx's 1e-6
        assert gate.gate().item() == pytest.approx(0.2)
        batch = F.pair_batch([(A, B)], model=bert)
        F.pair_cosines(model, batch).sum().backward()
        assert gate.gate_logit.grad is not None and gate.gate_logit.grad.abs() > 0


def test_real_prior_raises_attention_from_cat_to_feline_in_layer_0(bert):
    batch = F.pair_batch([(A, B)], model=bert)
    before = run(bert.model, batch).attentions[0][0, :, 2, 9:11].sum(-1)
    with C.use_prior_attention(bert):
        after = run(bert.model, batch, batch.prior).attentions[0][0, :, 2, 9:11].sum(-1)
    assert after.mean() > before.mean()


# ---------------------------------------------------------------- the lexicon


def test_lexicon_data():
    lexicon = C.load_lexicon()
    assert lexicon["cat", "feline"] == lexicon["feline", "cat"] == C.RELATION_SCORES["hypernym"]
    assert lexicon["mat", "rug"] == 1.0


# ---------------------------------------------------------------- bad input -> clear errors


def test_prior_of_the_wrong_shape_for_the_batch(bert):
    batch = F.pair_batch(PAIRS, model=bert)
    with C.use_prior_attention(bert):
        with pytest.raises(ValueError, match=r"prior must have shape \(batch, n, n\) = \(2, "):
            run(bert.model, batch, batch.prior[:1])
        with pytest.raises(ValueError, match="no prior was given"):
            run(bert.model, batch)
        with pytest.raises(TypeError, match="torch tensor"):
            run(bert.model, batch, batch.prior.numpy())


@pytest.mark.parametrize("value, message", [(-0.5, ">= 0 everywhere"), (float("nan"), "NaN"),
                                            (float("inf"), "NaN/inf")])
def test_negative_or_nan_prior(bert, value, message):
    batch = F.pair_batch([(A, B)], model=bert)
    prior = batch.prior.clone()
    prior[0, 2, 9] = value
    with C.use_prior_attention(bert), pytest.raises(ValueError, match=message):
        run(bert.model, batch, prior)
    assert bert.model.config._attn_implementation == "eager"


@pytest.mark.parametrize("layers, error", [(6, ValueError), (-1, ValueError), ([0, 7], ValueError),
                                           ([], ValueError), ("0", TypeError),
                                           ([True], TypeError), (1.5, TypeError)])
def test_layer_index_out_of_range(bert, layers, error):
    with pytest.raises(error, match=r"0\.\.5"):
        C.use_prior_attention(bert, layers=layers)
    assert bert.model.config._attn_implementation == "eager"


def test_unknown_mode_bad_gate_and_double_use(bert):
    with pytest.raises(ValueError, match=r"mode must be one of 'multiply', 'parallel'; got 'add'"):
        C.use_prior_attention(bert, mode="add")
    with pytest.raises(ValueError, match=r"gate must be a number in \[0.0, 1.0\], got 1.5"):
        C.use_prior_attention(bert, mode="parallel", gate=1.5)
    with pytest.raises(ValueError, match="needs mode='parallel'"):
        C.use_prior_attention(bert, learn_gate=True)
    with pytest.raises(ValueError, match="strictly inside"):
        C.use_prior_attention(bert, mode="parallel", gate=1.0, learn_gate=True)
    with C.use_prior_attention(bert), pytest.raises(ValueError, match="already on"):
        C.use_prior_attention(bert)
    with pytest.raises(TypeError, match="LoadedBert"):
        C.use_prior_attention("bert")


def test_a_pair_longer_than_the_model_allows(bert):
    with pytest.raises(ValueError, match="512 positions"):
        C.similarity_prior(A, "word " * 600, model=bert)


@pytest.mark.parametrize("a, b", [("", B), (A, "   "), ([], B)])
def test_an_empty_sentence_in_a_pair(bert, a, b):
    with pytest.raises(ValueError, match="empty"):
        C.similarity_prior(a, b, model=bert)


def test_other_bad_inputs(bert):
    with pytest.raises(ValueError, match="source must be one of"):
        C.similarity_prior(A, B, source="thesaurus", model=bert)
    with pytest.raises(ValueError, match=r"lexicon similarity of \('cat', 'feline'\) must be a number in \[0.0, 1.0\], got -1.0"):
        C.similarity_prior(A, B, model=bert, lexicon={("cat", "feline"): -1.0})
    with pytest.raises(TypeError, match="tokens_a must be a sentence"):
        C.similarity_prior(42, B, model=bert)
