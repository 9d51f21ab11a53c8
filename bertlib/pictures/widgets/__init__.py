"""ipywidgets explorers. One module per explorer; this file holds what they share.

Every explorer follows the same rules: controls on top, the view below, sliders with
``continuous_update=False``, forward passes cached, and bad input shown as a message in place of
the view (never a traceback), leaving the controls usable.

Readable before running: each explorer's box is a :class:`LiveBox`. Displayed, it writes two
outputs: first a static picture of its current view (a PNG, or the message the view shows),
then the live widget. A viewer without a kernel or without the widget state (GitHub, nbviewer,
nbconvert's HTML, an untrusted notebook in JupyterLab) shows the picture; where the live widget
renders, it hides the picture just above it with a CSS rule it carries (``LIVE_CSS``).
"""

from __future__ import annotations

import base64
import html
from collections.abc import Callable
from pathlib import Path

import IPython.display
import ipywidgets as w
import matplotlib.pyplot as plt

from bertlib.checks import whole
from bertlib.pictures.viz import figure_png, small_png

#: The errors a learner's input can cause, when bertlib's own checks raise them
#: (:func:`is_input_error`); anything else is a bug and is shown as one.
INPUT_ERRORS = (ValueError, TypeError)

_BERTLIB = Path(__file__).resolve().parents[2]

#: The class of a live explorer's box, and the CSS that hides the static picture output right
#: before it (JupyterLab, nbconvert's lab template; classic notebook) once the box renders.
LIVE_CLASS = "bertlib-live"
LIVE_CSS = (
    f".jp-OutputArea-child:has(+ .jp-OutputArea-child .{LIVE_CLASS}),"
    f".output_area:has(+ .output_area .{LIVE_CLASS}){{display:none}}"
)


def query_index(query, tokens: list[str]) -> int:
    """Position of the query in ``tokens`` (n of them): an index 0..n−1, or a word, matched
    without regard to case or surrounding spaces, at its first occurrence.

    Raises ValueError for a word not among the tokens (naming them) or an index out of range,
    TypeError for anything else (a float, a bool).
    """
    if not isinstance(query, str):
        return whole(query, "query", 0, len(tokens) - 1, why=f"({len(tokens)} tokens) or a token")
    lowered = [t.lower() for t in tokens]
    word = query.strip().lower()
    if word not in lowered:
        raise ValueError(f"query word {query!r} is not among the tokens {list(tokens)} "
                         "(case is ignored)")
    return lowered.index(word)


def is_input_error(exc: BaseException) -> bool:
    """True when ``exc`` means bad learner input: a ValueError or TypeError raised by bertlib's
    own checks (the innermost frame of its traceback is in a bertlib module). A ValueError from
    inside numpy or torch, an IndexError or a KeyError is a bug and must show as a traceback."""
    if not isinstance(exc, INPUT_ERRORS):
        return False
    tb = exc.__traceback__
    if tb is None:  # made, not raised (a widget reporting a bad control value itself)
        return True
    while tb.tb_next is not None:
        tb = tb.tb_next
    return Path(tb.tb_frame.f_code.co_filename).resolve().is_relative_to(_BERTLIB)


def attempt(fn: Callable, *args, **kwargs) -> tuple:
    """Call ``fn(*args, **kwargs)`` for a widget: returns ``(result, "")``, or ``(None, message)``
    when the learner's input was bad (:func:`is_input_error`; message "TypeError: ..."). Any other
    exception is a bug and propagates as a traceback."""
    try:
        return fn(*args, **kwargs), ""
    except INPUT_ERRORS as exc:
        if not is_input_error(exc):
            raise
        return None, f"{type(exc).__name__}: {exc}"


