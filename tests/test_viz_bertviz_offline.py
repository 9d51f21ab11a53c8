"""bertlib.pictures.bertviz_offline: bertviz's views render offline, carry a static snapshot, refuse bad
input and unexpected bertviz HTML."""

import re

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from nbval.plugin import get_sanitize_patterns  # noqa: E402

from bertlib.pictures import bertviz_offline  # noqa: E402
from bertlib.pictures.bertviz_offline import head_view, model_view, offline_bertviz_html  # noqa: E402

TOKENS = ["[CLS]", "the", "cat", "sat", "[SEP]"]



@pytest.mark.parametrize("view", [head_view, model_view])
def test_bertviz_views_are_offline_and_contain_libraries_and_tokens(view, attentions):
    html = view(TOKENS, attentions).data
    assert not re.search(r"<script[^>]+src=", html)  # nothing fetched
    assert "cdnjs" not in html
    assert "require.config({" not in html  # the CDN paths are gone
    cdn = r"https?://(cdnjs\.cloudflare\.com|cdn\.jsdelivr\.net|unpkg\.com|code\.jquery\.com|d3js\.org/d3)"
    assert not re.search(cdn, html)  # no CDN URL (the remaining URLs are in code comments)
    assert "d3js.org v5.7.0" in html  # d3 v5 inlined
    assert "RequireJS 2.3.7" in html  # require.js inlined
    assert "jQuery requires a window with a document" in html  # jQuery inlined
    assert 'define("d3"' in html and 'define("jquery"' in html
    for token in ("the", "cat", "sat"):
        assert f'"{token}"' in html
    assert "requirejs(['jquery', 'd3']" in html  # bertviz's own code is still there


def test_bertviz_sentence_pair_and_layer(attentions):
    html = head_view(TOKENS, attentions, layer=1, sentence_b_start=3).data
    assert '"layer": 1' in html
    with pytest.raises(ValueError, match=r"layer must be a whole number in 0\.\.1 \(2 layers\), got 2"):
        head_view(TOKENS, attentions, layer=2)
    with pytest.raises(ValueError, match=r"sentence_b_start must be a whole number in 1\.\.4"):
        head_view(TOKENS, attentions, sentence_b_start=5)


@pytest.mark.parametrize("bad, match", [
    (np.ones((3, 5, 5)), r"\(layers, heads, n, n\)"),
    (np.full((1, 1, 5, 5), np.nan), "NaN"),
    (np.ones((1, 1, 4, 4)) / 4, r"attentions must have shape \(layers, heads, n, n\) = \(layers, heads, 5, 5\) for 5 tokens, got \(1, 1, 4, 4\)"),
])
def test_bertviz_bad_input(bad, match):
    with pytest.raises(ValueError, match=match):
        model_view(TOKENS, bad)


def test_offline_html_refuses_unexpected_bertviz_output():
    with pytest.raises(RuntimeError, match="unexpected bertviz HTML"):
        offline_bertviz_html("<div>no scripts here</div>")


def test_nbval_sanitizer_removes_random_ids_and_weights(attentions):
    with open("tests/nbval_sanitize.cfg") as f:
        patterns = get_sanitize_patterns(f.read())
    first, second = (head_view(TOKENS, attentions * s).data for s in (1.0, 0.999))
    assert first != second
    for regex, replacement in patterns:
        first = re.sub(regex, replacement, first)
        second = re.sub(regex, replacement, second)
    assert first == second  # a different uuid4 and last digits no longer matter
    assert '"left_text": ["[CLS]", "the", "cat", "sat", "[SEP]"]' in first


def test_library_sources_are_read_from_installed_packages():
    assert "d3js.org v5" in bertviz_offline._library_source("d3")
    with pytest.raises(KeyError):
        bertviz_offline._library_source("vue")


