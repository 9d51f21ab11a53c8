"""Widgets readable before running (issue 18) and widget errors (issue 13 item 4): each explorer
displays a static picture of its view before the live widget; only bertlib's own ValueError /
TypeError become messages; an error closes only the widget's own figure."""

import base64
import io

import matplotlib

matplotlib.use("Agg")

import IPython.display  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

from bertlib.hf.models import check_layer_head, run_bert  # noqa: E402
from bertlib.pictures.bertviz_offline import head_view, model_view, with_static_snapshot  # noqa: E402
from bertlib.pictures.widgets import (  # noqa: E402
    LIVE_CLASS,
    LIVE_CSS,
    attempt,
    is_input_error,
    render_safely,
    static_bundle,
)
from bertlib.pictures.widgets.attention import ToyAttentionExplorer  # noqa: E402
from bertlib.pictures.widgets.efficient import EfficientExplorer  # noqa: E402
from bertlib.pictures.widgets.explorer import BertAttentionExplorer  # noqa: E402
from bertlib.pictures.widgets.heads import HeadExplorer  # noqa: E402
from bertlib.pictures.widgets.heads_overlay import heads_overlay  # noqa: E402

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
MAX_PICTURE = 120_000  # characters of base64 per static picture: small next to the 2 MB limit


@pytest.fixture
def displayed(monkeypatch):
    """The (object, raw) pairs passed to IPython's display (outside a kernel nothing shows)."""
    seen = []
    monkeypatch.setattr(IPython.display, "display",
                        lambda *objs, raw=False, **kw: seen.extend((o, raw) for o in objs))
    return seen


def shown_bundles(widget, displayed) -> list[dict]:
    displayed.clear()
    widget._ipython_display_()
    assert all(raw for _, raw in displayed)
    return [obj for obj, _ in displayed]


def png_size(bundle: dict) -> tuple[int, int]:
    return Image.open(io.BytesIO(base64.b64decode(bundle["image/png"]))).size


def toy_maps():
    rng = np.random.default_rng(0)
    W = rng.random((2, 6, 6))
    return W / W.sum(-1, keepdims=True), ["the", "cat", "sat", "on", "the", "mat"]


@pytest.fixture(scope="module")
def explorers():
    """One of each explorer, built once (each is a forward pass and a draw): the tests that take
    it only display them, never move a control. The two BERT ones show the same text."""
    W, tokens = toy_maps()
    return {
        "toy": ToyAttentionExplorer(query="cat"),
        "heads": HeadExplorer(W, tokens, query="cat"),
        "efficient": EfficientExplorer("the cat sat on the soft red mat"),  # 10 pieces
        "bert": BertAttentionExplorer("The cat sat on the mat."),
        "bert with overlay": BertAttentionExplorer("The cat sat on the mat.", overlay=heads_overlay),
    }


@pytest.fixture(scope="module")
def shown(explorers):
    """What each explorer of ``explorers`` displays, once: name -> [static picture, live box]
    (the tests that take it only read the bundles)."""
    with pytest.MonkeyPatch.context() as mp:
        seen = []
        mp.setattr(IPython.display, "display",
                   lambda *objs, raw=False, **kw: seen.extend((o, raw) for o in objs))
        return {name: shown_bundles(explorer.widget, seen) for name, explorer in explorers.items()}


# --- a static picture before the live widget ------------------------------------------------
def test_every_explorer_shows_a_picture_then_the_widget_without_its_text_repr(explorers, shown):
    for name, explorer in explorers.items():
        static, live = shown[name]
        width, height = png_size(static)
        assert width > 200 and height > 100, name
        assert len(static["image/png"]) < MAX_PICTURE, (name, len(static["image/png"]))
        assert static["text/plain"] and "VBox(" not in static["text/plain"], name
        assert live[WIDGET_VIEW]["model_id"] == explorer.widget.model_id, name
        assert not live["text/plain"].startswith(("VBox(", "HBox(", "Output(")), name
        assert "run the cell" in live["text/plain"], name