def message_html(text: str, kind: str = "error") -> str:
    """A small coloured HTML box for ``text`` (kind: 'error', 'warning' or 'info')."""
    colors = {"error": "#b00020", "warning": "#8a6d00", "info": "#1a5fb4"}
    color = colors.get(kind, colors["info"])
    return (f'<div style="border-left:4px solid {color};padding:4px 8px;color:{color};'
            f'font-family:sans-serif">{html.escape(text)}</div>')


def static_bundle(png: bytes | None, message: str = "", alt: str = "") -> dict:
    """The mimebundle of a static picture: ``image/png`` (with ``alt`` as text/plain) when the
    view drew, or the view's message as HTML (with the last picture under it, if any); a view
    that drew nothing and said nothing is shown as "(nothing drawn)"."""
    if png is None:
        message = message or "(nothing drawn)"
    if not message:
        return {"image/png": base64.b64encode(small_png(png)).decode("ascii"),
                "text/plain": alt or "(picture of the widget's view)"}
    picture = ""
    if png is not None:
        data = base64.b64encode(small_png(png)).decode("ascii")
        picture = f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt)}">'
    return {"text/html": message_html(message) + picture, "text/plain": message}


class LiveBox(w.VBox):
    """A VBox that displays a static picture of its view before itself (see the module)."""

    def __init__(self, children: list, static: Callable[[], dict], name: str) -> None:
        css = w.HTML(f"<style>{LIVE_CSS}</style>", layout=w.Layout(display="none"))
        super().__init__(list(children) + [css])
        self.add_class(LIVE_CLASS)
        self._static, self._name = static, name

    def _repr_mimebundle_(self, **kwargs):
        data = super()._repr_mimebundle_(**kwargs)
        data["text/plain"] = (f"[{self._name}: run the cell to use its controls; "
                              "the picture above is its view]")
        return data

    def _ipython_display_(self) -> None:
        IPython.display.display(self._static(), raw=True)
        IPython.display.display(self._repr_mimebundle_(), raw=True)


def live_box(children: list, static: Callable[[], dict], name: str) -> LiveBox:
    """A :class:`LiveBox` (an ipywidgets VBox) holding ``children`` and the CSS that hides the
    static picture once the box renders. static() returns the picture's mimebundle
    (:func:`static_bundle`); name is what the box is ("attention explorer"), for its text."""
    return LiveBox(children, static, name)


class Drawn:
    """What :func:`render_safely` drew: ``png`` (the last figure's PNG bytes, or None) and
    ``message`` (the error shown instead, or ""). True when the draw succeeded."""

    def __init__(self, png: bytes | None = None, message: str = "") -> None:
        self.png, self.message = png, message

    def __bool__(self) -> bool:
        return not self.message

    def bundle(self, alt: str) -> dict:
        """The static picture's mimebundle (:func:`static_bundle`)."""
        return static_bundle(self.png, self.message, alt)


def render_safely(output, draw: Callable[[], None], crop: bool = True) -> Drawn:
    """Clear ``output`` (an ipywidgets.Output) and call ``draw()`` inside it.

    The figures ``draw`` opens are shown as PNGs and closed (no other figure is touched); crop:
    as in :func:`bertlib.pictures.viz.figure_png` (False when ``draw`` lays its figure out to
    fit: one draw instead of two layouts and a draw). A learner's bad input
    (:func:`is_input_error`) becomes a red message in the output instead of a traceback, and the
    figures ``draw`` opened are closed; any other exception propagates.
    Returns a :class:`Drawn`, true when ``draw`` succeeded.
    """
    output.clear_output(wait=True)
    before = set(plt.get_fignums())
    with output:
        try:
            _, message = attempt(draw)
            if message:
                IPython.display.display(IPython.display.HTML(message_html(message)))
                return Drawn(None, message)
            png = None
            for k in sorted(set(plt.get_fignums()) - before):
                png = figure_png(plt.figure(k), crop=crop)
                IPython.display.display(IPython.display.Image(data=png, format="png"))
            return Drawn(png)
        finally:
            for k in set(plt.get_fignums()) - before:
                plt.close(k)
