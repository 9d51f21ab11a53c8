"""bertlib.pictures.widgets.explorer: the attention explorer builds, redraws, and turns bad input into a
message while the last valid view stays usable."""

import html
import re

import numpy as np
import pytest

from bertlib.hf.loading import load_bert
from bertlib.hf.models import attention_maps
from bertlib.pictures.widgets.explorer import (
    MEAN,
    MIN_LINE_WEIGHT,
    TOP_KEYS,
    BertAttentionExplorer,
    selected_weights,
    view_figure,
    view_html,
)


@pytest.fixture
def explorer():
    return BertAttentionExplorer("The cat sat on the mat")


def title(ex):
    return html.unescape(re.search(r'class="view-title">(.*?)</text>', ex.view.value).group(1))


def column_labels(source):
    return [html.unescape(t) for t in re.findall(r'rotate\(-90\)" text-anchor="end">(.*?)</text>',
                                                 source)]


def x_labels(ex):
    return column_labels(ex.view.value)


def test_builds_with_controls_on_top_and_view_below(explorer):
    children = explorer.widget.children
    assert children[0] is explorer.text_box and children[1] is explorer.pair_box
    assert explorer.view in children and explorer.overlay_html in children
    assert children.index(explorer.view) > 2
    assert explorer.text_box.continuous_update is False
    assert explorer.layer_box.continuous_update is False
    assert explorer.message == ""
    assert x_labels(explorer) == ["[CLS]", "the", "cat", "sat", "on", "the", "mat", "[SEP]"]
    assert title(explorer) == "layer 5, mean of 12 heads"


def test_head_options_include_the_mean(explorer):
    labels = [label for label, _ in explorer.head_box.options]
    assert labels[0] == "mean of heads" and labels[1:] == [f"head {h}" for h in range(12)]


def test_redraws_on_new_text_layer_and_head(explorer):
    assert explorer.set_text("A dog barked loudly")
    assert x_labels(explorer)[:3] == ["[CLS]", "a", "dog"]
    assert explorer.set_layer(2) and title(explorer) == "layer 2, mean of 12 heads"
    assert explorer.set_head(7) and title(explorer) == "layer 2, head 7"
    assert explorer.set_head(None) and title(explorer) == "layer 2, mean of 12 heads"


def test_typing_into_the_controls_redraws(explorer):
    explorer.text_box.value = "Birds fly south"
    assert "birds" in x_labels(explorer)
    explorer.layer_box.value = 0
    explorer.head_box.value = 3
    assert title(explorer) == "layer 0, head 3"


def test_sentence_pair_uses_token_types(explorer):
    assert explorer.set_text("The cat sat.", "It slept.")
    assert x_labels(explorer).count("[SEP]") == 2


def test_drawn_map_is_the_selected_head(explorer):
    tokens, att = attention_maps("The cat sat on the mat")
    explorer.set_layer(1)
    explorer.set_head(4)
    assert np.allclose(explorer.weights, att[1, 4])
    source = explorer.view.value
    assert source.count("<line ") == (att[1, 4] >= MIN_LINE_WEIGHT).sum()
    explorer.set_head(None)
    assert np.allclose(explorer.weights, att[1].mean(0))
    assert explorer.view.value != source


@pytest.mark.parametrize("text", ["", "   "])
def test_empty_sentence_shows_a_message_and_keeps_the_last_view(explorer, text):
    assert explorer.set_text(text) is False
    assert "empty or only whitespace" in explorer.message
    assert explorer.tokens[2] == "cat"  # the last valid sentence is still loaded
    message_end = explorer.view.value.index("</div>")  # the message, then the last valid view
    assert "empty or only whitespace" in explorer.view.value[:message_end]
    assert explorer.view.value.endswith(explorer.view_source) and "explorer-view" in explorer.view_source
    assert explorer.set_head(2) and explorer.message == ""  # and its controls still work


def test_too_long_sentence_shows_a_message(explorer):
    assert explorer.set_text(" ".join(["word"] * 600)) is False
    assert "602 word pieces" in explorer.message and "512 positions" in explorer.message
    # advice the widget user can follow: there is no keyword argument to pass inside a widget
    assert "shorten the text in the sentence boxes" in explorer.message
    assert "truncate" not in explorer.message and "truncate" not in explorer.view.value


