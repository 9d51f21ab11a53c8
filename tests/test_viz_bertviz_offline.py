"""bertlib.bertviz_offline: bertviz's views render offline, carry a static snapshot, refuse bad
input and unexpected bertviz HTML."""

import re

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from nbval.plugin import get_sanitize_patterns  # noqa: E402

from bertlib import bertviz_offline  # noqa: E402
from bertlib.bertviz_offline import head_view, model_view, offline_bertviz_html  # noqa: E402

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