@pytest.mark.parametrize("view", [head_view, model_view])
def test_bertviz_views_also_offer_the_picture_as_png(view, attentions):
    # a reader that shows no HTML (or strips its images) falls back to image/png
    from IPython.core.formatters import DisplayFormatter

    shown = view(TOKENS, attentions)
    data, _ = DisplayFormatter().format(shown)
    assert data["image/png"].startswith(b"\x89PNG")
    assert "bertlib-static" in data["text/html"]  # the same picture inside the live view
    assert "run the cell" in data["text/plain"] and "IPython" not in data["text/plain"]


def test_head_view_figure_gives_each_head_a_distinct_named_colour():
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    A = np.full((1, 12, 5, 5), 0.2)
    for heads in ([0, 1, 2], [0, 10, 11], list(range(12))):
        fig = bertviz_offline.head_view_figure(TOKENS, A, heads=heads)
        legend = fig.legends[0]
        panels = [ax for ax in fig.axes if ax.get_visible()]
        assert [ax.get_title() for ax in panels] == [f"head {k}" for k in heads]  # one per head
        assert [t.get_text() for t in legend.get_texts()] == [f"head {k}" for k in heads]
        colours = [to_hex(line.get_color()) for line in legend.get_lines()]
        assert len(set(colours)) == len(heads)  # no two heads share a colour
        assert "opacity is its weight" in fig.get_suptitle()  # the still says how to read a line
        alphas = {round(c[3], 6) for ax in panels for c in ax.collections[0].get_colors()}
        assert alphas == {0.2}  # and it is true: every weight is 0.2
        plt.close(fig)
    # heads 0-9 keep bertviz's own colours (d3 category10 = matplotlib tab10)
    assert to_hex(bertviz_offline._head_colours([0, 1, 2])[1]) == to_hex(plt.get_cmap("tab10")(1))


def test_model_view_figure_labels_a_selection_and_has_a_colour_bar():
    import matplotlib.pyplot as plt

    A = np.full((6, 12, 5, 5), 0.2)
    fig = bertviz_offline.model_view_figure(TOKENS, A, layers=[0, 2, 4], heads=range(4))
    maps = [ax for ax in fig.axes if ax.images]
    assert len(maps) == 12 and len(fig.axes) == 13  # twelve thumbnails and the colour bar
    assert [ax.get_title() for ax in maps[:4]] == [f"head {k}" for k in range(4)]
    assert [maps[4 * r].get_ylabel() for r in range(3)] == ["layer 0", "layer 2", "layer 4"]
    assert [t.get_text() for t in maps[0].get_yticklabels()] == TOKENS  # queries named
    assert [t.get_text() for t in maps[8].get_xticklabels()] == TOKENS  # keys named
    assert any("attention weight" in ax.get_ylabel() for ax in fig.axes)  # the colour bar
    assert "3 of 6 layers × 4 of 12 heads" in fig.get_suptitle()
    plt.close(fig)
    with pytest.raises(ValueError, match=r"layer must be a whole number in 0\.\.5"):
        bertviz_offline.model_view_figure(TOKENS, A, layers=[6])
    with pytest.raises(ValueError, match=r"head must be a whole number in 0\.\.11"):
        bertviz_offline.model_view_figure(TOKENS, A, heads=[12])


def test_model_view_figure_token_labels_are_readable_in_a_still_picture():
    import matplotlib.pyplot as plt

    from bertlib.pictures.bertviz_offline import model_view_figure

    rng = np.random.default_rng(0)
    A = rng.random((3, 4, 5, 5))
    A /= A.sum(-1, keepdims=True)
    fig = model_view_figure([f"w{i}" for i in range(5)], A, layers=[0, 2], heads=range(3))
    try:
        labels = [t for ax in fig.axes for t in ax.get_xticklabels() + ax.get_yticklabels()
                  if t.get_text().startswith("w")]
        assert labels and min(t.get_fontsize() for t in labels) >= 10
    finally:
        plt.close(fig)
