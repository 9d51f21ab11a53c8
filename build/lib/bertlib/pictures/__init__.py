"""Pictures: matplotlib figures (viz), data-flow diagrams drawn by code, bertviz's views offline,
and the widgets (explorers).
"""
