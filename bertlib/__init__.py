"""bertlib: the helpers behind the notebook series on BERT's attention.

One module per topic (see DESIGN in the README): ``attention`` (numpy reference), ``toy``,
``models`` (the real pretrained BERT), ``bert`` (BERT from the equations), ``analysis``,
``cost``, ``variants``, ``family``, ``custom``, ``viz``, ``widgets`` and ``exercises``.
Import the module you need, e.g. ``from bertlib import attention``; nothing heavy loads here.
"""

__version__ = "0.1.0"
