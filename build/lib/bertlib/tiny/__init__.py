"""Notebook 09's world: the generated language, the tiny BERT pre-trained on it, what it learned
(probes, causal tests) and its committed training runs.
"""
