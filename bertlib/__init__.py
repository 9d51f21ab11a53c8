"""bertlib: the helpers behind the notebook series on BERT's attention.

One module per topic, each readable in one sitting; docs/ARCHITECTURE.md is the map (what each
module holds, its level, which notebooks use it). Import the module you need, e.g.
``from bertlib import attention``; nothing heavy loads here.
"""

__version__ = "0.1.0"