def test_the_attention_explorer_displays_itself_the_same_way(displayed, explorers):
    explorer = explorers["bert"]
    explorer._ipython_display_()
    assert [o for o, _ in displayed] == [explorer.widget]  # IPython then calls the box's
    static, live = shown_bundles(explorer.widget, displayed)
    assert "image/png" in static and WIDGET_VIEW in live


def test_the_live_box_carries_the_css_that_hides_the_picture_above_it():
    box = ToyAttentionExplorer().widget
    assert LIVE_CLASS in box._dom_classes
    style = box.children[-1]
    assert style.value == f"<style>{LIVE_CSS}</style>" and style.layout.display == "none"
    assert ":has(+ .jp-OutputArea-child .bertlib-live)" in LIVE_CSS


def test_static_picture_follows_the_current_view_and_is_deterministic(displayed):
    explorer = BertAttentionExplorer("The cat sat on the mat")
    first = shown_bundles(explorer.widget, displayed)[0]
    assert first == shown_bundles(explorer.widget, displayed)[0]  # same view, same bytes
    explorer.set_layer(0)
    explorer.set_head(3)
    moved = shown_bundles(explorer.widget, displayed)[0]
    assert moved["image/png"] != first["image/png"]
    assert moved["text/plain"].endswith("layer 0, head 3")
    # learner 28: the text fallback carried "the cat sat on the …", lower-cased and cut short
    assert moved["text/plain"] == "attention of 'The cat sat on the mat': layer 0, head 3"


def test_overlay_text_goes_under_the_picture(shown):
    h_plain = png_size(shown["bert"][0])[1]  # the two BERT explorers show the same text
    h_overlaid = png_size(shown["bert with overlay"][0])[1]
    assert h_overlaid > h_plain  # two lines of overlay text below the view


@pytest.mark.parametrize("text", ["", "   "])
def test_an_explorer_that_cannot_draw_shows_its_message_not_a_traceback(displayed, text):
    explorer = BertAttentionExplorer(text)
    static, live = shown_bundles(explorer.widget, displayed)
    assert explorer.message.startswith("ValueError: text is empty")
    assert static["text/plain"] == explorer.message
    assert "text is empty" in static["text/html"] and "Traceback" not in static["text/html"]
    assert WIDGET_VIEW in live


def test_after_bad_input_the_picture_has_the_message_above_the_last_view(displayed):
    explorer = BertAttentionExplorer("The cat sat on the mat")
    explorer.set_text("   ")
    static = shown_bundles(explorer.widget, displayed)[0]
    assert static["text/plain"] == explorer.message
    html = static["text/html"]
    assert html.index("text is empty") < html.index('<img src="data:image/png;base64,')


def test_a_matplotlib_explorer_with_bad_input_shows_the_same_message(displayed):
    explorer = ToyAttentionExplorer(scaling="temperature")
    explorer.temperature.value = -1.0
    static = shown_bundles(explorer.widget, displayed)[0]
    assert "temperature must be a number" in static["text/html"] and "1e-300" in static["text/html"]
    assert "got -1.0" in static["text/html"]
    assert "image/png" not in static


# --- bertviz views carry a snapshot -----------------------------------------------------------
@pytest.fixture(scope="module")
def fox():
    return run_bert("The quick brown fox jumps over the lazy dog")


@pytest.mark.parametrize("view", [head_view, model_view])
def test_bertviz_views_carry_a_png_snapshot_that_the_view_replaces(fox, view):
    # one layer of two heads: the snapshot's place in the page does not depend on how many
    # maps it draws (fewer panels: a cheaper picture, the same page)
    html = view(fox.tokens, fox.attentions[:1, :2]).data
    root = html[html.index('<div id="bertviz-'):]
    image = root.index('<img class="bertlib-static"')
    assert image < root.index("</div>", root.index("<div id='vis'>") + 15) + 10
    data = html.split('src="data:image/png;base64,')[1].split('"')[0]
    assert 1000 < len(data) < MAX_PICTURE
    Image.open(io.BytesIO(base64.b64decode(data))).verify()
    view_id = root[len('<div id="'):root.index('"', 9)]
    assert f'document.getElementById("{view_id}")' in html  # the script that removes it
    assert 'class="bertlib-until-run" style="user-select:none;display:none"' in html