def test_set_head_accepts_the_mean_as_the_dropdown_offers_it(explorer):
    assert explorer.set_layer(2) and explorer.set_head(3)
    assert explorer.set_head("mean") and explorer.head_box.value == MEAN
    assert explorer._head is None and explorer.message == ""
    assert explorer.set_head(" Mean of heads ") and explorer._head is None
    assert explorer.set_head("first") is False and "head must be" in explorer.message


def test_layer_out_of_range_shows_the_valid_range(explorer):
    assert explorer.set_layer(7) is False
    assert explorer.message == "ValueError: layer must be a whole number in 0..5 (6 layers), got 7"
    explorer.layer_box.value = -1  # typed into the box
    assert "got -1" in explorer.message
    assert explorer.set_layer(3) and title(explorer) == "layer 3, mean of 12 heads"


def test_bad_head_and_layer_types_show_messages(explorer):
    assert explorer.set_head(12) is False and "head must be a whole number in 0..11" in explorer.message
    assert explorer.set_layer(1.5) is False and "whole number" in explorer.message


def test_odd_characters_do_not_crash(explorer):
    assert explorer.set_text("Café 😀 日本")
    assert "[UNK]" in explorer.tokens


def test_overlay_receives_the_selection_and_is_shown():
    calls = []

    def overlay(tokens, attentions, layer, head):
        calls.append((len(tokens), attentions.shape, layer, head))
        return f"<b>{tokens[1]}</b> layer={layer} head={head}"

    ex = BertAttentionExplorer("Hello world", overlay=overlay)
    assert calls[-1] == (4, (6, 12, 4, 4), 5, None)
    assert ex.overlay_html.value == "<b>hello</b> layer=5 head=None"
    ex.set_head(3)
    assert calls[-1][3] == 3 and "head=3" in ex.overlay_html.value


def test_overlay_error_from_bertlibs_checks_becomes_a_message():
    def overlay(tokens, attentions, layer, head):
        return str(selected_weights(attentions, layer + 99, head))  # bertlib's check raises

    ex = BertAttentionExplorer("Hello world", overlay=overlay)
    assert "layer must be a whole number in 0..5" in ex.message
    assert "layer must be a whole number in 0..5" in ex.overlay_html.value
    with pytest.raises(TypeError, match="overlay must be a callable"):
        BertAttentionExplorer(overlay="not callable")


def test_selected_weights_and_view_of_a_long_input():
    att = np.full((2, 3, 60, 60), 1 / 60)
    assert np.allclose(selected_weights(att, 1, None).sum(-1), 1)
    with pytest.raises(ValueError, match=r"head must be a whole number in 0\.\.2"):
        selected_weights(att, 0, 3)
    source = view_html([f"t{i}" for i in range(60)], att, 1, 2)
    assert column_labels(source) == [f"t{i}" for i in range(0, 60, 2)]  # fewer labels
    assert source.count("<line ") == 60 * TOP_KEYS  # only each query's strongest keys
    assert "layer 1, head 2" in source
    assert "60 tokens: one label in 2 shown; lines for each query's 4 strongest keys" in source


def test_view_is_html_with_escaped_token_text():
    att = np.full((1, 1, 3, 3), 1 / 3)
    source = view_html(["[CLS]", "<b>&", "[SEP]"], att, 0, None)
    assert source.startswith('<div class="explorer-view"')
    assert "&lt;b&gt;&amp;" in source and "<b>&" not in source
    assert "layer 0, mean of 1 heads" in source


def test_view_of_a_real_sentence_names_its_tokens(explorer):
    explorer.set_text("Birds fly south when winter comes")
    text = re.sub(r"<[^>]+>", " ", explorer.view.value)
    assert "birds" in text.split() and "winter" in text.split()


def test_displays_itself(explorer, monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    explorer._ipython_display_()
    assert shown == [explorer.widget]


def test_uses_the_given_model(explorer):
    assert explorer.model is load_bert()


def test_static_picture_is_titled_with_the_sentence_shown(monkeypatch):
    from bertlib.pictures.widgets import explorer as module

    titles = []

    def spy(*args):
        fig = view_figure(*args)
        titles.append(fig._suptitle.get_text())
        return fig

    monkeypatch.setattr(module, "view_figure", spy)
    ex = BertAttentionExplorer("The cat sat on the mat", text_pair="It purred")
    assert "image/png" in ex._static()
    assert titles[-1] == "'The cat sat on the mat' / 'It purred'"
