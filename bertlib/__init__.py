"""bertlib: the helpers behind the notebook series on BERT's attention.

The folders sort the code by kind and are layers, lowest first (a module imports only from its
own folder or an earlier one): checks, paper/ (the equations), hf/ (the pretrained BERT through
transformers, and the equations run on it), lab/ (measuring), tiny/ (notebook 09's tiny BERT, a
transformers model it builds and trains), pictures/, exercises/.
docs/ARCHITECTURE.md is the map (what each module holds, its level, computed from its imports,
which notebooks use it).
Import the module you need, e.g. ``from bertlib.paper import attention``; nothing heavy loads here.
"""

__version__ = "0.1.0"
