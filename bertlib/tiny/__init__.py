"""Notebook 09's world: the generated language, the tiny BERT pre-trained on it, what it learned
(the agreement test on sets of test sentences, causal tests, a linear probe) and its committed
training runs.
"""
