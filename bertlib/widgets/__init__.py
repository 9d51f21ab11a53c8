"""ipywidgets explorers. One module per explorer; this file holds what they share.

Every explorer follows the same rules: controls on top, the view below, sliders with
``continuous_update=False``, forward passes cached, and bad input shown as a message in place of
the view (never a traceback), leaving the controls usable.
"""

from __future__ import annotations

import html
from collections.abc import Callable

#: The errors a learner's input can cause; anything else is a bug and is shown as one.
INPUT_ERRORS = (ValueError, TypeError, KeyError, IndexError, FileNotFoundError, OSError)


def message_html(text: str, kind: str = "error") -> str:
    """A small coloured HTML box for ``text`` (kind: 'error', 'warning' or 'info')."""
    colors = {"error": "#b00020", "warning": "#8a6d00", "info": "#1a5fb4"}
    color = colors.get(kind, colors["info"])
    return (f'<div style="border-left:4px solid {color};padding:4px 8px;color:{color};'
            f'font-family:sans-serif">{html.escape(text)}</div>')


def render_safely(output, draw: Callable[[], None]) -> bool:
    """Clear ``output`` (an ipywidgets.Output) and call ``draw()`` inside it.

    A learner's bad input (ValueError, TypeError, ...) becomes a red message in the output instead
    of a traceback. Returns True when ``draw`` succeeded.
    """
    import matplotlib.pyplot as plt
    from IPython.display import HTML, display

    output.clear_output(wait=True)
    with output:
        try:
            draw()
            plt.show()
            return True
        except INPUT_ERRORS as exc:
            plt.close("all")
            display(HTML(message_html(f"{type(exc).__name__}: {exc}")))
            return False