def test_head_view_snapshot_is_the_layer_shown_first(fox):
    first, third = (head_view(fox.tokens, fox.attentions, layer=k, heads=[0]).data
                    for k in (0, 2))
    assert 'alt="head view of layer 0' in first and 'alt="head view of layer 2' in third


def test_snapshot_refuses_unexpected_bertviz_html():
    with pytest.raises(RuntimeError, match="unexpected bertviz HTML"):
        with_static_snapshot("<div>no view</div>", b"", "alt")


# --- only bertlib's own checks become messages (issue 13 item 4) -------------------------------
def test_is_input_error_only_for_bertlibs_own_value_and_type_errors():
    def caught(fn):
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - the point is to inspect it
            return exc
        raise AssertionError("no exception")

    assert is_input_error(caught(lambda: check_layer_head(np.zeros((6, 12, 3, 3)), 9)))
    assert is_input_error(TypeError("made by a widget, not raised"))
    assert not is_input_error(caught(lambda: np.zeros(3) + np.zeros(4)))  # numpy's own
    assert not is_input_error(caught(lambda: [][1]))
    assert not is_input_error(caught(lambda: {}["key"]))


def test_attempt_returns_the_result_or_the_learners_mistake_and_lets_bugs_through():
    assert attempt(check_layer_head, np.zeros((6, 12, 3, 3)), 2, 3) == ((2, 3), "")
    result, message = attempt(check_layer_head, np.zeros((6, 12, 3, 3)), 9)
    assert result is None
    assert message.startswith("ValueError: layer must be a whole number in 0..5")
    with pytest.raises(ValueError, match="operands could not be broadcast"):
        attempt(lambda: np.zeros(3) + np.zeros(4))  # numpy's own error is a bug: a traceback


class FakeOutput:
    def clear_output(self, wait=False):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("bug", [IndexError("index 7 is out of bounds"), KeyError("head"),
                                 "numpy"])
def test_a_bug_in_a_draw_is_a_real_traceback_not_a_message(displayed, bug):
    def draw():
        plt.subplots()
        if bug == "numpy":
            np.zeros(3) + np.zeros(4)  # a ValueError raised inside numpy, not by a check
        raise bug

    with pytest.raises(ValueError if bug == "numpy" else type(bug)):
        render_safely(FakeOutput(), draw)
    assert not [o for o, _ in displayed if isinstance(o, IPython.display.HTML)]


def test_bad_input_closes_only_the_widgets_own_figure(displayed):
    learners = plt.figure()

    def draw():
        plt.subplots()
        check_layer_head(np.zeros((6, 12, 3, 3)), 9)

    drawn = render_safely(FakeOutput(), draw)
    assert not drawn and "layer must be a whole number in 0..5" in drawn.message
    assert plt.get_fignums() == [learners.number]


def test_a_good_draw_shows_and_closes_only_its_own_figure(displayed):
    learners = plt.figure()
    drawn = render_safely(FakeOutput(), lambda: plt.subplots())
    assert drawn and drawn.png.startswith(b"\x89PNG")
    assert plt.get_fignums() == [learners.number]
    assert [type(o) for o, _ in displayed] == [IPython.display.Image]


def test_a_bug_in_the_forward_pass_reaches_the_learner_as_a_traceback(monkeypatch):
    explorer = BertAttentionExplorer("The cat sat on the mat")

    def broken(*args, **kwargs):
        return [][0]

    monkeypatch.setattr("bertlib.pictures.widgets.explorer.run_bert", broken)
    with pytest.raises(IndexError):
        explorer.set_text("A new sentence")


def test_a_bug_in_an_overlay_is_a_traceback_too():
    def overlay(tokens, attentions, layer, head):
        return tokens[99]

    with pytest.raises(IndexError):
        BertAttentionExplorer("Hello world", overlay=overlay)


def test_a_view_that_drew_nothing_and_said_nothing_is_shown_as_such():
    assert static_bundle(None)["text/plain"] == "(nothing drawn)"
