"""The fill-mask explorer: a picture of its view before the live widget, messages for bad text."""

import matplotlib

matplotlib.use("Agg")
import pytest  # noqa: E402

from bertlib.pictures.widgets.fill_mask import FillMaskExplorer, fill_mask_figure  # noqa: E402
from bertlib.tiny import agreement  # noqa: E402
from bertlib.tiny import pretrain as pt  # noqa: E402

TEXT = "the dog [MASK] the cat"


@pytest.fixture(scope="module")
def tiny():
    tok = agreement.build_tokenizer()
    return pt.new_model(pt.tiny_config(tok.get_vocab_size(), layers=2, heads=2, hidden=16), 0), tok


def test_figure_shows_the_tokens_and_the_top_words(tiny):
    model, tok = tiny
    fig = fill_mask_figure(model, tok, TEXT, layer=1, head=0, k=3)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["[CLS]", *TEXT.split(), "[SEP]"]
    assert ax.get_title().startswith("[MASK] → ") and "layer 1 head 0" in ax.get_title()


def test_static_picture_is_a_png_then_a_message_for_bad_text(tiny):
    model, tok = tiny
    explorer = FillMaskExplorer(model, tok, TEXT, layer=0, head=1)
    assert "image/png" in explorer._static()
    assert explorer.page.value.startswith("<img ")  # the live view is the same picture
    explorer.text.value = "the dog runs"  # no [MASK]
    bundle = explorer._static()
    assert "image/png" not in bundle and "exactly one [MASK]" in bundle["text/plain"]
    assert "exactly one [MASK]" in explorer.page.value  # the live view says the same


def test_word_outside_the_language_is_named(tiny):
    model, tok = tiny
    explorer = FillMaskExplorer(model, tok, "the zebra [MASK]", layer=0, head=0)
    assert "zebra" in explorer.page.value and "zebra" in explorer._static()["text/plain"]
