"""Measuring: claims that hold over a set (claims), statistics over attention maps (analysis), cost
formulas and measurements (cost), peak memory.
"""
