"""A pytest plugin that `make test` loads first (``-p tests.lazy_iri``): it defers the one slow
import of pytest's start-up until something uses it.

nbval's plugin imports nbformat, nbformat imports jsonschema, and jsonschema's format checkers
import ``rfc3987_syntax`` when it is installed (jupyterlab's jupyter-events installs it, through
``jsonschema[format-nongpl]``). That package builds an Earley parser of RFC 3987's grammar while
it is imported: about 4 s of CPU, in each of make test's three pytest processes (the xdist
controller and its two workers), for a checker of the "iri" format that nothing in the run asks
for (nbformat's schema is draft 4, which has no "iri").

Here the package is put in ``sys.modules`` as a stand-in that holds only what jsonschema takes
from it, ``is_valid_syntax``; the first call imports the real parser and hands the call on, so
a validation that does check an IRI gets the real answer. ``-p`` plugins load before the
installed plugins (pytest's own order), hence before nbval's. Nothing changes where the
package is missing or already imported.
"""

import importlib
import importlib.util
import sys
import types

_NAME = "rfc3987_syntax"


def _is_valid_syntax(term: str, value: str) -> bool:
    """rfc3987_syntax.is_valid_syntax, from the real parser (built on the first call)."""
    return importlib.import_module(f"{_NAME}.syntax_helpers").is_valid_syntax(term, value)


def _install_stand_in() -> None:
    if _NAME in sys.modules:
        return
    spec = importlib.util.find_spec(_NAME)
    if spec is None or spec.submodule_search_locations is None:
        return
    stand_in = types.ModuleType(_NAME, "rfc3987_syntax, its parser built on first use "
                                "(tests/lazy_iri.py)")
    stand_in.__path__ = list(spec.submodule_search_locations)  # its submodules import as usual
    stand_in.__spec__ = spec
    stand_in.is_valid_syntax = _is_valid_syntax
    sys.modules[_NAME] = stand_in


_install_stand_in()
